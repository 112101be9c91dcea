"""Read .cca files and directories into `Source`s, rendering templates with layered values.

Values precedence, lowest first: `<name>/values.ccv` beside `<name>.cca` < each `--values FILE`
in order < `--set key=value` < `--set-from-env key=ENV_VAR`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ccattler.dsl.errors import ERROR, Diagnostic, DslError
from ccattler.dsl.recovery import MAX_SOURCE_BYTES
from ccattler.dsl.sources import Source
from ccattler.dsl.template import render
from ccattler.dsl.values import check_key, merge, parse_scalar, parse_values, set_dotted


def _problem(name: str, code: str, message: str, line: int = 0, column: int = 0) -> Diagnostic:
    return Diagnostic(name, line, column, ERROR, code, message)


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories → their *.cca files, recursively, hidden ones skipped, sorted."""
    out: list[Path] = []
    problems = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.cca") if p.is_file() and not _hidden(p.relative_to(path)))
            if not found:
                problems.append(_problem(str(path), "no-files", "directory holds no .cca files"))
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            problems.append(_problem(str(path), "no-files", "no such file or directory"))
    if problems:
        raise DslError(problems)
    return out


def read_text(path: Path) -> str:
    """A source file's text; refuse files that are too large or not UTF-8, with a position."""
    name = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise DslError([_problem(name, "too-large",
                                     f"file is {size} bytes; the limit is {MAX_SOURCE_BYTES // 2**20} MiB")])
        data = path.read_bytes()
    except OSError as exc:
        raise DslError([_problem(name, "unreadable", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DslError([_problem(name, "binary", f"not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                                 "is this a binary file?", line, column)]) from None


def user_values(values: Iterable[str | Path] = (), sets: Mapping[str, str] | None = None,
                set_from_env: Mapping[str, str] | None = None,
                environ: Mapping[str, str] | None = None) -> dict:
    """The values every file sees: --values files, then --set, then --set-from-env."""
    environ = os.environ if environ is None else environ
    out: dict = {}
    for file in values:
        path = Path(file)
        out = merge(out, parse_values(read_text(path), str(path)))
    layer: dict = {}
    for key, raw in (sets or {}).items():
        try:
            value = parse_scalar(raw)
        except ValueError:
            value = raw
        set_dotted(layer, check_key(key), value)
    problems = []
    for key, variable in (set_from_env or {}).items():
        if variable not in environ:
            problems.append(_problem("--set-from-env", "undefined-value",
                                     f"environment variable {variable} (for {key}) is not set"))
            continue
        set_dotted(layer, check_key(key), environ[variable])
    if problems:
        raise DslError(problems)
    return merge(out, layer)


def load_sources(paths: Iterable[str | Path], values: Iterable[str | Path] = (),
                 sets: Mapping[str, str] | None = None, set_from_env: Mapping[str, str] | None = None,
                 environ: Mapping[str, str] | None = None) -> list[Source]:
    """Read files and directories (*.cca) and render their templates; errors of all files at once."""
    sources, problems = load_with_diagnostics(paths, values, sets, set_from_env, environ)
    if problems:
        raise DslError(problems)
    return sources


def load_with_diagnostics(paths: Iterable[str | Path], values: Iterable[str | Path] = (),
                          sets: Mapping[str, str] | None = None,
                          set_from_env: Mapping[str, str] | None = None,
                          environ: Mapping[str, str] | None = None) -> tuple[list[Source], list[Diagnostic]]:
    """The sources that loaded and the problems of those that did not (the linter checks both).

    Missing paths and bad values (shared by every file) still raise `DslError`.
    """
    files = expand_paths(paths)
    common = user_values(values, sets, set_from_env, environ)
    sources: list[Source] = []
    problems: list[Diagnostic] = []
    for path in files:
        try:
            text = read_text(path)
            local = path.parent / path.stem / "values.ccv"
            own = parse_values(read_text(local), str(local)) if local.is_file() else {}
            text = render(text, str(path), merge(own, common))
        except DslError as exc:
            problems.extend(exc.diagnostics)
            continue
        sources.append(Source(str(path), text, path.parent))
    return sources, problems
