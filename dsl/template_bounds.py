"""A Jinja2 sandbox that refuses to build a value past `limits.MAX_TEMPLATE_OUTPUT` characters.

The rendered text is bounded by counting chunks as they come (`template.render`), but one
expression (`{{ 'a' * 1000000000 }}`, `{{ x | center(10**9) }}`) can allocate gigabytes before
any chunk exists. So every operator, call, filter and `~` that can grow a value checks the size of
what it would build before building it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from jinja2 import Environment, StrictUndefined
from jinja2.compiler import CodeGenerator
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from ccattler.dsl.limits import MAX_TEMPLATE_OUTPUT

LIMIT = MAX_TEMPLATE_OUTPUT
#: Filters whose time grows faster than their input (textwrap, regular expressions) take at most this.
SLOW_INPUT = 64 * 1024
_PASSED = (Environment, Context, EvalContext)
_SLOW = frozenset({"wordwrap", "urlize", "striptags", "truncate", "title", "wordcount"})


class TemplateTooLarge(ValueError):
    """A template expression or its output would pass `limits.MAX_TEMPLATE_OUTPUT`."""


def _size(value: object) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict)) else 0


def _refuse(what: str, size: int) -> None:
    if size > LIMIT:
        raise TemplateTooLarge(f"{what} would be {size} long; the limit is {LIMIT} characters")


def _check_numbers(args: tuple, kwargs: dict) -> None:
    """Counts and widths (`range(n)`, `center(n)`, `indent(n)`, `ljust(n)`) are bounded too."""
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > LIMIT:
            raise TemplateTooLarge(f"argument {arg} is over the limit of {LIMIT}")


def _check_replace(text: object, args: tuple) -> None:
    if isinstance(text, str) and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = text.count(args[0]) if args[0] else len(text) + 1
        _refuse("the replaced text", len(text) + count * max(0, len(args[1]) - len(args[0])))


def _check_join(items: object, args: tuple) -> None:
    if isinstance(items, (list, tuple)):
        separator = args[0] if args and isinstance(args[0], str) else ""
        _refuse("the joined text", sum(_size(i) for i in items) + len(separator) * len(items))


def _bounded_filter(name: str, fn: Callable) -> Callable:
    @functools.wraps(fn)  # keeps jinja's pass_context/pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_numbers(args, kwargs)
        values = [a for a in args if not isinstance(a, _PASSED)]  # past a passed-in environment/context
        if name == "replace" and values:
            _check_replace(values[0], tuple(values[1:]))
        if name == "join" and values:
            _check_join(values[0], tuple(values[1:]))
        if name == "indent" and values and isinstance(values[0], str):
            width = next((v for v in values[1:2] if isinstance(v, int)), kwargs.get("width", 4))
            width = len(width) if isinstance(width, str) else width
            _refuse("the indented text", len(values[0]) + width * (values[0].count("\n") + 1))
        if name in _SLOW and values and _size(values[0]) > SLOW_INPUT:
            raise TemplateTooLarge(f"{name} takes at most {SLOW_INPUT} characters; "
                                   f"this text has {_size(values[0])}")
        return fn(*args, **kwargs)

    return bounded


class _Generator(CodeGenerator):
    """`a ~ b` goes through `environment.bounded_join`, so concatenation is checked too."""

    def visit_Concat(self, node, frame) -> None:  # noqa: N802 (jinja's visitor naming)
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedEnvironment(SandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+"})
    code_generator_class = _Generator

    def __init__(self, **options: Any) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, **options)
        self.filters = {name: _bounded_filter(name, fn) for name, fn in self.filters.items()}

    def bounded_join(self, parts: tuple) -> str:
        texts = [str(p) for p in parts]
        _refuse("the concatenation", sum(map(len, texts)))
        return "".join(texts)

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            size, times = (_size(left), right) if _size(left) else (_size(right), left)
            if isinstance(times, int):
                _refuse(f"a repetition of {size} × {times}", size * times)
        elif operator == "+":
            _refuse("the sum", _size(left) + _size(right))
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
                and right * abs(left).bit_length() > 4096:
            raise TemplateTooLarge(f"{left} ** {right} is too large a number for a template")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's signature)
        _check_numbers(args, kwargs)
        method = getattr(__obj, "__name__", "")
        owner = getattr(__obj, "__self__", None)
        if method == "replace":
            _check_replace(owner, args)
        elif method == "join" and isinstance(owner, str):
            _check_join(list(args[0]) if args and isinstance(args[0], (list, tuple)) else None, (owner,))
        elif method in ("format", "format_map"):
            _refuse("the formatted text", _size(owner) + sum(_size(a) for a in (*args, *kwargs.values())))
        return super().call(__context, __obj, *args, **kwargs)


def render_bounded(environment: BoundedEnvironment, text: str, values: dict) -> str:
    """Render chunk by chunk so an output past the limit stops rendering there."""
    parts, size = [], 0
    for chunk in environment.from_string(text).generate(values):
        size += len(chunk)
        _refuse("the rendered text", size)
        parts.append(chunk)
    return "".join(parts)
