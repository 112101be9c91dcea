"""`share network` service groups: members are one network namespace, so admission refuses two
members exposing one port (rules/admission.lp, `group_port_clash`) — in one apply, and when the
group or a member is applied after the others are stored (a group may name services of other
files: the compiler sees only the files of the apply). The denial names the group, the port and
both services; nothing of the refused apply is written. Two applies racing (a group and a member,
or two members), both having read the store before either commits, never both win
(engine/admission/group_claims.py), in either order of commit."""

from __future__ import annotations

import threading

import pytest
from admission_builders import ADMIN, CommitAfterBothRead, seed, service

from ccattler.engine.admission import Denied
from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.facts.keys import SHARED_NETWORK


def member(full: str, *ports: tuple[int, str], source: str = "svc.cca"):
    key, doc = service(full, source=source)
    doc["expose"] = [{"port": p, "protocol": proto, "external": False} for p, proto in ports]
    return key, doc


def group(full: str, *services: str, share_network: bool = True, source: str = "group.cca"):
    tenant, _, name = full.rpartition("/")
    return f"desired/group/{tenant}/{name}", {
        "kind": "group", "tenant": tenant, "name": name, "source": source, "type": "service",
        "services": list(services), "share_network": share_network, "share_volumes": []}


def clashes(info: pytest.ExceptionInfo[Denied]) -> list[tuple[str, str]]:
    assert all(d.code == "group_port_clash" and d.policy == "network" for d in info.value.denials), \
        info.value.denials
    return sorted((d.subject, d.value) for d in info.value.denials)


def test_a_clash_within_one_apply_is_refused_naming_group_port_and_both_services(store):
    files = dict([member("shop/a", (8080, "tcp")), member("shop/b", (8080, "http")),
                  group("shop/g", "shop/a", "shop/b", source="svc.cca")])
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, files, {"svc.cca"})
    assert clashes(info) == [("create group shop/g", "8080/tcp"), ("create service shop/a", "8080/tcp"),
                             ("create service shop/b", "8080/tcp")]
    message = next(d.message for d in info.value.denials if d.subject == "create group shop/g")
    assert message.startswith('group "shop/g" shares its network, but shop/a and shop/b both listen '
                              "on tcp 8080"), message
    assert store.range("desired/")[0] == []  # nothing written


def test_a_group_applied_after_its_clashing_members_is_refused(store):
    apply_compiled(store, ADMIN, dict([member("shop/a", (8080, "tcp")), member("shop/b", (8080, "tcp"))]),
                   {"svc.cca"})
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a", "shop/b")]), {"group.cca"})
    assert clashes(info) == [("create group shop/g", "8080/tcp")]
    (denial,) = info.value.denials
    assert all(s in denial.message for s in ('"shop/g"', "shop/a", "shop/b", "tcp 8080")), denial.message
    assert store.get("desired/group/shop/g") is None


def test_a_member_applied_after_the_stored_group_is_refused(store):
    apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a", "shop/b"), member("shop/a", (5432, "tcp"),
                                                                                  source="group.cca")]),
                   {"group.cca"})  # shop/b is not there yet: the group is admitted
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([member("shop/b", (9000, "tcp"), (5432, "tcp"))]), {"b.cca"})
    assert clashes(info) == [("create service shop/b", "5432/tcp")]
    (denial,) = info.value.denials
    assert denial.message.startswith('group "shop/g" shares its network, but shop/b and shop/a both listen '
                                     "on tcp 5432"), denial.message
    assert store.get("desired/service/shop/b") is None
    # Moving a stored member onto its sibling's port is refused too.
    apply_compiled(store, ADMIN, dict([member("shop/b", (9000, "tcp"))]), {"b.cca"})
    with pytest.raises(Denied) as info:
        apply_compiled(store, ADMIN, dict([member("shop/b", (5432, "tcp"))]), {"b.cca"})
    assert clashes(info) == [("update service shop/b", "5432/tcp")]


def test_distinct_ports_other_protocols_and_groups_not_sharing_the_network_pass(store):
    apply_compiled(store, ADMIN, dict([member("shop/a", (8080, "tcp"), (53, "udp")),
                                       member("shop/b", (8081, "http"), (53, "tcp")),
                                       member("shop/c", (8080, "tcp"))]), {"svc.cca"})
    apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a", "shop/b", "shop/missing"),
                                       group("shop/h", "shop/a", "shop/c", share_network=False)]),
                   {"group.cca"})
    # A member may change its own ports while they stay its own.
    apply_compiled(store, ADMIN, dict([member("shop/a", (8082, "tcp"), (53, "udp")),
                                       member("shop/b", (8081, "http"), (53, "tcp")),
                                       member("shop/c", (8080, "tcp"))]), {"svc.cca"})
    assert store.get("desired/group/shop/g") is not None


def test_dropping_the_clashing_member_from_the_group_lets_it_through(store):
    apply_compiled(store, ADMIN, dict([member("shop/a", (8080, "tcp")), member("shop/b", (8080, "tcp"))]),
                   {"svc.cca"})
    with pytest.raises(Denied):
        apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a", "shop/b")]), {"group.cca"})
    apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a")]), {"group.cca"})
    assert store.get("desired/group/shop/g").value["services"] == ["shop/a"]


def race(servers, first: dict, second: dict) -> dict[str, object]:
    """Apply `first` and `second` (name → (files, source)) at once, each through its own server,
    both judged on the same state; `first` commits before `second` tries."""
    barrier = threading.Barrier(2)
    one = CommitAfterBothRead(servers[0], barrier)
    two = CommitAfterBothRead(servers[1], barrier, after=one.committed)
    outcome: dict[str, object] = {}

    def run(name: str, store, files: dict, source: str) -> None:
        try:
            outcome[name] = apply_compiled(store, ADMIN, files, {source})
        except Exception as exc:  # noqa: BLE001 — the loser's refusal is the result
            outcome[name] = exc

    ((name1, (files1, src1)),), ((name2, (files2, src2)),) = first.items(), second.items()
    threads = [threading.Thread(target=run, args=(name1, one, files1, src1)),
               threading.Thread(target=run, args=(name2, two, files2, src2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert one.tries == [True] and two.tries[0] is False, (one.tries, two.tries, outcome)  # one state judged
    return outcome


@pytest.mark.parametrize("group_first", [True, False], ids=["group-commits-first", "member-commits-first"])
def test_a_group_and_a_clashing_member_applied_at_once_never_both_win(servers, group_first):
    seed(servers[0], member("shop/a", (8080, "tcp"), source="a.cca"))
    grouping = {"group": (dict([group("shop/g", "shop/a", "shop/b")]), "group.cca")}
    joining = {"member": (dict([member("shop/b", (8080, "tcp"), source="b.cca")]), "b.cca")}
    outcome = race(servers, *((grouping, joining) if group_first else (joining, grouping)))
    loser = "member" if group_first else "group"
    assert not isinstance(outcome["member" if loser == "group" else "group"], Exception), outcome
    refusal = outcome[loser]
    assert isinstance(refusal, Denied), outcome
    (denial,) = refusal.denials
    assert (denial.code, denial.value) == ("group_port_clash", "8080/tcp"), denial
    assert all(s in denial.message for s in ('"shop/g"', "shop/a", "shop/b")), denial.message
    store = servers[0]
    assert (store.get("desired/group/shop/g") is None) == (loser == "group")
    assert (store.get("desired/service/shop/b") is None) == (loser == "member")


def test_two_members_moving_onto_one_port_at_once_never_both_win(servers):
    seed(servers[0], group("shop/g", "shop/a", "shop/b"),
         member("shop/a", (8080, "tcp"), source="a.cca"), member("shop/b", (9090, "tcp"), source="b.cca"))
    outcome = race(servers, {"a": (dict([member("shop/a", (7000, "tcp"), source="a.cca")]), "a.cca")},
                   {"b": (dict([member("shop/b", (7000, "tcp"), source="b.cca")]), "b.cca")})
    assert not isinstance(outcome["a"], Exception), outcome
    (denial,) = outcome["b"].denials
    assert (denial.subject, denial.code, denial.value) == \
        ("update service shop/b", "group_port_clash", "7000/tcp")
    assert servers[1].get("desired/service/shop/b").value["expose"][0]["port"] == 9090


def test_the_shared_network_marker_is_rewritten_only_when_a_group_gains_members(store):
    def marker():
        fact = store.get(SHARED_NETWORK)
        return fact and (fact.value, fact.mod_revision)

    apply_compiled(store, ADMIN, dict([group("shop/h", "shop/a", "shop/b", share_network=False)]), {"h.cca"})
    assert marker() is None  # co-placed only
    apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a", "shop/b")]), {"group.cca"})
    first = marker()
    assert first[0] == {"gained": {"shop/g": ["shop/a", "shop/b"]}}
    apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a")]), {"group.cca"})  # loses one
    apply_compiled(store, ADMIN, dict([member("shop/a", (80, "tcp"))]), {"svc.cca"})
    assert marker() == first
    apply_compiled(store, ADMIN, dict([group("shop/g", "shop/a", "shop/c")]), {"group.cca"})
    assert marker()[0] == {"gained": {"shop/g": ["shop/c"]}} and marker()[1] > first[1]
