"""The values admission speaks in: who asks (`Principal`), what it changes, and why it is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccattler.engine.facts import CcaError, display_name

PRINCIPAL_KINDS = ("admin", "user", "node", "service")


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller; the API server decides who it is, admission what it may do."""

    name: str
    kind: str  # "admin" | "user" | "node" | "service"
    team: str | None = None
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in PRINCIPAL_KINDS:
            raise ValueError(f"principal kind {self.kind!r} is not one of {', '.join(PRINCIPAL_KINDS)}")


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """One declared object: its kind, tenant (None for cluster-wide kinds), name and store key."""

    kind: str
    tenant: str | None
    name: str
    key: str

    @property
    def full_name(self) -> str:
        """`tenant/name` for namespaced objects, the bare name for cluster-wide ones."""
        return self.name if self.tenant is None else f"{self.tenant}/{self.name}"

    def __str__(self) -> str:
        shown = self.name if self.tenant is None else display_name(self.tenant, self.name)
        return f"{self.kind} {shown}"


@dataclass(frozen=True, slots=True)
class Denial:
    """Why a request is refused: the policy that refuses it, a stable code, the offending value."""

    policy: str
    code: str
    subject: str  # what was refused: "update service payments/checkout", "tenant payments"
    value: str  # the offending value: "resource.team=payments", "latest", "cpu 3000m > 2000m"
    message: str

    def __str__(self) -> str:
        return f"{self.subject}: denied by {self.policy} [{self.code}]: {self.message}"


@dataclass(frozen=True, slots=True)
class PolicyWarning:
    """A policy's warning: reported with the result, never blocks."""

    policy: str
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.policy} [{self.code}]: {self.message}"


class Denied(CcaError):
    """The request was refused by authorization, quota or policy; nothing was written."""

    def __init__(self, denials: tuple[Denial, ...]) -> None:
        self.denials = denials
        lines = [f"request denied ({len(denials)} reason{'s' if len(denials) != 1 else ''}):"]
        lines += [f"  - {denial}" for denial in denials]
        super().__init__("\n".join(lines))


class Conflict(CcaError):
    """The objects changed while the request was being admitted; retrying may succeed."""

    retriable = True


class PolicyError(CcaError):
    """An operator `.lp` policy does not parse or ground, or derives malformed output."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to `authorize`: allowed, or the denials that say why not."""

    allowed: bool
    denials: tuple[Denial, ...] = ()
    warnings: tuple[PolicyWarning, ...] = ()

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True, slots=True)
class Change:
    """One object an apply adds, changes or removes, with its document before and after."""

    ref: ObjectRef
    old: dict[str, Any] | None
    new: dict[str, Any] | None

    @property
    def fields(self) -> tuple[str, ...]:
        """Top-level fields that differ (all of them for adds and removals)."""
        old, new = self.old or {}, self.new or {}
        return tuple(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)))


@dataclass(frozen=True, slots=True)
class Diff:
    """What applying the sources would do, and what admission would say about it."""

    revision: int
    added: tuple[Change, ...]
    changed: tuple[Change, ...]
    removed: tuple[Change, ...]
    unchanged: tuple[ObjectRef, ...]
    denials: tuple[Denial, ...] = ()
    warnings: tuple[PolicyWarning, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """A committed (or, with dry_run, admitted but unwritten) apply."""

    revision: int
    added: tuple[ObjectRef, ...]
    changed: tuple[ObjectRef, ...]
    removed: tuple[ObjectRef, ...]
    unchanged: tuple[ObjectRef, ...]
    warnings: tuple[PolicyWarning, ...] = ()
    dry_run: bool = False
