"""`cca fmt`, `cca lint` and `cca render`: the .cca language tools that need no cluster.

`lint` and `render` take the template flags `--values FILE`, `--set k=v`, `--set-from-env k=ENV`
(the same flags `apply` and `diff` take); diagnostics print as `file:line:col: severity: message`
with the offending line and a caret, or as JSON with `-o json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

ValuesOpt = Annotated[list[Path], typer.Option("--values", help="A .ccv values file (repeatable).")]
SetOpt = Annotated[list[str], typer.Option("--set", help="A value: key=value (repeatable).")]
EnvOpt = Annotated[list[str], typer.Option("--set-from-env", help="A value from the environment: key=ENV.")]


def parse_pairs(pairs: list[str], flag: str) -> dict[str, str]:
    """`["a.b=1", …]` → `{"a.b": "1"}`; a pair without `=` is a usage error."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {pair!r}", param_hint=flag)
        out[key] = value
    return out


def load(paths, values, sets, from_env):
    from ccattler.dsl import load_sources

    return load_sources(paths, values=values, sets=parse_pairs(sets, "--set"),
                        set_from_env=parse_pairs(from_env, "--set-from-env"))


def fmt(
    files: Annotated[list[Path], typer.Argument(help=".cca files to format (- reads stdin).")],
    write: Annotated[bool, typer.Option("-w", "--write", help="Rewrite the files in place.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if not canonical (a template: as "
                                                        "rendered with its own values.ccv).")] = False,
) -> None:
    """Print .cca files in canonical form (4-space indent, one field per line, comments kept).
    A template is not rewritten; `--check` checks what it renders to with its own values."""
    from ccattler.dsl import DslError
    from ccattler.dsl.fmt import format_source
    from ccattler.dsl.loading import load_sources, read_text
    from ccattler.dsl.template import is_template

    failed = unformatted = False
    for path in files:
        try:
            text = sys.stdin.read() if str(path) == "-" else read_text(path)
            if is_template(text):
                if not check or str(path) == "-":
                    print(f"{path}: a template ({{{{ }}}}) is not formatted; `cca render` it first",
                          file=sys.stderr)
                    failed = True
                    continue
                # --check of a template: what it renders to with its own values must be canonical
                (rendered,) = load_sources([path])
                text = rendered.text
            pretty = format_source(text, str(path))
        except DslError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
            continue
        if check:
            if pretty != text:
                print(f"{path}: not formatted", file=sys.stderr)
                unformatted = True
        elif write and str(path) != "-":
            if pretty != text:
                try:
                    path.write_text(pretty)
                except OSError as exc:
                    print(f"{path}: cannot write: {exc.strerror or exc}", file=sys.stderr)
                    failed = True
                    continue
                print(f"formatted {path}", file=sys.stderr)
        else:
            sys.stdout.write(pretty)
    if failed or unformatted:
        raise typer.Exit(1)


def lint(
    paths: Annotated[list[Path], typer.Argument(help=".cca files or directories.")],
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    output: Annotated[str, typer.Option("-o", "--output", help="text or json.")] = "text",
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant of names without one.")] = "default",
    values: ValuesOpt = [],  # noqa: B006 - typer reads the default, it is never mutated
    sets: SetOpt = [],  # noqa: B006
    from_env: EnvOpt = [],  # noqa: B006
) -> None:
    """Check .cca files without a cluster: errors exit 1, warnings are shown."""
    from ccattler.dsl import DslError, lint_sources
    from ccattler.dsl.loading import load_with_diagnostics

    if output not in ("text", "json"):
        raise typer.BadParameter("expected text or json", param_hint="-o")
    try:
        sources, diagnostics = load_with_diagnostics(paths, values, sets=parse_pairs(sets, "--set"),
                                                     set_from_env=parse_pairs(from_env, "--set-from-env"))
        diagnostics += lint_sources(sources, strict=strict, tenant=tenant)
    except DslError as exc:
        sources, diagnostics = [], list(exc.diagnostics)
    errors = sum(d.severity == "error" for d in diagnostics)
    if output == "json":
        print(json.dumps([d.to_json() for d in diagnostics], indent=2))
    else:
        for diagnostic in diagnostics:
            print(diagnostic.render())
        warnings = len(diagnostics) - errors
        if diagnostics:
            print(f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}")
        else:
            print(f"ok: {len(sources)} file{'s' * (len(sources) != 1)}, no problems")
    if errors:
        raise typer.Exit(1)


def render(
    file: Annotated[Path, typer.Argument(help="A .cca file (template).")],
    values: ValuesOpt = [],  # noqa: B006
    sets: SetOpt = [],  # noqa: B006
    from_env: EnvOpt = [],  # noqa: B006
) -> None:
    """Print a .cca template rendered with its values."""
    from ccattler.dsl import DslError

    try:
        (source,) = load([file], values, sets, from_env)
    except DslError as exc:
        print(str(exc), file=sys.stderr)
        raise typer.Exit(1) from None
    sys.stdout.write(source.text)


def register(app: typer.Typer) -> None:
    app.command("fmt")(fmt)
    app.command("lint")(lint)
    app.command("render")(render)
