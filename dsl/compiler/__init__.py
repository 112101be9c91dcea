"""The .cca compiler: sources → `{key: document}` facts, deterministic, reporting every error.

`compile_sources` is what `cca apply`, `cca plan` and the API server call; `compile_with_diagnostics`
also returns warnings (the linter uses it). Passes: parse every source, declare every named block
(duplicates are errors), compile service groups (services learn their group), then every block.
"""

from __future__ import annotations

from collections.abc import Sequence

from ccattler.dsl.ast import Node
from ccattler.dsl.compiler.cluster import (
    compile_grant,
    compile_node,
    compile_policy,
    compile_role,
    compile_tenant,
)
from ccattler.dsl.compiler.context import Decl, Declarations, Known, Unit
from ccattler.dsl.compiler.objects import (
    compile_connection,
    compile_gate,
    compile_group,
    compile_network,
    compile_secret,
    compile_volume,
)
from ccattler.dsl.compiler.service import compile_service
from ccattler.dsl.errors import ERROR, Diagnostic, DslError
from ccattler.dsl.limits import MAX_OBJECTS, MAX_SERVICES, MAX_SOURCES
from ccattler.dsl.parser import parse_with_diagnostics
from ccattler.dsl.sources import Reader, Source, read_relative
from ccattler.engine.facts import (
    DEFAULT_TENANT,
    NAMESPACED_KINDS,
    InvalidKey,
    InvalidValue,
    check_key,
    check_value,
    desired_key,
)
from ccattler.engine.facts.groups import port_clashes

__all__ = ["Known", "compile_sources", "compile_with_diagnostics"]

_UNNAMED = frozenset({"network", "grant"})


def compile_sources(sources: Sequence[Source], tenant: str = DEFAULT_TENANT,
                    reader: Reader | None = None, known: Known | None = None) -> dict[str, dict]:
    """Compile `sources` to facts sorted by key; raise `DslError` listing every error.

    `known(kind, tenant, name)` says whether the cluster already holds an object; with it, names
    resolve to objects outside the files too, and a reference to nothing anywhere is an error.
    """
    facts, diagnostics = compile_with_diagnostics(sources, tenant, reader, known)
    errors = [d for d in diagnostics if d.severity == ERROR]
    if errors:
        raise DslError(errors)
    return facts


def compile_with_diagnostics(sources: Sequence[Source], tenant: str = DEFAULT_TENANT,
                             reader: Reader | None = None, known: Known | None = None,
                             ) -> tuple[dict[str, dict], list[Diagnostic]]:
    """Compile what compiles; return the facts and every error and warning, in file order."""
    if len(sources) > MAX_SOURCES:
        return {}, [Diagnostic(sources[MAX_SOURCES].name, 0, 0, ERROR, "too-many",
                               f"{len(sources)} source files; the limit is {MAX_SOURCES} per request")]
    decls = Declarations(known=known)
    units: list[Unit] = []
    syntax: list[Diagnostic] = []
    for source in sources:
        file, found = parse_with_diagnostics(source.text, source.name)
        syntax.extend(found)
        lines = {d.line for d in found}
        broken = [(b.span.line, b.span.end_line) for b in file.blocks
                  if any(b.span.line <= n <= b.span.end_line for n in lines)]
        unit = Unit(file, source, tenant, decls, reader or read_relative, broken)
        units.append(unit)
        for block in file.blocks:
            _declare(unit, block)

    facts: dict[str, dict] = {}
    membership: dict[str, tuple[str, Unit, Node]] = {}
    for unit in units:
        for block in unit.file.blocks:
            if block.keyword == "group":
                _compile_group(unit, block, facts, membership)
    for unit in units:
        for block in unit.file.blocks:
            if block.keyword != "group":
                _compile_block(unit, block, facts, membership)
    _check_group_instances(facts, membership)
    _check_group_ports(facts, membership)

    order = {source.name: i for i, source in enumerate(sources)}
    diagnostics = syntax + [d for u in units for d in u.diagnostics] + _over_limits(facts, sources)
    diagnostics.sort(key=lambda d: (order.get(d.file, 0), d.line, d.column))
    return dict(sorted(facts.items())), diagnostics


def _over_limits(facts: dict[str, dict], sources: Sequence[Source]) -> list[Diagnostic]:
    """Documents and services past the per-request maxima (`dsl/limits.py`)."""
    services = sum(1 for doc in facts.values() if doc.get("kind") == "service")
    name = sources[0].name if sources else "-"
    found = []
    if len(facts) > MAX_OBJECTS:
        found.append(Diagnostic(name, 0, 0, ERROR, "too-many",
                                f"{len(facts)} objects declared; the limit is {MAX_OBJECTS} per request"))
    if services > MAX_SERVICES:
        found.append(Diagnostic(name, 0, 0, ERROR, "too-many",
                                f"{services} services declared; the limit is {MAX_SERVICES} per request"))
    return found


def _names(unit: Unit, block: Node) -> tuple[str | None, str] | None:
    return unit.split_name(block.name, namespaced=block.keyword in NAMESPACED_KINDS)


def _declare(unit: Unit, block: Node) -> None:
    if block.keyword in _UNNAMED:
        return
    names = _names(unit, block)
    if names is None:
        return
    tenant, name = names
    key = (block.keyword, tenant, name)
    first = unit.decls.table.get(key)
    if first:
        shown = name if tenant is None else f"{tenant}/{name}"
        unit.error(block.name.span, "duplicate-name",
                   f'{block.keyword} "{shown}" is declared twice (first at {first.source}:{first.span.line})')
        return
    unit.decls.table[key] = Decl(block.keyword, tenant, name, unit.file.name, block.span)


def _put(unit: Unit, block: Node, facts: dict[str, dict], key: str, doc: dict) -> None:
    """Add a document, if the store could hold it (key and value sizes checked here, not at apply)."""
    where = block.name.span if block.name else block.keyword_span
    try:
        check_key(key)
        check_value(doc)
    except (InvalidKey, InvalidValue) as exc:
        unit.error(where, "too-large", f"{block.keyword}: {exc}")
        return
    if key in facts and facts[key]["source"] != doc["source"] and block.keyword in _UNNAMED:
        what = "network rule" if block.keyword == "network" else "grant"
        unit.warn(where, "duplicate-rule", f"the same {what} is also declared in {facts[key]['source']}")
    facts.setdefault(key, doc)


def _header(unit: Unit, block: Node, tenant: str | None, name: str) -> dict:
    head = {"kind": block.keyword}
    if tenant is not None:
        head["tenant"] = tenant
    head.update(name=name, source=unit.source.name)
    return head


def _compile_group(unit: Unit, block: Node, facts: dict, membership: dict) -> None:
    names = _names(unit, block)
    if names is None:
        return
    tenant, name = names
    doc = compile_group(unit, block, tenant)
    if doc is None:
        return
    full = f"{tenant}/{name}"
    for service in doc.get("services", ()):
        if service in membership:
            unit.error(block.name.span, "group-body",
                       f'service "{service}" is already in group "{membership[service][0]}"')
            continue
        membership[service] = (full, unit, block)
    doc = {**_header(unit, block, tenant, name), **doc}
    _put(unit, block, facts, desired_key("group", name, tenant), doc)


def _compile_block(unit: Unit, block: Node, facts: dict, membership: dict) -> None:
    kind = block.keyword
    if kind == "network":
        for tenant, digest, doc in compile_network(unit, block):
            doc = {"kind": "network", "tenant": tenant, "name": digest, **doc}
            _put(unit, block, facts, desired_key("network", digest, tenant), doc)
        return
    if kind == "grant":
        result = compile_grant(unit, block)
        if result:
            digest, doc = result
            _put(unit, block, facts, desired_key("grant", digest),
                 {"kind": "grant", "name": digest, "source": unit.source.name, **doc})
        return
    names = _names(unit, block)
    if names is None:
        return
    tenant, name = names
    if kind == "service":
        group = membership.get(f"{tenant}/{name}")
        body = compile_service(unit, block, tenant, name, group[0] if group else None)
        body = {k: v for k, v in body.items() if k not in ("kind", "tenant", "name", "source")}
    elif kind == "secret":
        body = compile_secret(unit, block)
    elif kind == "connection":
        body = compile_connection(unit, block, tenant)
    elif kind == "gate":
        body = compile_gate(unit, block, tenant)
    elif kind == "volume":
        body = compile_volume(unit, block)
    elif kind == "node":
        body = compile_node(unit, block)
    elif kind == "tenant":
        body = compile_tenant(unit, block)
    elif kind == "role":
        body = compile_role(unit, block)
    else:  # policy
        body = compile_policy(unit, block)
    _put(unit, block, facts, desired_key(kind, name, tenant), {**_header(unit, block, tenant, name), **body})


def _check_group_instances(facts: dict, membership: dict) -> None:
    """A service group is placed as a unit: its declared services need the same instances."""
    by_group: dict[str, list[tuple[str, int]]] = {}
    for service, (group, _unit, _block) in membership.items():
        tenant, name = service.split("/", 1)
        doc = facts.get(desired_key("service", name, tenant))
        if doc is not None:
            by_group.setdefault(group, []).append((service, doc["instances"]))
    for group, members in by_group.items():
        if len({n for _, n in members}) > 1:
            _, unit, block = next(v for v in membership.values() if v[0] == group)
            shown = ", ".join(f"{s} has {n}" for s, n in sorted(members))
            unit.error(block.name.span, "group-instances",
                       f'services of group "{group}" must have the same instances ({shown})')


def _check_group_ports(facts: dict, membership: dict) -> None:
    """Members of a `share network` group share one namespace: no two may expose the same port."""
    for service, (group, unit, block) in membership.items():
        tenant, name = group.split("/", 1)
        doc = facts.get(desired_key("group", name, tenant)) or {}
        if not doc.get("share_network") or service != doc["services"][0]:
            continue  # once per group
        members = {}
        for member in doc["services"]:
            t, n = member.split("/", 1)
            members[member] = facts.get(desired_key("service", n, t))
        clashes = port_clashes(members)
        if clashes:
            unit.error(block.name.span, "group-ports",
                       f'group "{group}" shares its network, but {"; ".join(clashes)}',
                       "members of a shared network are one address: give each its own port")
