"""`--metric-interval` (cca agent, cca up): passed to every node agent `cca up` starts, and an
interval the autoscaler cannot use (its samples would go stale between reads) refused up front."""

from __future__ import annotations

from typer.testing import CliRunner

from ccattler.cli import localcluster as lc
from ccattler.cli.main import app


def test_cca_up_passes_the_interval_to_each_node_agent():
    layout = lc.Layout("default", "runc", "/s", "cca0", None, ("node-1",), {"tag": "ab12"}, "nftables", 1.0)
    args = lc.node_agent_args(layout, "node-1")
    assert args[args.index("--metric-interval") + 1] == "1.0"
    assert lc.Layout("default", "runc", "/s", "cca0", None, ("n",)).metric_interval == 10.0  # old up.json


def test_an_unusable_interval_is_refused(tmp_path):
    env = {"CCA_HOME": str(tmp_path), "NO_COLOR": "1"}
    for command in (["agent", "--runtime", "sim", "--sim-nodes", "1"], ["up", "--sim-nodes", "1"]):
        out = CliRunner().invoke(app, [*command, "--metric-interval", "16"], env=env)
        assert out.exit_code == 2 and "at most 15" in out.output, out.output
    assert not (tmp_path / "run" / "up.json").exists()  # nothing was started
