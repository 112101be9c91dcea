"""`cca explain connection` and `cca explain service`: the logic's verdicts in English.

The verdict comes from rules/netpolicy.lp itself (`connection/4` in, `reject/4` / `accept/3` out);
Python only picks the first deciding rule by id and formats it.

When operator netpolicy extensions are stored and their solve fails in its worker (a budget ran
out, the worker died: isolated.py), the answer comes from the last good `derived/firewall/`
documents instead — what the data plane enforces now — and says so. While the controller's
`derived/netpolicy-status` says these very extensions fail, explain does not try again (it would
only wait out the same budget).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ccattler.engine.facts.errors import InvalidValue
from ccattler.engine.facts.keys import DESIRED_NETWORKS, DESIRED_SERVICES, FIREWALL, NETPOLICY_STATUS
from ccattler.engine.netpolicy.evaluate import Policy, evaluate_for
from ccattler.engine.netpolicy.facts import extensions_digest
from ccattler.engine.netpolicy.isolated import ExtensionFailed, ExtensionFailure
from ccattler.engine.solve import Const, atom, to_python

_ENDPOINT = re.compile(r"(?P<id>[^:/\s]+/[^:/\s]+)(?::(?P<port>\d+))?(?:/(?P<proto>tcp|udp))?\Z")


def parse_endpoint(text: str, default_tenant: str = "default") -> tuple[str, int, str]:
    """`payments/database:5432/tcp` → ("payments/database", 5432, "tcp"); `web` → default tenant,
    port 0 (unspecified), tcp."""
    if "/" not in text.split(":", 1)[0]:
        text = f"{default_tenant}/{text}"
    match = _ENDPOINT.match(text)
    if not match:
        raise InvalidValue(f"{text!r} is not an identity: expected tenant/service[:port[/tcp|udp]]")
    port = int(match["port"] or 0)
    if port > 65535:
        raise InvalidValue(f"{text!r}: port {port} is outside 1-65535")
    return match["id"], port, match["proto"] or "tcp"


def rule_text(values: Mapping[str, Any], rule: str, visible: Callable[[str], bool] | None = None) -> str:
    """`allow frontend/web -> payments/db port 5432 tcp` for a rule id; an extension's name as is.
    Only `rule <id>` when it names a service `visible` says the caller may not read."""
    for key, doc in values.items():
        if key.startswith(DESIRED_NETWORKS) and key.rsplit("/", 1)[1] == rule and isinstance(doc, dict):
            named = [str(doc.get(end)) for end in ("from", "to") if "/" in str(doc.get(end))
                     and not str(doc.get(end)).endswith("/*")]
            if visible is not None and not all(visible(n) for n in named):
                return f"rule {rule}"
            text = f"{doc.get('action')} {doc.get('from')} -> {doc.get('to')}"
            if doc.get("port") is not None:
                text += f" port {doc['port']}"
            if doc.get("protocol"):
                text += f" {doc['protocol']}"
            source = f" ({doc['source']})" if doc.get("source") else ""
            return f"rule {rule} `{text}`{source}"
    return f"policy extension {rule!r}"


def explain_connection(values: Mapping[str, Any], source: str, destination: str, port: int,
                       protocol: str) -> dict[str, Any]:
    """Allowed or denied, the deciding rule and why, for one connection."""
    for name in (source, destination):
        if DESIRED_SERVICES + name not in values:
            raise InvalidValue(f"no service {name!r} (identities are services, tenant/name)")
    asked = atom("connection", source, destination, port, Const(protocol))
    try:
        policy = _evaluate(values, {destination}, [asked])
    except ExtensionFailed as exc:
        return _connection_from_documents(values, source, destination, port, protocol, str(exc))
    found: dict[str, list[str]] = {}
    for sym in policy.verdicts:
        args = sym.arguments
        code = str(to_python(args[2]))
        found.setdefault(code, []).append(str(to_python(args[1])))
    order = ("denied_by_policy", "denied_by_rule", "allowed_by_rule", "default_deny", "open")
    code = next(c for c in order if c in found)
    rules = sorted(found[code])
    what = f"{source} -> {destination}:{port or 'any'}/{protocol}"
    allowed = code in ("allowed_by_rule", "open")
    if code == "open":
        why = f"open: no rule names {destination}"
    elif code == "default_deny":
        why = f"default deny: {destination} is named by {rule_text(values, rules[0])} and no rule allows this"
    else:
        verb = "allowed" if allowed else "denied"
        why = f"{verb} by {rule_text(values, rules[0])}"
    lines = [f"{what}: {'allowed' if allowed else 'denied'}", f"  {why}"]
    also = "also named by" if code == "default_deny" else "also"
    lines += [f"  {also}: {rule_text(values, r)}" for r in rules[1:]]
    return {"source": source, "destination": destination, "port": port, "protocol": protocol,
            "verdict": "allowed" if allowed else "denied", "code": code, "rules": rules,
            "lines": lines}


def _tuple_json(t: Any) -> dict[str, Any]:
    return {"from": t.source, "port": t.port, "protocol": t.protocol, "rule": t.rule}


def _tuple_text(t: Any) -> str:
    return f"{t.source} port {t.port or 'any'}/{t.protocol}"


HIDDEN = "(a service you may not read)"


def explain_service(values: Mapping[str, Any], identity: str,
                    visible: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """Who may reach `identity`: open, or its allowed tuples and the denials, rule by rule. A
    source the caller may not read (`visible` says no) is shown as HIDDEN: the answer needs read
    on the destination only, so it must not name other tenants' services."""
    if DESIRED_SERVICES + identity not in values:
        raise InvalidValue(f"no service {identity!r} (identities are services, tenant/name)")
    note = None
    try:
        policy = _evaluate(values, {identity})
        named = policy.guarded.get(identity, ())
        allowed, denied = policy.allowed.get(identity, ()), policy.denied.get(identity, ())
    except ExtensionFailed as exc:
        note = _stale_note(str(exc))
        entry = _document_entry(values, identity)
        named = tuple(entry.get("named_by", ())) if entry else ()
        allowed, denied = tuple(_Tuple.of(t) for t in entry.get("allowed", ())) if entry else (), ()
    if visible is not None:
        allowed, denied = _redacted(allowed, visible), _redacted(denied, visible)
    if not named:
        lines = [f"{identity}: open (no rule names it): every identity may reach it"]
    else:
        lines = [f"{identity}: default deny (named by {rule_text(values, named[0], visible)})"]
        lines += [f"  allow {_tuple_text(t)}  by {rule_text(values, t.rule, visible)}" for t in allowed]
        lines += [f"  deny  {_tuple_text(t)}  by {rule_text(values, t.rule, visible)}" for t in denied]
        if not allowed:
            lines.append("  nothing is allowed in")
    if note:
        lines.append(note)
    return {"identity": identity, "open": not named, "named_by": list(named),
            "allowed": [_tuple_json(t) for t in allowed], "denied": [_tuple_json(t) for t in denied],
            "lines": lines}


def _redacted(tuples: Any, visible: Callable[[str], bool]) -> tuple[Any, ...]:
    return tuple(t if visible(t.source) else _Tuple(HIDDEN, t.port, t.protocol, t.rule) for t in tuples)


def _evaluate(values: Mapping[str, Any], destinations: set[str], extra: list[Any] | None = None) -> Policy:
    status = values.get(NETPOLICY_STATUS)
    if isinstance(status, dict) and status.get("state") == "failing" and \
            status.get("digest") == extensions_digest(values):
        failure = ExtensionFailure(tuple(status.get("extensions") or ()), str(status.get("code")),
                                   status.get("budget"), str(status.get("message")))
        raise ExtensionFailed(failure, failure.message)  # the controller's own words
    return evaluate_for(values, destinations, extra or [])


class _Tuple:
    """An allowed tuple read back from a firewall document (the shape `Allowed` has)."""

    def __init__(self, source: str, port: int, protocol: str, rule: str) -> None:
        self.source, self.port, self.protocol, self.rule = source, port, protocol, rule

    @staticmethod
    def of(doc: Mapping[str, Any]) -> _Tuple:
        return _Tuple(str(doc.get("from")), int(doc.get("port") or 0), str(doc.get("protocol")),
                      str(doc.get("rule")))


def _stale_note(failure: str) -> str:
    return f"  (from the last good derived/firewall documents: {failure})"


def _document_entry(values: Mapping[str, Any], identity: str) -> Mapping[str, Any] | None:
    """`identity`'s policy in the stored firewall documents (the same on every node it runs on)."""
    for key, doc in sorted(values.items()):
        if key.startswith(FIREWALL) and isinstance(doc, dict):
            entry = (doc.get("policies") or {}).get(identity)
            if isinstance(entry, dict):
                return entry
    return None


def _connection_from_documents(values: Mapping[str, Any], source: str, destination: str, port: int,
                               protocol: str, failure: str) -> dict[str, Any]:
    """The verdict the data plane enforces now, from the stored firewall documents."""
    entry = _document_entry(values, destination)
    what = f"{source} -> {destination}:{port or 'any'}/{protocol}"
    if entry is None:
        code, rules = "open", []
        why = f"open: no firewall document guards {destination} (no rule names it, or it runs nowhere)"
    else:
        matching = [t for t in map(_Tuple.of, entry.get("allowed", ())) if t.source == source
                    and t.port in (0, port) and t.protocol in ("any", protocol)]
        if matching:
            code, rules = "allowed_by_rule", sorted({t.rule for t in matching})
            why = f"allowed by {rule_text(values, rules[0])}"
        else:
            code, rules = "default_deny", sorted(str(r) for r in entry.get("named_by", ()))
            why = f"default deny: {destination} is guarded and no allowed tuple matches"
    allowed = code in ("allowed_by_rule", "open")
    lines = [f"{what}: {'allowed' if allowed else 'denied'}", f"  {why}", _stale_note(failure)]
    return {"source": source, "destination": destination, "port": port, "protocol": protocol,
            "verdict": "allowed" if allowed else "denied", "code": code, "rules": rules,
            "lines": lines, "stale": failure}
