"""Admission tests run against the real SQLite store; builders live in admission_builders.py."""

import sys
from pathlib import Path

import pytest

from ccattler.engine.store import open_store

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def store():
    with open_store("sqlite://:memory:") as s:
        yield s
