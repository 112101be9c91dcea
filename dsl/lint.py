"""`cca lint`: every syntax and semantic problem of a set of sources, without touching a cluster.

Errors fail the lint; warnings (references to objects not declared in the files given, `latest`
tags, services without resources) are shown and, with `strict`, become errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ccattler.dsl.compiler import compile_with_diagnostics
from ccattler.dsl.errors import ERROR, WARNING, Diagnostic
from ccattler.dsl.sources import Reader, Source
from ccattler.engine.facts import DEFAULT_TENANT


def lint_sources(sources: Sequence[Source], strict: bool = False, tenant: str = DEFAULT_TENANT,
                 reader: Reader | None = None) -> list[Diagnostic]:
    """Every error and warning of `sources`, in file order; `strict` makes warnings errors."""
    _facts, diagnostics = compile_with_diagnostics(sources, tenant, reader)
    if strict:
        diagnostics = [replace(d, severity=ERROR) if d.severity == WARNING else d for d in diagnostics]
    return diagnostics
