"""External-port claims at the store level (engine/admission/port_claims.py): two applies racing
for one external port — on etcd each through its own client, as two API servers have; on SQLite
(one process only) two threads of one server on its store — both having read the store before
either commits, never both win. The loser
is refused naming the port and the holder, and nothing of its apply is written. Deleting the
service or dropping the port releases the claim."""

from __future__ import annotations

import threading

from admission_builders import ADMIN, CommitAfterBothRead, service

from ccattler.engine.admission import Denied, delete_objects
from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.admission.port_claims import claim_key

CLAIM = claim_key(443, "tcp")


def exposing(full: str, port: int | None, source: str):
    key, doc = service(full, source=source)
    if port is not None:
        doc["expose"] = [{"port": port, "protocol": "tcp", "external": True}]
    return key, doc


def app(name: str, port: int | None = 443) -> dict:
    """A file with a service exposing `port` external and a helper service beside it."""
    source = f"{name}.cca"
    return dict([exposing(f"{name}/front", port, source), exposing(f"{name}/helper", None, source)])


def test_two_applies_racing_for_one_external_port_one_wins(servers):
    barrier = threading.Barrier(2)
    outcome: dict[str, object] = {}
    racing = {n: CommitAfterBothRead(s, barrier) for s, n in zip(servers, ("shop", "blog"), strict=True)}

    def run(name: str) -> None:
        try:
            outcome[name] = apply_compiled(racing[name], ADMIN, app(name), {f"{name}.cca"})
        except Exception as exc:  # noqa: BLE001 — the loser's refusal is the result
            outcome[name] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in racing]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    denied = {n: o for n, o in outcome.items() if isinstance(o, Denied)}
    assert len(denied) == 1, outcome
    ((loser, refusal),) = denied.items()
    winner = ({"shop", "blog"} - {loser}).pop()
    assert racing[loser].tries[0] is False and racing[winner].tries == [True]  # judged on one state
    (denial,) = refusal.denials
    assert (denial.code, denial.value) == ("external_port_taken", "443/tcp")
    assert f"{winner}/front" in denial.message and f"{loser}/front" in denial.message, denial.message
    store = servers[0]
    assert store.get(CLAIM).value == {"service": f"{winner}/front", "port": 443, "protocol": "tcp"}
    assert store.get(f"desired/service/{loser}/front") is None
    assert store.get(f"desired/service/{loser}/helper") is None  # nothing of the losing apply
    assert store.get(f"desired/service/{winner}/helper") is not None


def test_many_applies_at_once_leave_exactly_one_holder(servers):
    names = [f"t{i}" for i in range(6)]
    outcome: dict[str, object] = {}
    start = threading.Barrier(len(names))

    def run(i: int, name: str) -> None:
        start.wait(timeout=30)
        try:
            outcome[name] = apply_compiled(servers[i % 2], ADMIN, app(name), {f"{name}.cca"})
        except Exception as exc:  # noqa: BLE001
            outcome[name] = exc

    threads = [threading.Thread(target=run, args=(i, n)) for i, n in enumerate(names)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [n for n, o in outcome.items() if not isinstance(o, Exception)]
    assert len(winners) == 1 and len(outcome) == len(names), outcome
    facts, _ = servers[1].range("desired/service/")
    assert {f.key for f in facts} == {f"desired/service/{winners[0]}/{n}" for n in ("front", "helper")}
    assert servers[1].get(CLAIM).value["service"] == f"{winners[0]}/front"


def test_deleting_the_service_or_dropping_the_port_releases_the_claim(servers):
    one, two = servers
    apply_compiled(one, ADMIN, app("shop"), {"shop.cca"})
    assert one.get(CLAIM).value["service"] == "shop/front"
    delete_objects(two, ADMIN, "service", "shop/front")
    assert one.get(CLAIM) is None
    apply_compiled(two, ADMIN, app("blog"), {"blog.cca"})  # free again
    assert one.get(CLAIM).value["service"] == "blog/front"
    apply_compiled(one, ADMIN, app("blog", port=None), {"blog.cca"})  # blog stops exposing it
    assert two.get(CLAIM) is None
    apply_compiled(one, ADMIN, app("blog", port=8443), {"blog.cca"})
    assert two.get(claim_key(8443, "tcp")).value["service"] == "blog/front"
    apply_compiled(two, ADMIN, {}, {"blog.cca"})  # the file declares nothing now: pruned, released
    assert two.get(claim_key(8443, "tcp")) is None and two.get("desired/service/blog/front") is None


def test_a_port_handed_over_in_one_apply_moves_its_claim(servers):
    one, _ = servers
    files = dict([exposing("shop/a", 443, "shop.cca"), exposing("shop/b", None, "shop.cca")])
    apply_compiled(one, ADMIN, files, {"shop.cca"})
    files = dict([exposing("shop/a", None, "shop.cca"), exposing("shop/b", 443, "shop.cca")])
    apply_compiled(one, ADMIN, files, {"shop.cca"})
    assert one.get(CLAIM).value["service"] == "shop/b"
