"""`cca agent --start-jitter`: handed to every hosted node's loop (its first registration waits a
random delay below it, tests/agent/test_loop.py), and a value out of range refused up front."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ccattler.agent import process
from ccattler.cli.main import app


def test_the_jitter_reaches_each_node_loop(monkeypatch):
    seen = []
    monkeypatch.setattr(process.NodeAgent, "__init__",
                        lambda self, settings, core, ttl, tick, start_jitter=0.0: seen.append(start_jitter))
    monkeypatch.setattr(process.NodeAgent, "start", lambda self: self)
    monkeypatch.setattr(process, "make_core", lambda *a, **k: None)
    monkeypatch.setattr(process, "node_settings", lambda name, *a: type("S", (), {"name": name,
                                                                                   "document": {}})())
    options = process.AgentOptions(documents={"a": {}, "b": {}}, runtime="sim", state_dir=Path("/x"),
                                   start_jitter=7.5)
    assert len(process.start(options)) == 2 and seen == [7.5, 7.5]


def test_a_jitter_out_of_range_is_refused(tmp_path):
    env = {"CCA_HOME": str(tmp_path), "NO_COLOR": "1"}
    for value in ("-1", "301"):
        command = ["agent", "--runtime", "sim", "--sim-nodes", "1", "--start-jitter", value]
        out = CliRunner().invoke(app, command, env=env)
        assert out.exit_code == 2 and "expected 0 to 300 seconds" in out.output, out.output
