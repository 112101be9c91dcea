"""The rebalancing section of `cca explain SERVICE`: the moves of the last rebalancing cycle that
concern the service, with their gains — a group's move names its members — and, for a service in a
group, why the group could not move (the reason codes of engine/disruption/group_moves.py), read
from the disruption controller's `derived/rebalance`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from ccattler.engine.placement.reasons import describe


def _concerns(entry: Mapping[str, Any], service: str) -> bool:
    if entry.get("service") == service:
        return True
    members = entry.get("members") or ()
    return any((m.get("service") if isinstance(m, Mapping) else m) == service for m in members)


def moves_of(doc: Any, service: str) -> dict[str, Any] | None:
    """`{"at", "moves": [{"instance", "from", "to", "gain"} | {"group", "members", "from", "to",
    "gain"}], "blocked": [{"group", "members", "from", "code", "args"}]}` for `service`
    (`tenant/name`), or None when the last cycle neither moved nor held anything of it."""
    if not isinstance(doc, Mapping):
        return None
    moves = []
    for m in doc.get("moves") or ():
        if isinstance(m, Mapping) and _concerns(m, service):
            keys = ("group", "members") if "members" in m else ("instance",)
            moves.append({k: m.get(k) for k in (*keys, "from", "to", "gain")})
    blocked = [dict(b) for b in doc.get("blocked") or () if isinstance(b, Mapping) and _concerns(b, service)]
    if not moves and not blocked:
        return None
    return {"at": doc.get("at"), "moves": moves, "blocked": blocked}


def _targets(args: Mapping[str, Any]) -> str:
    rejects = args.get("rejects") or ()
    shown = "; ".join(f"{r.get('node')} {describe(str(r.get('code')), list(r.get('args') or ()))}"
                      for r in rejects if isinstance(r, Mapping))
    return "no target node has room for all its members together" + (f": {shown}" if shown else "")


_WHY: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "member_budget": lambda a: (f"budget of member {a.get('member')} (floor {a.get('floor')}, "
                                f"{a.get('ready')} ready)"),
    "member_rollout": lambda a: f"member {a.get('member')} is being rolled out",
    "member_missing": lambda a: f"member {a.get('member')} has no service document",
    "member_not_ready": lambda a: f"instance {a.get('instance')} is not ready",
    "moved_recently": lambda a: f"instance {a.get('instance')} moved within the cooldown",
    "one_seat_at_a_time": lambda a: "a stateful member: one seat at a time",
    "split": lambda a: f"its members are not all on the node ({', '.join(a.get('instances') or ())})",
    "no_target": _targets,
    "not_worth_it": lambda a: (f"room on {', '.join(a.get('targets') or ())}, but the combined gain "
                               "does not outweigh restarting every member (or the cycle's moves "
                               "went to better ones)"),
}


def why_blocked(entry: Mapping[str, Any]) -> str:
    """A blocked group's reason in English; an unknown code prints as it is."""
    code, args = str(entry.get("code")), entry.get("args") or {}
    word = _WHY.get(code)
    return word(args) if word is not None and isinstance(args, Mapping) else f"{code} {args}"


def _members(move: Mapping[str, Any]) -> str:
    return ", ".join(str(m.get("instance")) for m in move.get("members") or () if isinstance(m, Mapping))


def moves_lines(section: Mapping[str, Any]) -> list[str]:
    out = []
    if section.get("moves"):
        at = section.get("at")
        when = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "?"
        out.append(f"  rebalancing: moved at {when} (the last cycle)")
        for m in section["moves"]:
            what = f"group {m['group']} ({_members(m)})" if "group" in m else m["instance"]
            out.append(f"    {what}: {m['from']} → {m['to']} ({m['gain']})")
    for b in section.get("blocked") or ():
        out.append(f"  rebalancing: group {b.get('group')} cannot move off {b.get('from')}: {why_blocked(b)}")
    return out
