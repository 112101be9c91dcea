"""Templates: `{{ name }}` placeholders rendered by a sandboxed Jinja2 environment.

Only sources that contain `{{` or `{%` are rendered. The environment is
`jinja2.sandbox.SandboxedEnvironment` (bounded in size, `template_bounds.py`) with `StrictUndefined`,
so a missing value is an error
naming the file, line and key, and templates cannot reach Python internals.
"""

from __future__ import annotations

import re
import traceback
from functools import cache

from ccattler.dsl.errors import ERROR, Diagnostic, DslError, line_of


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


@cache
def _environment():
    from ccattler.dsl.template_bounds import BoundedEnvironment

    return BoundedEnvironment()


def render(text: str, name: str, values: dict) -> str:
    """Render `text` with `values`; raise `DslError` (file:line:col) on any template problem."""
    if not is_template(text):
        return text
    import jinja2  # only templates pay for importing it

    try:
        from ccattler.dsl.template_bounds import render_bounded

        return render_bounded(_environment(), text, values)
    except jinja2.TemplateSyntaxError as exc:
        raise _error(text, name, exc.lineno or 1, None, "template",
                     f"template syntax: {exc.message}") from None
    except jinja2.UndefinedError as exc:
        missing = re.search(r"'([^']+)' (?:is undefined|has no attribute '([^']+)')", str(exc))
        key = (missing.group(2) or missing.group(1)) if missing else None
        line = _template_line(exc, name)
        message = f'undefined value "{key}"' if key else f"undefined value: {exc}"
        raise _error(text, name, line, key, "undefined-value", message,
                     f"set it in a values file, with --set {key}=…, or use {{{{ {key} | default(…) }}}}"
                     if key else None) from None
    except jinja2.exceptions.SecurityError as exc:
        raise _error(text, name, _template_line(exc, name), None, "template",
                     f"not allowed in a template: {exc}") from None
    except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, RecursionError, MemoryError) as exc:
        raise _error(text, name, _template_line(exc, name), None, "template",
                     f"template error: {exc}") from None


def _template_line(exc: BaseException, name: str) -> int:
    """The template line where rendering failed (Jinja rewrites its frames to the template)."""
    line = 1
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename in ("<template>", name):
            line = lineno
    return line


def _error(text, name, line, key, code, message, suggestion=None) -> DslError:
    source_line = line_of(text, line)
    column = 1
    if key and key in source_line:
        column = source_line.index(key) + 1
    elif "{{" in source_line:
        column = source_line.index("{{") + 1
    width = len(key) if key else 2
    return DslError([Diagnostic(name, line, column, ERROR, code, message, source_line, width, suggestion)])
