"""docs/api.md's Limits table states the defaults the code has (issue 12: the docs state the limits)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccattler.dsl import limits
from ccattler.engine.admission.policies import MAX_POLICY_BYTES
from ccattler.engine.api import audit, audit_file, requests
from ccattler.engine.api.server import ServerOptions
from ccattler.engine.store import ops, queue_watch
from ccattler.engine.store.sqlite import DEFAULT_HISTORY

DOC = (Path(__file__).parents[3] / "docs" / "api.md").read_text()
ROWS = [line for line in DOC.splitlines() if line.startswith("| ")]
MiB = 1024 * 1024


def _number(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n:,}"


@pytest.mark.parametrize(("marker", "text"), [
    ("--max-message-bytes", _number(ServerOptions().max_message_bytes)),
    ("--watch-max-bytes", _number(ServerOptions().watch_max_bytes)),
    ("--workers", _number(ServerOptions().workers)),
    ("--audit-keep", _number(ServerOptions().audit_keep)),
    ("`MAX_SOURCES`", _number(limits.MAX_SOURCES)),
    ("`MAX_SOURCE_BYTES`", _number(limits.MAX_SOURCE_BYTES)),
    ("`MAX_FROM_FILES`", _number(limits.MAX_FROM_FILES)),
    ("`MAX_OBJECTS`", _number(limits.MAX_OBJECTS)),
    ("`MAX_SERVICES`", _number(limits.MAX_SERVICES)),
    ("`MAX_INSTANCES`", _number(limits.MAX_INSTANCES)),
    ("`DEFAULT_TENANT_INSTANCES`", _number(limits.DEFAULT_TENANT_INSTANCES)),
    ("`MAX_POLICY_BYTES`", f"{MAX_POLICY_BYTES // 1024} KiB"),
    ("`MAX_REPEATED`", _number(requests.DEFAULT_MAX_REPEATED)),
    ("`MAX_JSON_DEPTH`", f"{requests.MAX_JSON_DEPTH} levels"),
    ("`MAX_TXN_OPS`", _number(ops.MAX_TXN_OPS)),
    ("`MAX_TXN_OPS`", _number(ops.MAX_TXN_BYTES)),
    ("`queue_watch.MAX_BYTES`", _number(queue_watch.MAX_BYTES)),
    ("`queue_watch.MAX_PENDING`", _number(queue_watch.MAX_PENDING)),
    ("?history=", _number(DEFAULT_HISTORY)),
    ("`audit.MAX_OBJECT_CHARS`", _number(audit.MAX_OBJECT_CHARS)),
    ("--audit-log-maxsize", _number(audit_file.DEFAULT_MAX_BYTES)),
    ("--audit-log-maxsize", f"{audit_file.DEFAULT_BACKUPS} rotated"),
])
def test_the_limits_table_states_each_default(marker, text):
    [row] = [r for r in ROWS if marker in r]
    assert text in row, f"docs/api.md says {row!r}; the code's default is {text}"
