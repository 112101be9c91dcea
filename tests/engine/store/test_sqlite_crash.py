"""Crash test: a writer killed with SIGKILL mid-stream loses no write whose call had returned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ccattler.engine.store import open_store

pytestmark = pytest.mark.store

# The child alternates single puts and 20-key txns and reports each revision after the call returns.
WRITER = """
import sys
from ccattler.engine.store import open_store
store = open_store(sys.argv[1])
for i in range(1_000_000):
    if i % 2:
        revision = store.put(f"crash/single/{i:07}", {"i": i, "pad": "x" * 200})
    else:
        revision = store.txn(puts={f"crash/batch/{i:07}/{j:02}": {"i": i, "j": j} for j in range(20)})[1]
    sys.stdout.write(f"{i} {revision}\\n")  # one write(): print() writes each part apart when unbuffered
    sys.stdout.flush()
"""


def complete_lines(stream):
    """The child's reports, less a last one cut by the kill (no newline): its write was not reported."""
    for line in stream:
        if line.endswith("\n"):
            yield line


@pytest.mark.parametrize("kill_after", [50, 333])
def test_every_reported_write_survives_sigkill(tmp_path, kill_after):
    url = f"sqlite://{tmp_path}/state.db"
    child = subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, text=True)
    reported: list[tuple[int, int]] = []
    for line in complete_lines(child.stdout):
        i, revision = map(int, line.split())
        reported.append((i, revision))
        if len(reported) == kill_after:
            os.kill(child.pid, signal.SIGKILL)  # mid-stream: the child is busy writing the next one
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert len(reported) >= kill_after

    with open_store(url) as store:
        assert store.revision() >= reported[-1][1]
        singles = {fact.key: fact for fact in store.range("crash/single/")[0]}
        batches, _ = store.range("crash/batch/")
        by_write: dict[int, list] = {}
        for fact in batches:
            by_write.setdefault(fact.value["i"], []).append(fact)
        for i, revision in reported:
            if i % 2:
                fact = singles[f"crash/single/{i:07}"]
                assert (fact.value["i"], fact.mod_revision) == (i, revision)
            else:
                assert len(by_write[i]) == 20 and {fact.mod_revision for fact in by_write[i]} == {revision}
        # Nothing half-written: every batch present is complete.
        assert all(len(facts) == 20 for facts in by_write.values())


# Four threads at once, so txns share group commits; each reports after its own call returns.
CONCURRENT_WRITER = """
import sys, threading
from ccattler.engine.store import open_store
store = open_store(sys.argv[1])
out = threading.Lock()
def write(writer):
    for i in range(1_000_000):
        revision = store.put(f"crash/{writer}/{i:07}", {"writer": writer, "i": i})
        with out:
            sys.stdout.write(f"{writer} {i} {revision}\\n")
            sys.stdout.flush()
for writer in range(4):
    threading.Thread(target=write, args=(writer,)).start()
"""


def test_every_reported_write_of_concurrent_writers_survives_sigkill(tmp_path):
    url = f"sqlite://{tmp_path}/state.db"
    command = [sys.executable, "-c", CONCURRENT_WRITER, url]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    reported = []
    for line in complete_lines(child.stdout):
        reported.append(tuple(map(int, line.split())))
        if len(reported) == 400:
            os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert len(reported) >= 400
    with open_store(url) as store:
        facts = {fact.key: fact for fact in store.range("crash/")[0]}
        for writer, i, revision in reported:
            fact = facts[f"crash/{writer}/{i:07}"]
            assert (fact.value, fact.mod_revision) == ({"writer": writer, "i": i}, revision)
        revisions = sorted(fact.mod_revision for fact in facts.values())
        assert len(revisions) == len(set(revisions))  # one txn, one revision, even in a shared commit
