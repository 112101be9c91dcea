"""`cca rollout history` names each revision's cause: `apply` for the user's spec, `autoscaler`
(with the vertical change) for a revision the autoscaler's requests made."""

from __future__ import annotations

from typer.testing import CliRunner

from ccattler.cli import rollout
from ccattler.cli.main import app

HISTORY = {"history": [
    {"revision": 1, "spec": "aaaa", "image": "app:1", "state": "complete", "started": 0,
     "cause": "apply", "why": None},
    {"revision": 2, "spec": "bbbb", "image": "app:1", "state": "complete", "started": 60,
     "cause": "autoscaler", "why": "vertical cpu 100 -> 286 (P95 200 at 70 %)"},
    {"revision": 3, "spec": "cccc", "image": "app:2", "state": "rolled back", "started": 90,
     "reason": "3 failures of new instances"}]}


def test_history_shows_the_cause(monkeypatch):
    monkeypatch.setattr(rollout, "_ask", lambda *a, **k: HISTORY)
    out = CliRunner().invoke(app, ["rollout", "history", "web"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "CAUSE" in lines[0]
    assert "autoscaler" in lines[2] and "vertical cpu 100 -> 286" in lines[2], out.output
    assert "apply" in lines[1] and "apply" in lines[3] and "3 failures" in lines[3], out.output
