"""English for admission verdicts: one formatter per `reject` code, and operator `message` templates.

The logic derives codes and arguments only; the words live here. An unknown code prints a generic
line with its arguments, never fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from clingo import Symbol

from ccattler.engine.admission.model import Denial
from ccattler.engine.admission.vocabulary import Request, object_attributes
from ccattler.engine.solve import Const, Reject, args_tuple, to_python

if TYPE_CHECKING:
    from ccattler.engine.admission.evaluate import Context

_PLACEHOLDER = re.compile(r"\{(\d+)\}")


def render_value(value: object) -> str:
    """A decoded argument as users read it: strings bare, tuples comma-joined."""
    if isinstance(value, tuple):
        return ", ".join(render_value(v) for v in value)
    if isinstance(value, Const):
        return value.name
    return str(value)


def render_template(template: str, args: tuple[object, ...]) -> str:
    """`message(Code, "text {0}")` filled with the args; only `{N}` is substituted (never
    str.format, which would let a policy reach Python attributes)."""

    def fill(match: re.Match[str]) -> str:
        index = int(match[1])
        return render_value(args[index]) if index < len(args) else match[0]

    return _PLACEHOLDER.sub(fill, template)


def format_operator(policy: str, sym: Symbol, messages: Mapping[str, str], context: Context) -> Denial:
    """An operator policy's `deny(Code, Args)` (or `warn`) as a denial naming the policy."""
    code = render_value(to_python(sym.arguments[0]))
    args = args_tuple(to_python(sym.arguments[1]))
    template = messages.get(code)
    message = render_template(template, args) if template else f"{code} ({render_value(args)})"
    return Denial(policy, code, context.summary, render_value(args), message)


def _request_of(subject: object, context: Context) -> Request | None:
    if isinstance(subject, Symbol) and subject.match("req", 3):
        verb, kind, name = (render_value(to_python(a)) for a in subject.arguments)
        return context.requests.get((verb, kind, name))
    return None


def _values(attr: str, request: Request, state: str, context: Context) -> tuple[str, ...]:
    side, _, key = attr.partition(".")
    if side == "subject":
        return context.subject.get("group" if key == "groups" else key, ())
    doc = request.old if state == "old" else request.new
    if side != "resource" or doc is None or request.ref is None:
        return ()
    return tuple(v for k, v in object_attributes(request.ref, doc) if k == key)


def _no_role(reject: Reject, request: Request | None, context: Context) -> tuple[str, str]:
    verb, kind, name = (render_value(a) for a in reject.arguments)
    where = ""
    if request is not None and request.ref is not None and request.ref.tenant is not None:
        where = f" in tenant {request.ref.tenant}"
    holder = render_value(context.subject.get("name", ("?",))[0])
    return f"{kind}.{verb}", f"no role granted to {holder} allows {kind}.{verb}{where}"


def _condition_false(reject: Reject, request: Request | None, context: Context) -> tuple[str, str]:
    index, state = reject.arguments
    state = render_value(state)
    conditions = (context.policies.get(render_value(reject.target)) or {}).get("when") or []
    if request is None or not isinstance(index, int) or index >= len(conditions):
        return render_value(reject.arguments), f"condition {index} does not hold"
    cond = conditions[index]
    operand = cond["operand"]
    # The attributes the condition reads: its own, and its operand when that names one.
    attrs = [cond["attr"]]
    if isinstance(operand, str) and operand.partition(".")[0] in {"subject", "resource"}:
        attrs.append(operand)
    values = {attr: _values(attr, request, state, context) for attr in attrs}
    offending = ", ".join(f"{attr}={'|'.join(v) or '(unset)'}" for attr, v in values.items())
    shown = "; ".join(
        f"{attr} is " + (" | ".join(f'"{x}"' for x in v) if v else "not set") for attr, v in values.items()
    )
    # An update judged before and after: say which, unless both read the same values.
    other = "new" if state == "old" else "old"
    when = ""
    if request.old is not None and request.new is not None and any(
        _values(attr, request, other, context) != v for attr, v in values.items()
    ):
        when = " as it is" if state == "old" else " as it would be"
    operand_text = f"[{', '.join(operand)}]" if isinstance(operand, list) else str(operand)
    text = f"`when {cond['attr']} {cond['op']} {operand_text}` is false for {request.ref}{when}"
    return offending, f"{text} ({shown})"


_UNITS = {"cpu": "m", "memory": "Mi", "storage": "Mi"}


def _quota_exceeded(reject: Reject, request: Request | None, context: Context) -> tuple[str, str]:
    tenant, resource, used, limit = (render_value(a) for a in reject.arguments)
    unit = _UNITS.get(resource, "")
    return (
        f"{resource} {used}{unit} > {limit}{unit}",
        f"tenant {tenant} would use {used}{unit} of {resource}, above its quota of {limit}{unit}",
    )


def _escalation(reject: Reject, request: Request | None, context: Context) -> tuple[str, str]:
    kind, verb, scope = (render_value(a) for a in reject.arguments)
    where = "in every tenant" if scope == "all" else f"in {'scope' if '/' in scope else 'tenant'} {scope}"
    holder = render_value(context.subject.get("name", ("?",))[0])
    return f"{kind}.{verb}", f"this would confer {kind}.{verb} {where}, which {holder} does not hold there"


def _external_port_taken(reject: Reject, request: Request | None, context: Context) -> tuple[str, str]:
    port, proto, other = (render_value(a) for a in reject.arguments)
    service = request.name if request is not None else "this service"
    return (f"{port}/{proto}",
            f"external port {port}/{proto} is claimed by both {service} and {other}: an external port "
            f"is on every node's address, so only one service may expose it")


def _group_port_clash(reject: Reject, request: Request | None, context: Context) -> tuple[str, str]:
    group, port, proto, service, other = (render_value(a) for a in reject.arguments)
    return (f"{port}/{proto}",
            f'group "{group}" shares its network, but {service} and {other} both listen on {proto} {port}: '
            f"members of a shared network are one address, so each needs its own port")


_FORMATTERS: dict[str, Callable[[Reject, Request | None, Context], tuple[str, str]]] = {
    "no_role": _no_role,
    "condition_false": _condition_false,
    "quota_exceeded": _quota_exceeded,
    "escalation": _escalation,
    "external_port_taken": _external_port_taken,
    "group_port_clash": _group_port_clash,
}


def format_reject(reject: Reject, context: Context) -> Denial:
    """A `reject(Subject, Policy, Code, Args)` of admission.lp as a denial."""
    request = _request_of(reject.subject, context)
    subject = request.text if request is not None else _subject_text(reject.subject)
    code = render_value(reject.code)
    formatter = _FORMATTERS.get(code)
    if formatter is None:
        value = render_value(reject.arguments)
        return Denial(render_value(reject.target), code, subject, value, f"{code} ({value})")
    value, message = formatter(reject, request, context)
    return Denial(render_value(reject.target), code, subject, value, message)


def _subject_text(subject: object) -> str:
    if isinstance(subject, Symbol) and subject.match("quota", 1):
        return f"tenant {render_value(to_python(subject.arguments[0]))}"
    return str(subject)
