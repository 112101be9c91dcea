"""The .cca language: parse, compile to facts, format, lint, and render templates.

`load_sources` reads files (rendering `{{ }}` templates with layered values), `compile_sources`
turns them into `{key: document}` facts (docs/facts.md), `lint_sources` lists problems and
`format_source` prints the canonical form. Every user-facing problem is a `Diagnostic`; a failed
compile raises `DslError` carrying all of them.
"""

from ccattler.dsl import ast
from ccattler.dsl.compiler import Known, compile_sources, compile_with_diagnostics
from ccattler.dsl.errors import Diagnostic, DslError
from ccattler.dsl.fmt import format_source
from ccattler.dsl.lint import lint_sources
from ccattler.dsl.loading import load_sources
from ccattler.dsl.parser import parse
from ccattler.dsl.sources import Reader, Source, read_relative

__all__ = [
    "Diagnostic",
    "DslError",
    "Known",
    "Reader",
    "Source",
    "ast",
    "compile_sources",
    "compile_with_diagnostics",
    "format_source",
    "lint_sources",
    "load_sources",
    "parse",
    "read_relative",
]
