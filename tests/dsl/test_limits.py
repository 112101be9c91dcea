"""Issue 12 class 3: every quantity has a maximum (`dsl/limits.py`), `cca lint` reports exactly the
limits apply enforces, and a template cannot make the client build a huge value."""

from __future__ import annotations

import tracemalloc

import pytest

from ccattler.dsl import DslError, limits
from ccattler.dsl import compiler as compiler_module
from ccattler.dsl.compiler import compile_sources, compile_with_diagnostics
from ccattler.dsl.lint import lint_sources
from ccattler.dsl.sources import Source
from ccattler.dsl.template import render


def service(name: str, instances: int | str = 1) -> str:
    return f'service {name} {{\n  image "busybox:1"\n  instances {instances}\n}}\n'


def errors(*texts: str) -> list[tuple[str, str]]:
    sources = [Source(f"f{i}.cca", t) for i, t in enumerate(texts)]
    return [(d.code, d.message) for d in lint_sources(sources) if d.severity == "error"]


def test_instances_up_to_the_limit_are_accepted():
    assert errors(service("web", limits.MAX_INSTANCES)) == []


@pytest.mark.parametrize("count", [limits.MAX_INSTANCES + 1, 1_000_000_000, 10**30])
def test_instances_past_the_limit_are_refused_by_lint_and_compile(count):
    found = errors(service("web", count))
    assert found and found[0][0] in ("too-many", "bad-count")
    with pytest.raises(DslError):
        compile_sources([Source("web.cca", service("web", count))])


def test_autoscaling_max_past_the_limit_is_refused():
    text = ('service web {\n  image "busybox:1"\n  scale {\n    horizontal {\n      min 1\n'
            f'      max {limits.MAX_INSTANCES + 1}\n      target cpu 50%\n    }}\n  }}\n}}\n')
    assert ("too-many", f"max {limits.MAX_INSTANCES + 1} is over the limit of {limits.MAX_INSTANCES} "
            "instances per service") in errors(text)


def test_services_per_request_are_bounded(monkeypatch):
    monkeypatch.setattr(compiler_module, "MAX_SERVICES", 3)
    assert errors(*(service(f"s{i}") for i in range(3))) == []
    found = errors(*(service(f"s{i}") for i in range(4)))
    assert ("too-many", "4 services declared; the limit is 3 per request") in found


def test_objects_per_request_are_bounded(monkeypatch):
    monkeypatch.setattr(compiler_module, "MAX_OBJECTS", 2)
    found = errors(service("a") + service("b") + 'volume v {\n  size 1Gi\n}\n')
    assert any(code == "too-many" and "objects declared" in msg for code, msg in found)


def test_sources_per_request_are_bounded(monkeypatch):
    monkeypatch.setattr(compiler_module, "MAX_SOURCES", 5)
    facts, diagnostics = compile_with_diagnostics([Source(f"{i}.cca", "") for i in range(6)])
    assert facts == {} and [d.message for d in diagnostics] == ["6 source files; the limit is 5 per request"]


def test_a_source_past_the_size_limit_is_refused_before_parsing():
    big = "#" * (limits.MAX_SOURCE_BYTES + 1)
    found = errors(big)
    assert found and "the limit is 4 MiB" in found[0][1]


@pytest.mark.parametrize("template", [
    "{{ 'a' * 1000000000 }}",
    "{{ 1000000000 * 'a' }}",
    "{{ ['a'] * 1000000000 }}",
    "{{ 'a'.ljust(1000000000) }}",
    "{{ 'x' | center(1000000000) }}",
    "{{ ('x\\n' * 1000) | indent(100000) }}",
    "{% for i in range(100000000) %}a{% endfor %}",
    "{% set x = 'a' * 4000000 %}{{ x ~ x }}",
    "{% set x = 'a' * 3000000 %}{{ x + x }}",
    "{{ ('a' * 4000000) | replace('a', 'aa') }}",
    "{{ ('a' * 4000000).replace('a', 'aa') }}",
    "{{ ('a' * 1000).join(['b' * 10000] * 1000) }}",
    "{{ ('a' * 4000000) | wordwrap(1) }}",
    "{% for i in range(90000) %}{{ 'a' * 100 }}{% endfor %}",
])
def test_a_template_cannot_build_a_huge_value(template):
    tracemalloc.start()
    try:
        with pytest.raises(DslError) as err:
            render(template, "big.cca", {})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (d,) = err.value.diagnostics
    assert d.file == "big.cca" and d.code == "template"
    assert "limit" in d.message or "at most" in d.message
    assert peak < 64 * 2**20  # refused before building it (the output limit is 4 MiB)


def test_ordinary_templates_still_render():
    text = "{{ 'a' + 'b' }} {{ 1 + 2 }} {{ [1] + [2] }} {{ 'x' | replace('x', 'y') }}" \
        " {{ ['a', 'b'] | join(',') }} {{ 'hi' | center(6) }} {{ 'a\\nb' | indent(2) }}" \
        " {{ 'v' ~ 1 ~ n }} {{ 'ab' * 2 }}"
    assert render(text, "ok.cca", {"n": "x"}) == "ab 3 [1, 2] y a,b   hi   a\n  b v1x abab"
