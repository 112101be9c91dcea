"""Decode model atoms into frozen dataclasses: one class per output predicate, fields = arguments.

A class names its predicate with a `PREDICATE` class attribute (default: the class name in
snake_case); each argument goes through `to_python` (Number → int, String → str, constant →
`Const`, tuple → tuple).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TypeVar

from clingo import Symbol

from ccattler.engine.solve.symbols import Const, to_python

T = TypeVar("T")


def predicate_of(cls: type) -> str:
    """The predicate a dataclass decodes: its `PREDICATE`, else its name in snake_case."""
    name = getattr(cls, "PREDICATE", None)
    return name or re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


def decode(symbols: Iterable[Symbol], cls: type[T]) -> list[T]:
    """Every atom of `cls`'s predicate (with the arity of its fields) as an instance of `cls`."""
    name = predicate_of(cls)
    arity = len(dataclasses.fields(cls))  # type: ignore[arg-type]
    decoded = []
    for symbol in symbols:
        if symbol.name != name:
            continue
        arguments = symbol.arguments  # a call into clingo each time: once per atom
        if len(arguments) == arity:
            decoded.append(cls(*(to_python(a) for a in arguments)))
    return decoded


def args_tuple(value: object) -> tuple[object, ...]:
    """A reason's `Args` as a tuple: a tuple term as is, one value as a 1-tuple, `()` for none."""
    if isinstance(value, tuple):
        return value
    if isinstance(value, Const) and value.name == "none":
        return ()
    return (value,)


@dataclasses.dataclass(frozen=True, slots=True)
class Reject:
    """`reject(Subject, Target, Code, Args)`: Subject cannot go to Target, for reason Code(Args)."""

    subject: object
    target: object
    code: Const
    args: object

    @property
    def arguments(self) -> tuple[object, ...]:
        return args_tuple(self.args)
