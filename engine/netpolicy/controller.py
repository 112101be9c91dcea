"""The network-policy controller: rules/netpolicy.lp's answer → `derived/firewall/<node>`.

A node's document covers the default-deny identities with an instance on that node: their allowed
(source identity, port, protocol) tuples and their addresses on the node (`local`). Every identity
a policy mentions (a guarded destination, a source of an allowed tuple) has its addresses
cluster-wide (from `derived/network/ip/`) in `derived/identity/<identity>`, one document shared by
every node: an instance moving rewrites that one small document and the documents of the nodes it
left and joined, not every node's document that allows it (at 10,000 services each of those was
~1 MB: docs/benchmarks.md). The node's open
identities are listed by name (`open`): the data plane leaves them alone, and the agent starts an
instance only once its identity is in its node's document, under `policies` or `open` (fail
closed: the network controller commits an address before this controller, which runs last, has
decided its identity's policy; docs/agent.md, "Network policy"). An identity the last good solve
did not see (a service added while an extension fails) is in neither, so its instances wait.

Incremental: the logic is solved again only when what it reads changes (services' identities and
ports, network rules, netpolicy extensions), and then only for the destination identities the
change can touch (`facts.touched_destinations`: what a changed rule's `to` selects; a changed
service and the destinations of rules whose `from` selects it) — the whole policy is solved at
start and whenever an extension exists (extensions may relate any destinations). An address
change (an instance placed, moved, gone) rewrites only its identity's document and the documents
of the nodes the instance is on or left. A document is rewritten only when its content changes.

Operator extensions are solved in a policy worker under hard limits (isolated.py). When that
solve fails (a budget ran out, the worker died, the program failed) the controller fails static:
it keeps the last good policy — the firewall documents stay as they were, address changes still
reach them — and writes `derived/netpolicy-status` `{"state": "failing", …}` naming the
extensions, the budget and since when (shown by `cca events`). A failure before any good solve
(a restart) writes no firewall document at all: the stored ones stay. A worker that died is
tried once more at once (a fresh worker); otherwise the next change of what the logic reads (the
extension fixed or deleted) solves again, and the status says `ok`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Set
from typing import Any, ClassVar

from ccattler.engine.facts.keys import (
    ADDRESSES,
    DESIRED_LP,
    DESIRED_NETWORKS,
    DESIRED_SERVICES,
    FIREWALL,
    IDENTITIES,
    NETPOLICY_STATUS,
)
from ccattler.engine.facts.snapshot import ChangeSet, Snapshot, changed_keys
from ccattler.engine.netpolicy import facts
from ccattler.engine.netpolicy.evaluate import Policy, evaluate, merged
from ccattler.engine.netpolicy.facts import Part, extension_texts, extensions_digest, policy_inputs
from ccattler.engine.netpolicy.isolated import ExtensionFailed, ExtensionFailure


def node_document(node: str, policy: Policy, local: Mapping[str, set[str]],
                  known: Set[str] | None = None) -> dict[str, Any] | None:
    """The firewall document of `node` (local: identity → its addresses on the node), or None when
    no identity `policy` decided runs there. `known`: the identities the policy was solved over
    (None: every local one); a local identity outside it is neither guarded nor open."""
    policies: dict[str, Any] = {}
    open_here = []
    for identity in sorted(local):
        if identity not in policy.guarded:
            if known is None or identity in known:
                open_here.append(identity)
            continue
        policies[identity] = {
            "local": sorted(local[identity]),
            "named_by": list(policy.guarded[identity]),
            "allowed": [{"from": t.source, "port": t.port, "protocol": t.protocol, "rule": t.rule}
                        for t in policy.allowed.get(identity, ())],
        }
    if not policies and not open_here:
        return None
    return {"node": node, "policies": policies, "open": open_here}


def identity_document(identity: str, addresses: Set[str]) -> dict[str, Any] | None:
    """`derived/identity/<identity>`: its addresses cluster-wide, or None without any."""
    return {"identity": identity, "addresses": sorted(addresses)} if addresses else None


class NetpolicyController:
    """Writes one firewall document per node that runs an instance with an address, and one identity
    document per identity a policy mentions that has an address."""

    name: ClassVar[str] = "netpolicy"
    reads: ClassVar[tuple[str, ...]] = (DESIRED_SERVICES, DESIRED_NETWORKS, DESIRED_LP, ADDRESSES, FIREWALL,
                                        IDENTITIES, NETPOLICY_STATUS)
    writes: ClassVar[tuple[str, ...]] = (FIREWALL, IDENTITIES, NETPOLICY_STATUS)

    def __init__(self) -> None:
        self._seen: Mapping[str, Any] | None = None
        self._inputs: tuple[Any, ...] | None = None  # what the last whole-policy solve read
        self._extensions = False  # whether any netpolicy extension is stored (no partial solves)
        self.policy = Policy()
        self._known: frozenset[str] = frozenset()  # the identities self.policy was solved over
        self.solves = 0  # how often the logic ran (tests check incrementality)
        self._addr: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)  # identity → inst → (node, ip)
        self._where: dict[str, tuple[str, str]] = {}  # inst key → (identity, node)
        self._sources_of: dict[str, set[str]] = defaultdict(set)  # source → guarded destinations naming it
        self._written: dict[str, Any] = {}  # key → the document last written (None: deleted)
        self._good = False  # whether self.policy came from a solve that succeeded (else write nothing)
        self._failed: tuple[Any, ...] | None = None  # the inputs whose solve failed (not retried)
        self.failure: ExtensionFailure | None = None  # why the last solve failed, while it stands

    def reconcile(self, snapshot: Snapshot, now: float) -> ChangeSet:
        values, before = snapshot.values, self._seen
        full = before is None
        changed = list(values) if full else changed_keys(before, values)
        if full:
            self._addr.clear()
            self._where.clear()
        self._seen = values
        # Documents written last run that the store does not show yet (a commit may have failed).
        nodes: set[str] = set()
        identities: set[str] = set()

        def redo(key: str) -> None:  # one of our documents, to be computed again
            if key.startswith(FIREWALL):
                nodes.add(key[len(FIREWALL):])
            else:
                identities.add(key[len(IDENTITIES):])

        for key, doc in self._written.items():
            if values.get(key) != doc:
                redo(key)
        for key in changed:
            if key.startswith(ADDRESSES):
                identities.update(self._update_address(key, values.get(key), nodes))
            elif key.startswith((FIREWALL, IDENTITIES)) and values.get(key) != self._written.get(key):
                redo(key)  # not (only) our own write coming back
        logic = [k for k in changed if k.startswith((DESIRED_SERVICES, DESIRED_NETWORKS, DESIRED_LP))]
        if full or logic:
            try:
                self._solve(before, values, logic, nodes, identities)
            except ExtensionFailed as exc:
                self.failure = exc.failure
            else:
                self.failure = None
        changes = self._write(values, nodes, identities) if self._good else ChangeSet({}, frozenset())
        return self._with_status(changes, values, now)

    def _with_status(self, changes: ChangeSet, values: Mapping[str, Any], now: float) -> ChangeSet:
        """`changes` plus `derived/netpolicy-status` when the failure state changed."""
        old = values.get(NETPOLICY_STATUS)
        failing = isinstance(old, dict) and old.get("state") == "failing"
        if self.failure is not None:
            f = self.failure
            same = failing and old.get("message") == f.text()
            doc = {"state": "failing", "extensions": list(f.extensions), "code": f.code, "budget": f.budget,
                   "message": f.text(), "since": old["since"] if same else now,
                   "digest": extensions_digest(values),
                   "serving": "the last good derived/firewall documents" if self._good
                   else "the stored derived/firewall documents (no good solve since start)"}
        elif failing:
            doc = {"state": "ok", "since": now, "recovered_from": old.get("message")}
        else:
            return changes
        if doc == old:
            return changes
        return ChangeSet({**changes.puts, NETPOLICY_STATUS: doc}, changes.deletes)

    def _solve(self, before: Mapping[str, Any] | None, values: Mapping[str, Any], logic: list[str],
               nodes: set[str], identities: set[str]) -> None:
        """Solve again: only the destinations the change touches when that is exact (no extension
        anywhere), else the whole policy. A partial solve rewrites only the documents of nodes
        running a touched destination, and the identity documents of the touched destinations and
        of the sources they allowed before or allow now (whether they are mentioned may change)."""
        if before is None or any(k.startswith(DESIRED_LP) for k in logic):
            self._extensions = bool(extension_texts(values))
        touched = None
        identities = {k[len(DESIRED_SERVICES):] for k in values if k.startswith(DESIRED_SERVICES)}
        if before is not None and not self._extensions:
            touched = facts.touched_destinations(before, values, logic, identities)
        if touched is None:
            inputs = policy_inputs(values)
            if inputs == self._inputs and self._good:
                return  # nothing the logic reads changed
            if inputs == self._failed and self.failure is not None:
                raise ExtensionFailed(self.failure)  # the same inputs fail the same way: no retry
            try:
                policy = self._evaluate_whole(values)
            except ExtensionFailed:
                self._failed = inputs
                raise
            self._inputs, self.policy, self._good, self._failed = inputs, policy, True, None
            self._known = frozenset(identities)
            self._sources_of = defaultdict(set)
            self._index_sources(self.policy.allowed)
            nodes.update(self._all_nodes(values))
            identities.update(self._addr)
            identities.update(k[len(IDENTITIES):] for k in values if k.startswith(IDENTITIES))
        elif touched or any(k.startswith(DESIRED_NETWORKS) for k in logic):  # a rule naming nothing: lints
            part = Part.of(values, touched, logic, identities)
            old = self.policy.allowed
            self.policy = merged(self.policy, evaluate(values, part=part), part)
            self._known = frozenset(identities)
            self._inputs = None  # kept for whole-policy solves only
            for destination in touched:
                for t in old.get(destination, ()):
                    self._sources_of[t.source].discard(destination)
                    identities.add(t.source)
                nodes.update(node for node, _ in self._addr.get(destination, {}).values())
            identities.update(touched)
            now_allowed = {d: self.policy.allowed.get(d, ()) for d in touched}
            identities.update(t.source for tuples in now_allowed.values() for t in tuples)
            self._index_sources(now_allowed)
        else:
            return
        self.solves += 1

    @staticmethod
    def _evaluate_whole(values: Mapping[str, Any]) -> Policy:
        """The whole policy; a worker that died is tried once more (a fresh one: it may have been
        killed from outside), a budget or program failure is not."""
        try:
            return evaluate(values)
        except ExtensionFailed as exc:
            if exc.failure.code != "policy_crashed":
                raise
        return evaluate(values)

    def _update_address(self, key: str, doc: Any, nodes: set[str]) -> set[str]:
        """Record one address document; the identities whose address sets changed."""
        touched = set()
        before = self._where.pop(key, None)
        if before is not None:
            self._addr[before[0]].pop(key, None)
            touched.add(before[0])
            nodes.add(before[1])
        if isinstance(doc, dict) and doc.get("ip") and doc.get("node") and doc.get("service"):
            identity, node = str(doc["service"]), str(doc["node"])
            self._addr[identity][key] = (node, str(doc["ip"]))
            self._where[key] = (identity, node)
            touched.add(identity)
            nodes.add(node)
        return touched

    def _index_sources(self, allowed: Mapping[str, Any]) -> None:
        for destination, tuples in allowed.items():
            for t in tuples:
                self._sources_of[t.source].add(destination)

    def _all_nodes(self, values: Mapping[str, Any]) -> set[str]:
        nodes = {node for _, node in self._where.values()}
        nodes.update(key[len(FIREWALL):] for key in values if key.startswith(FIREWALL))
        return nodes

    def _mentioned(self, identity: str) -> bool:
        """Whether a policy names `identity` (a guarded destination, or a source it allows)."""
        return identity in self.policy.guarded or bool(self._sources_of.get(identity))

    def _write(self, values: Mapping[str, Any], nodes: set[str], identities: set[str]) -> ChangeSet:
        local: dict[str, dict[str, set[str]]] = {n: defaultdict(set) for n in nodes}
        for identity, entries in self._addr.items():
            for node, ip in entries.values():
                if node in local:
                    local[node][identity].add(ip)
        wanted = {FIREWALL + n: node_document(n, self.policy, local[n], self._known) for n in nodes}
        for identity in identities:
            mentioned = self._mentioned(identity)
            addresses = {ip for _, ip in self._addr.get(identity, {}).values()} if mentioned else set()
            wanted[IDENTITIES + identity] = identity_document(identity, addresses)
        puts = {key: doc for key, doc in wanted.items() if doc is not None and values.get(key) != doc}
        deletes = frozenset(key for key, doc in wanted.items() if doc is None and key in values)
        self._written = {**puts, **dict.fromkeys(deletes)}
        return ChangeSet(puts, deletes)
