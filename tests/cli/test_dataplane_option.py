"""`cca agent --dataplane auto`: the node document shows the plane `resolve_kind` picks, and the
node's core is still asked for `auto` (so it can fall back to nftables when attaching fails)."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from ccattler.agent import process
from ccattler.bpf import loader
from ccattler.cli.main import app


@pytest.mark.parametrize(("supported", "shown"), [(None, "ebpf"), ("bpftool is not installed", "nftables")])
def test_agent_auto_registers_the_guess_and_keeps_auto_for_the_core(tmp_path, monkeypatch, supported, shown):
    started = []
    monkeypatch.setattr(loader, "supported", lambda: supported)
    agent = SimpleNamespace(settings=SimpleNamespace(name="n1", context=SimpleNamespace(server="s:1")))
    monkeypatch.setattr(process, "start", lambda options: started.append(options) or [agent])
    monkeypatch.setattr(process, "run", lambda agents, stop: None)
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # not pytest's own handlers
    env = {"CCA_HOME": str(tmp_path), "NO_COLOR": "1"}
    out = CliRunner().invoke(app, ["agent", "--runtime", "runc", "--dataplane", "auto", "--state-dir",
                                   str(tmp_path / "state"), "--runc-root", str(tmp_path / "runc")], env=env)
    assert out.exit_code == 0, out.output
    [options] = started
    assert options.documents[""]["dataplane"] == shown
    assert options.dataplane == "auto"
    assert process.core_dataplane(options.documents[""], options.dataplane) == "auto"
