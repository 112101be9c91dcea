"""Builders shared by the language tests: compile or lint a snippet of .cca text."""

from __future__ import annotations

import pytest

from ccattler.dsl import Source, compile_with_diagnostics


def compile_text(text: str, name: str = "t.cca", tenant: str = "default", base_dir=None):
    """(facts, diagnostics) of one source."""
    return compile_with_diagnostics([Source(name, text, base_dir)], tenant)


@pytest.fixture
def compiled():
    return compile_text
