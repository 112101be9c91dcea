"""The default controllers under the live runner converge a store holding a compiled file: every
instance placed and addressed, a further run changes nothing; a node whose lease expires is marked
down and its instances run elsewhere; when it returns it is ready with its old subnet and nothing
moves back (real SQLite and etcd, real leases)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from runner_builders import TTL, eventually

from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.sources import Source
from ccattler.engine.controllers.registry import default_controllers

EXAMPLE = Path(__file__).parents[3] / "examples" / "sim-cluster.cca"


def register_nodes(store, facts: dict) -> dict[str, int]:
    """What agents do on joining: put `observed/node/<n>` bound to a lease; returns node → lease."""
    leases = {}
    for key, doc in facts.items():
        if key.startswith("desired/node/"):
            name = key.rsplit("/", 1)[1]
            leases[name] = store.lease_grant(TTL)
            store.put(f"observed/node/{name}", {
                "capacity": doc["capacity"], "labels": doc["labels"], "zone": doc["zone"],
                "architecture": "amd64", "restrictions": doc["restrictions"], "address": "192.0.2.1",
            }, lease=leases[name])
    return leases


def placements(store) -> dict[str, str | None]:
    return {f.value["instance"]: f.value["node"] for f in store.range("derived/placement/")[0]}


def settled(store) -> bool:
    placed = placements(store)
    ips = {f.value["instance"]: f.value["node"] for f in store.range("derived/network/ip/")[0]}
    return len(placed) == 9 and all(placed.values()) and ips == placed


def test_a_compiled_file_converges_and_survives_a_node_failure(store, runners):
    facts = compile_sources([Source(EXAMPLE.name, EXAMPLE.read_text())])
    store.txn((), sorted(facts.items()), ())
    leases = register_nodes(store, facts)
    runner = runners(store, default_controllers())

    def keep_alive(skip: str | None = None) -> None:
        for name, lease in leases.items():
            if name != skip:
                store.lease_keepalive(lease)

    assert eventually(lambda: (keep_alive(), settled(store))[1], timeout=30)
    assert runner.wait_idle(10)
    before = placements(store)
    assert Counter(before.values())["n4"] >= 1  # the trainer needs the gpu node
    revision = store.revision()
    keep_alive()
    assert runner.wait_idle(10)
    assert store.revision() == revision  # a further run changes nothing

    victim = next(node for node in sorted(set(before.values())) if node != "n4")
    moved = {inst for inst, node in before.items() if node == victim}
    subnet = store.get(f"derived/network/subnet/{victim}").value
    registration = store.get(f"observed/node/{victim}").value

    def failed_over() -> bool:
        keep_alive(skip=victim)
        fact = store.get(f"derived/node/{victim}")
        now = placements(store)
        return (fact is not None and fact.value["condition"] == "down"
                and all(now.get(inst) not in (None, victim) for inst in moved) and settled(store))

    assert eventually(failed_over, timeout=6 * TTL)
    after = placements(store)
    stayed = {inst: node for inst, node in before.items() if inst not in moved}
    assert {inst: after[inst] for inst in stayed} == stayed  # nothing else moved
    ips = {f.value["instance"]: f.value for f in store.range("derived/network/ip/")[0]}
    assert all(ips[inst]["node"] == after[inst] for inst in moved)

    # The node comes back: ready again, with the subnet it had; nothing moves back onto it.
    leases[victim] = store.lease_grant(TTL)
    store.put(f"observed/node/{victim}", registration, lease=leases[victim])
    assert eventually(lambda: (keep_alive(), store.get(f"derived/node/{victim}").value["condition"])[1]
                      == "ready")
    assert runner.wait_idle(10)
    assert store.get(f"derived/network/subnet/{victim}").value == subnet
    assert placements(store) == after
