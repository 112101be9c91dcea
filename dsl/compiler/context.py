"""The state of one compile: every declared name, and per source a `Unit` that reads fields.

A `Unit` reports problems as diagnostics and keeps going (every error of a file is reported), and
resolves names: `name` → the referring object's tenant, then the file's tenant; `tenant/name`
explicit. Declared means in the sources or, when the caller passes `known`, in the cluster; a name
declared nowhere resolves to the referrer's tenant with a warning (an error with `known`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ccattler.dsl import quantities
from ccattler.dsl.ast import File, ListValue, Node, Scalar, Span
from ccattler.dsl.errors import ERROR, WARNING, Diagnostic, did_you_mean
from ccattler.dsl.sources import Reader, Source, escapes
from ccattler.engine.facts import CcaError, InvalidKey, parse_service


@dataclass(frozen=True, slots=True)
class Decl:
    """A declared object: where it is, so duplicates and references can point at it."""

    kind: str
    tenant: str | None
    name: str
    source: str
    span: Span


#: Findings that a line skipped after a syntax error can cause; not reported for such blocks.
_CASCADES = frozenset({"missing-image", "missing-field", "no-resources", "bad-probe", "bad-disruption",
                       "group-body", "group-instances", "group-ports"})

#: known(kind, tenant, name) -> True when the cluster already holds that object.
Known = Callable[[str, str, str], bool]


@dataclass
class Declarations:
    """Every object the sources of one compile declare, by (kind, tenant, name), and what the
    cluster already holds (`known`, when the caller can tell)."""

    table: dict[tuple[str, str | None, str], Decl] = field(default_factory=dict)
    known: Known | None = None

    def get(self, kind: str, tenant: str | None, name: str) -> Decl | None:
        return self.table.get((kind, tenant, name))

    def exists(self, kind: str, tenant: str, name: str) -> bool:
        return (kind, tenant, name) in self.table or bool(self.known and self.known(kind, tenant, name))


class Unit:
    """Compiles the blocks of one source: diagnostics, field access, values, names."""

    def __init__(self, file: File, source: Source, tenant: str, decls: Declarations,
                 reader: Reader, broken_lines: list[tuple[int, int]]):
        self.file = file
        self.source = source
        self.tenant = tenant
        self.decls = decls
        self.reader = reader
        self.diagnostics: list[Diagnostic] = []
        self._broken = broken_lines
        self._lines: list[str] | None = None  # the source's lines, split once when first needed
        self._suggested = 0

    # ---- diagnostics ---------------------------------------------------------------------------
    def report(self, severity: str, span: Span, code: str, message: str,
               suggestion: str | None = None) -> None:
        if code in _CASCADES and any(a <= span.line <= b for a, b in self._broken):
            return  # the block lost a line to a syntax error: "missing X" would only be noise
        width = span.end_column - span.column if span.end_line == span.line else 1
        if self._lines is None:
            self._lines = self.file.text.split("\n")
        source_line = self._lines[span.line - 1] if 0 < span.line <= len(self._lines) else ""
        self.diagnostics.append(Diagnostic(
            self.file.name, span.line, span.column, severity, code, message,
            source_line, max(1, width), suggestion))

    def error(self, span: Span, code: str, message: str, suggestion: str | None = None) -> None:
        self.report(ERROR, span, code, message, suggestion)

    def warn(self, span: Span, code: str, message: str, suggestion: str | None = None) -> None:
        self.report(WARNING, span, code, message, suggestion)

    # ---- fields ----------------------------------------------------------------------------------
    def singles(self, block: Node, what: str, repeatable: frozenset[str] = frozenset()) -> dict[str, Node]:
        """The block's fields by keyword; a non-repeatable field given twice is an error."""
        seen: dict[str, Node] = {}
        for item in block.body or ():
            if item.keyword in seen and item.keyword not in repeatable:
                first = seen[item.keyword].span.line
                self.error(item.keyword_span, "duplicate-field",
                           f"{item.keyword} is given twice in {what} (first at line {first})")
                continue
            seen.setdefault(item.keyword, item)
        return seen

    def read(self, scalar: Scalar | None, reader: Callable[[str], Any], default: Any = None) -> Any:
        """Read a value with one of `quantities`' readers; report and return `default` on error."""
        if scalar is None:
            return default
        try:
            return reader(scalar.value)
        except quantities.QuantityError as exc:
            self.error(scalar.span, exc.code, str(exc))
            return default

    def value(self, node: Node | None, reader: Callable[[str], Any] | None = None,
              default: Any = None) -> Any:
        """The (first) value of a field, read as text or with `reader`."""
        if node is None or not node.values:
            return default
        scalar = node.values[0]
        if isinstance(scalar, ListValue):
            return default
        if reader is None:
            return self.text(scalar)
        if reader is quantities.count:  # name the field in "must not be negative"
            return self.read(scalar, lambda text: quantities.count(text, node.keyword), default)
        return self.read(scalar, reader, default)

    def text(self, scalar: Scalar) -> str:
        """A string value; `from "path"` reads the file through the reader."""
        if scalar.style != "from":
            return scalar.value
        if escapes(scalar.value):
            self.error(scalar.span, "path-escape",
                       f'from "{scalar.value}" leaves the directory of {self.source.name}',
                       "use a path relative to the .cca file, inside its directory")
            return ""
        try:
            return self.reader(self.source, scalar.value)
        except (OSError, CcaError, ValueError) as exc:
            self.error(scalar.span, "from-file", f"cannot read {scalar.value!r}: {exc}")
            return ""

    def word(self, scalar: Scalar, allowed: tuple[str, ...], what: str) -> str | None:
        """A value that must be one of `allowed`."""
        if scalar.value in allowed:
            return scalar.value
        self.error(scalar.span, "bad-value",
                   f"{what} must be one of {', '.join(allowed)}, got {scalar.value!r}",
                   did_you_mean(scalar.value, allowed))
        return None

    # ---- names ----------------------------------------------------------------------------------
    def split_name(self, scalar: Scalar, namespaced: bool = True) -> tuple[str | None, str] | None:
        """A declared name: (tenant, name) for namespaced kinds, (None, name) for cluster kinds."""
        text = scalar.value
        try:
            if namespaced:
                ref = parse_service(text, self.tenant)
                return ref.tenant, ref.name
            if "/" in text:
                raise InvalidKey(f"{text!r}: this kind is cluster-wide and takes no tenant/")
            parse_service(text)
            return None, text
        except InvalidKey as exc:
            self.error(scalar.span, "bad-name", str(exc))
            return None

    def resolve(self, kind: str, scalar: Scalar, owner_tenant: str | None = None) -> str | None:
        """`name` → "tenant/name": the owner's tenant, then the file's, wherever it is declared (these
        files or the cluster); `t/name` stays explicit. Declared nowhere: the owner's tenant, with a
        warning — or an error when the cluster was consulted (`known`) and lacks it too."""
        text = scalar.value
        try:
            if "/" in text:
                candidates = [parse_service(text)]
            else:
                tenants = dict.fromkeys((owner_tenant or self.tenant, self.tenant))
                candidates = [parse_service(text, tenant) for tenant in tenants]
        except InvalidKey as exc:
            self.error(scalar.span, "bad-name", str(exc))
            return None
        for ref in candidates:
            if self.decls.exists(kind, ref.tenant, ref.name):
                return ref.full
        ref = candidates[0]
        hint = self._similar(kind, text)
        if self.decls.known is None:
            self.warn(scalar.span, "undeclared",
                      f'{kind} "{ref.full}" is not declared in the files given (it may exist in the cluster)',
                      hint)
        else:
            self.error(scalar.span, "undeclared",
                       f'{kind} "{ref.full}" is declared neither in the files given nor in the cluster', hint)
        return ref.full

    def _similar(self, kind: str, text: str) -> str | None:
        """A did-you-mean among the declared names of `kind`, for the first 10 misses of a file and
        up to 100 names (difflib costs ~25 µs a comparison; this bounds it to ~25 ms a file)."""
        self._suggested += 1
        if self._suggested > 10:
            return None
        names = [name if tenant in (self.tenant, None) else f"{tenant}/{name}"
                 for (k, tenant, name) in self.decls.table if k == kind]
        return did_you_mean(text, names) if len(names) <= 100 else None
