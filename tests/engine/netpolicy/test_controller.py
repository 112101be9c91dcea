"""The network-policy controller: per-node documents, address-only changes, incrementality."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccattler.engine.facts.frozen import freeze
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.netpolicy.controller import NetpolicyController
from ccattler.engine.netpolicy.evaluate import evaluate, evaluate_for


def _rule(tenant, rid, action, src, dst, port=None, protocol=None):
    return f"desired/network/{tenant}/{rid}", {"kind": "network", "action": action, "from": src, "to": dst,
                                               "port": port, "protocol": protocol}


def _ip(tenant, service, inst, node, ip):
    return f"derived/network/ip/{tenant}/{inst}", {"instance": inst, "service": f"{tenant}/{service}",
                                                   "node": node, "ip": ip}


def _world():
    values = dict([
        ("desired/service/frontend/web", {"expose": [{"port": 80, "protocol": "tcp"}]}),
        ("desired/service/payments/checkout", {"expose": [{"port": 443, "protocol": "tcp"}]}),
        ("desired/service/payments/database", {"expose": [{"port": 5432, "protocol": "tcp"}]}),
        _rule("payments", "r1", "allow", "payments/checkout", "payments/database", 5432),
        _rule("payments", "r2", "deny", "frontend/web", "payments/database"),
        _rule("payments", "r3", "allow", "frontend/web", "payments/checkout", 443),
        _ip("frontend", "web", "web-a", "n1", "10.88.1.2"),
        _ip("payments", "checkout", "checkout-a", "n2", "10.88.2.2"),
        _ip("payments", "database", "database-0", "n3", "10.88.3.2"),
    ])
    return values


def _run(controller, values, revision=1):
    changes = controller.reconcile(Snapshot(revision, MappingProxyType(dict(values))), 0.0)
    values = dict(values)
    values.update((k, freeze(v)) for k, v in changes.puts.items())  # read-only, as the runner hands them out
    for key in changes.deletes:
        values.pop(key)
    return changes, values


def test_documents_per_node_cover_local_default_deny_identities():
    controller = NetpolicyController()
    changes, values = _run(controller, _world())
    assert {k for k in changes.puts if k.startswith("derived/firewall/")} == {
        "derived/firewall/n1", "derived/firewall/n2", "derived/firewall/n3"}
    # n1 runs only web, which no rule guards: its document names it open (the agent starts it then)
    assert values["derived/firewall/n1"] == {"node": "n1", "policies": {},
                                             "open": ["frontend/web"]}
    assert values["derived/firewall/n2"]["open"] == values["derived/firewall/n3"]["open"] == []
    db = values["derived/firewall/n3"]
    assert db["policies"] == {"payments/database": {
        "local": ["10.88.3.2"], "named_by": ["r1", "r2"],
        "allowed": [{"from": "payments/checkout", "port": 5432, "protocol": "any", "rule": "r1"}]}}
    # every identity a policy mentions has its addresses cluster-wide in a document of its own
    assert values["derived/identity/payments/checkout"] == {"identity": "payments/checkout",
                                                           "addresses": ["10.88.2.2"]}
    assert values["derived/identity/payments/database"]["addresses"] == ["10.88.3.2"]
    assert values["derived/identity/frontend/web"]["addresses"] == ["10.88.1.2"]


def test_an_instance_move_changes_only_address_sets_and_only_documents_that_mention_it():
    controller = NetpolicyController()
    _, values = _run(controller, _world())
    assert controller.solves == 1
    key, doc = _ip("frontend", "web", "web-b", "n4", "10.88.4.2")  # a second web instance appears
    values[key] = doc
    changes, values = _run(controller, values, 2)
    assert controller.solves == 1  # no rule changed: the logic did not run again
    # web's identity document gets the address (no node's document: n2's allows web but is
    # unchanged); n4 gets a document saying web is open there
    assert set(changes.puts) == {"derived/identity/frontend/web", "derived/firewall/n4"}
    assert values["derived/firewall/n4"]["open"] == ["frontend/web"]
    assert values["derived/identity/frontend/web"]["addresses"] == ["10.88.1.2", "10.88.4.2"]
    # the database moves from n3 to n1: n3 loses its document, n1 gets one, n2 is untouched
    key, doc = _ip("payments", "database", "database-0", "n1", "10.88.1.9")
    values[key] = doc
    changes, values = _run(controller, values, 3)
    assert controller.solves == 1
    assert set(changes.puts) == {"derived/firewall/n1", "derived/identity/payments/database"}
    assert changes.deletes == {"derived/firewall/n3"}
    assert values["derived/firewall/n1"]["policies"]["payments/database"]["local"] == ["10.88.1.9"]


def test_incremental_equals_a_full_pass_and_a_rule_change_resolves():
    controller = NetpolicyController()
    _, values = _run(controller, _world())
    key, doc = _rule("payments", "r1", "allow", "payments/checkout", "payments/database", 5432)
    del values[key]
    changes, values = _run(controller, values, 2)
    assert controller.solves == 2
    assert values["derived/firewall/n3"]["policies"]["payments/database"]["allowed"] == []
    fresh = NetpolicyController()
    again, _ = _run(fresh, {k: v for k, v in values.items() if not k.startswith("derived/firewall/")})
    assert {k: v for k, v in again.puts.items()} == {k: v for k, v in values.items()
                                                     if k.startswith("derived/firewall/")}


_TENANTS = ("a", "b")
_NAMES = [f"{t}/s{i}" for t in _TENANTS for i in range(3)]
_SELECTORS = [*_NAMES, "a/*", "b/*", "*"]


@st.composite
def _changes(draw):
    """A sequence of policy-relevant edits: rules added/removed, services added/removed/re-ported."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["rule+", "rule-", "svc+", "svc-", "port"]))
        if kind == "rule+":
            rule = (draw(st.sampled_from(["allow", "deny"])), draw(st.sampled_from(_SELECTORS)),
                    draw(st.sampled_from(_SELECTORS)), draw(st.sampled_from([None, 80, 443])),
                    draw(st.sampled_from([None, "tcp", "udp"])))
            steps.append((kind, draw(st.integers(0, 7)), rule))
        elif kind == "rule-":
            steps.append((kind, draw(st.integers(0, 7)), None))
        else:
            steps.append((kind, draw(st.sampled_from(_NAMES)), draw(st.sampled_from([80, 443]))))
    return steps


def _apply_step(values, step):
    kind, which, what = step
    if kind == "rule+":
        action, src, dst, port, proto = what
        key, doc = _rule("x", f"r{which}", action, src, dst, port, proto)  # one key per rule id
        values[key] = doc
    elif kind == "rule-":
        for key in [k for k in values if k.startswith("desired/network/") and k.endswith(f"/r{which}")]:
            del values[key]
    elif kind == "svc-":
        values.pop(f"desired/service/{which}", None)
    else:
        values[f"desired/service/{which}"] = {"expose": [{"port": what, "protocol": "tcp"}]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_changes())
def test_partial_solves_agree_with_a_full_solve_after_every_change(steps):
    """The controller re-solves only the destinations a change touches; after each change its
    policy (guarded, allowed, denied, lints) equals a whole-policy solve of the same values."""
    values = {f"desired/service/{n}": {"expose": [{"port": 80, "protocol": "tcp"}]} for n in _NAMES[::2]}
    values.update(dict([_rule("x", "r0", "allow", "b/*", "a/s0", 80), _rule("x", "r1", "deny", "a/s0", "*")]))
    values.update(dict(_ip(n.split("/")[0], n.split("/")[1], f"{n.split('/')[1]}-0", "n1", f"10.0.0.{i + 2}")
                       for i, n in enumerate(_NAMES)))
    controller = NetpolicyController()
    _, values = _run(controller, values)
    for revision, step in enumerate(steps, start=2):
        _apply_step(values, step)
        _, values = _run(controller, values, revision)
        whole = evaluate(values)
        assert controller.policy == whole, step
        for d in _NAMES:  # explain's solve of one destination agrees with the whole policy
            alone = evaluate_for(values, {d})
            assert (alone.guarded.get(d), alone.allowed.get(d), alone.denied.get(d)) == \
                (whole.guarded.get(d), whole.allowed.get(d), whole.denied.get(d)), (step, d)
