"""Operator netpolicy extensions at runtime: solved in a policy worker, failing static.

The exploding extension passes validation (the fixture has two identities) but its six-way join
over `identity/2` cannot be grounded over the dozens of services of a real cluster: it stands for
an extension that passed an older validation, written straight to the store.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest

from ccattler.engine.admission import policy_pool
from ccattler.engine.admission.model import PolicyError
from ccattler.engine.admission.policy_pool import PolicyLimits, configure, pool
from ccattler.engine.facts.frozen import freeze
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.netpolicy.controller import NetpolicyController
from ccattler.engine.netpolicy.explain import explain_connection, explain_service
from ccattler.engine.netpolicy.extensions import validate_extension

EXPLODING = ("wide(A, B, C, D, E, F) :- identity(A, _), identity(B, _), identity(C, _), identity(D, _),\n"
             "    identity(E, _), identity(F, _).\n%! program: netpolicy\n")
HARMLESS = ('policy_deny("no-web-to-db", "frontend/web", D) :- identity(D, "payments"),\n'
            '    D != "payments/checkout".\n'
            "%! program: netpolicy\n")
STATUS = "derived/netpolicy-status"


def _rule(tenant, rid, action, src, dst, port=None):
    return f"desired/network/{tenant}/{rid}", {"kind": "network", "action": action, "from": src, "to": dst,
                                               "port": port, "protocol": None}


def _ip(tenant, service, inst, node, ip):
    return f"derived/network/ip/{tenant}/{inst}", {"instance": inst, "service": f"{tenant}/{service}",
                                                   "node": node, "ip": ip}


def _lp(name, text):
    return f"desired/lp/{name}", {"kind": "lp", "program": "netpolicy", "text": text}


def _world():
    return dict([
        ("desired/service/frontend/web", {"expose": [{"port": 80, "protocol": "tcp"}]}),
        ("desired/service/payments/checkout", {"expose": [{"port": 443, "protocol": "tcp"}]}),
        ("desired/service/payments/database", {"expose": [{"port": 5432, "protocol": "tcp"}]}),
        _rule("payments", "r1", "allow", "payments/checkout", "payments/database", 5432),
        _rule("payments", "r3", "allow", "*", "payments/checkout", 443),
        _ip("frontend", "web", "web-a", "n1", "10.88.1.2"),
        _ip("payments", "checkout", "checkout-a", "n2", "10.88.2.2"),
        _ip("payments", "database", "database-0", "n3", "10.88.3.2"),
        _lp("harmless", HARMLESS),
    ])


def _more_services(values, count=60):
    """A cluster grown past what the validation fixture showed (services with no instance yet)."""
    for i in range(count):
        values[f"desired/service/batch/job{i}"] = {"expose": [{"port": 9000, "protocol": "tcp"}]}


def _run(controller, values, revision=1):
    changes = controller.reconcile(Snapshot(revision, MappingProxyType(dict(values))), float(revision))
    values = dict(values)
    values.update((k, freeze(v)) for k, v in changes.puts.items())
    for key in changes.deletes:
        values.pop(key)
    return changes, values


def _firewall(values):
    return {k: v for k, v in values.items() if k.startswith("derived/firewall/")}


@pytest.fixture
def tight():
    configure(PolicyLimits(netpolicy_seconds=2.0, memory_bytes=512 << 20))
    try:
        yield pool()
    finally:
        configure(PolicyLimits())


def test_the_exploding_extension_passes_the_fixture_validation():
    validate_extension("explode", EXPLODING)


def test_an_extension_reading_an_input_nothing_produces_is_refused():
    """`export/2` was declared as an operator input that nothing in a cluster produced: the tenant
    isolation example then denied every cross-tenant allow. It is no input any more: an extension
    that reads it without stating its own `export` facts is refused by validation."""
    example = ('policy_deny("tenant-isolation", S, D) :- says(allow, D, S, _, _, _), identity(S, TS),\n'
               "    identity(D, TD), TS != TD, not export(TD, TS).\n")
    with pytest.raises(PolicyError, match="unknown predicate export/2"):
        validate_extension("iso", example)
    validate_extension("iso", 'export("payments", "ops").\n' + example)  # it lists its own pairs


def test_an_extension_over_budget_keeps_the_last_good_documents_and_says_so(tight):
    controller = NetpolicyController()
    _, values = _run(controller, _world())
    good = _firewall(values)
    allowed = good["derived/firewall/n2"]["policies"]["payments/checkout"]["allowed"]
    assert {"from": "frontend/web", "port": 443, "protocol": "any", "rule": "r3"} in allowed
    assert STATUS not in values

    values.update([_lp("explode", EXPLODING)])
    _more_services(values)
    replaced = tight.replaced
    changes, values = _run(controller, values, 2)
    assert _firewall(values) == good and not changes.deletes  # neither opened nor closed
    status = values[STATUS]
    assert status["state"] == "failing" and status["code"] == "policy_budget"
    assert status["budget"] in ("grounding time", "memory")
    assert status["extensions"] == ["desired/lp/explode", "desired/lp/harmless"]
    assert "desired/lp/explode" in status["message"] and "serving" in status
    assert tight.replaced > replaced  # the worker was killed (or ran out of memory), not the process

    # Still serving: an instance move reaches the documents that mention it, with the last good policy.
    values.update([_ip("payments", "checkout", "checkout-a", "n2", "10.88.2.9")])
    changes, values = _run(controller, values, 3)
    assert "10.88.2.9" in values["derived/identity/payments/checkout"]["addresses"]
    assert STATUS not in changes.puts  # the same failure: written once

    # Fail closed for what the last good solve never saw: an instance of a service added since
    # (batch/job0) is neither guarded nor open in its node's document, so the agent holds it; an
    # identity the last good policy left open (web) is open on a node it newly runs on.
    values.update([_ip("batch", "job0", "job0-a", "n1", "10.88.1.5"),
                   _ip("frontend", "web", "web-b", "n5", "10.88.5.2")])
    changes, values = _run(controller, values, 3)
    assert values["derived/firewall/n1"]["open"] == ["frontend/web"]
    assert "batch/job0" not in values["derived/firewall/n1"]["policies"]
    assert values["derived/firewall/n5"]["open"] == ["frontend/web"]

    # Explain answers from the last good documents and says why.
    fw = explain_connection(values, "frontend/web", "payments/checkout", 443, "tcp")
    assert fw["verdict"] == "allowed" and fw["rules"] == ["r3"] and "desired/lp/explode" in fw["stale"]
    assert explain_connection(values, "frontend/web", "payments/database", 5432, "tcp")["verdict"] == "denied"
    assert "last good" in explain_service(values, "payments/database")["lines"][-1]
    unseen = {k: v for k, v in values.items() if k != STATUS}  # no condition: tries, falls back
    assert "budget" in explain_connection(unseen, "frontend/web", "payments/checkout", 443, "tcp")["stale"]

    # Deleting the extension: the next solve recovers, the condition says so.
    del values["desired/lp/explode"]
    changes, values = _run(controller, values, 4)
    assert values[STATUS]["state"] == "ok" and "explode" in values[STATUS]["recovered_from"]
    assert values["derived/firewall/n1"]["open"] == ["batch/job0", "frontend/web"]  # decided now
    assert controller.failure is None
    assert explain_connection(values, "frontend/web", "payments/checkout", 443, "tcp").get("stale") is None


def test_a_failure_before_any_good_solve_writes_no_firewall_document(tight):
    values = _world()
    values.update([_lp("explode", EXPLODING), ("derived/firewall/n3", {"node": "n3", "stored": True})])
    _more_services(values)
    changes, values = _run(NetpolicyController(), values)
    assert set(changes.puts) == {STATUS} and not changes.deletes
    assert "no good solve" in values[STATUS]["serving"]


def test_a_killed_worker_is_replaced_and_tried_once_more(tight, monkeypatch):
    borrow, kills = policy_pool.PolicyPool._borrow, []

    def borrow_and_kill(self):
        worker = borrow(self)
        if worker is not None and len(kills) < allowed_kills[0]:
            worker.process.kill()  # a real SIGKILL, as the OOM killer or an operator would
            worker.process.wait()
            kills.append(worker.pid)
        return worker

    monkeypatch.setattr(policy_pool.PolicyPool, "_borrow", borrow_and_kill)
    allowed_kills = [1]
    controller = NetpolicyController()
    _, values = _run(controller, _world())  # killed once: the retry on a fresh worker answers
    assert len(kills) == 1 and controller.failure is None and "derived/firewall/n2" in values
    good = _firewall(values)

    allowed_kills[0] = 3  # killed twice in a row: failing, static
    values["desired/service/payments/audit"] = {"expose": [{"port": 7000, "protocol": "tcp"}]}
    changes, values = _run(controller, values, 2)
    assert len(kills) == 3 and values[STATUS]["code"] == "policy_crashed"
    assert _firewall(values) == good

    values["desired/service/payments/audit2"] = {}  # the next change of what the logic reads
    changes, values = _run(controller, values, 3)
    assert values[STATUS]["state"] == "ok"


def test_through_a_store_events_and_explain_show_the_failure(tight):
    from ccattler.engine.api import views
    from ccattler.engine.api.netpolicy import explain_network_live
    from ccattler.engine.runner import settle
    from ccattler.engine.store import open_store

    with open_store("sqlite://:memory:") as store:
        for key, doc in _world().items():
            store.put(key, doc)
        controller = NetpolicyController()
        settle(store, [controller], now=1.0)
        good = {f.key: f.value for f in store.range("derived/firewall/")[0]}
        assert good
        store.put(*_lp("explode", EXPLODING))
        for i in range(60):
            store.put(f"desired/service/batch/job{i}", {"expose": [{"port": 9000, "protocol": "tcp"}]})
        settle(store, [controller], now=2.0)
        assert {f.key: f.value for f in store.range("derived/firewall/")[0]} == good
        reasons = [e["reason"] for e in views.events(store) if e["key"] == STATUS]
        assert reasons and "desired/lp/explode" in reasons[-1] and "serving the last good" in reasons[-1]
        answer = explain_network_live(store, "connection", "frontend/web", "payments/checkout:443", "default")
        assert answer["verdict"] == "allowed" and "desired/lp/explode" in answer["lines"][-1]

        store.delete("desired/lp/explode")
        settle(store, [controller], now=3.0)
        assert store.get(STATUS).value["state"] == "ok"
        reasons = [e["reason"] for e in views.events(store) if e["key"] == STATUS]
        assert reasons[-1].startswith("netpolicy recovered from: netpolicy extension desired/lp/explode")
