"""`cca up`, `cca down` and `cca agent` answer mistakes with a clear message and touch nothing (no
root needed: nothing here starts)."""

from __future__ import annotations

from typer.testing import CliRunner

from ccattler.cli.main import app


def run(home, *args: str):  # noqa: ANN001, ANN201
    """`cca ARGS` in `home`; agent commands get a state dir there."""
    if args[0] == "agent":
        args = (*args, "--state-dir", str(home / "state"))
    return CliRunner().invoke(app, list(args), env={"CCA_HOME": str(home)})


def test_down_when_nothing_runs(tmp_path) -> None:
    result = run(tmp_path, "down")
    assert result.exit_code == 0 and result.output.strip() == "not running"


def test_agent_without_a_node_certificate(tmp_path) -> None:
    result = run(tmp_path, "agent", "--runtime", "sim", "--node-id", "n1")
    assert result.exit_code == 1
    assert "no node certificate" in result.output
    assert "cca join" in result.output and "--token" in result.output


def test_agent_bad_options(tmp_path) -> None:
    result = run(tmp_path, "agent", "--runtime", "docker")
    assert result.exit_code == 2 and "'docker' is not one of runc, process, sim" in result.output
    result = run(tmp_path, "agent", "--runtime", "process", "--sim-nodes", "3")
    assert result.exit_code == 2 and "--simulate/--sim-nodes need --runtime sim" in result.output
    result = run(tmp_path, "agent", "--runtime", "sim", "--label", "nokey")
    assert result.exit_code == 2 and "must be KEY=VALUE" in result.output


def test_up_bad_options_start_nothing(tmp_path) -> None:
    result = run(tmp_path, "up", "--runtime", "sim")
    assert result.exit_code == 2 and "expected runc or process (or --simulate)" in result.output
    result = run(tmp_path, "up", "--simulate", str(tmp_path / "nodes.cca"), "--sim-nodes", "2")
    assert result.exit_code == 2 and "not both" in result.output
    (tmp_path / "nodes.cca").write_text("service web { image busybox }\n")
    result = run(tmp_path, "up", "--simulate", str(tmp_path / "nodes.cca"))
    assert result.exit_code == 1 and "no `node` blocks to simulate" in result.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "config.yaml").exists()


def test_agent_bad_cluster_cidr(tmp_path) -> None:
    result = run(tmp_path, "agent", "--runtime", "process", "--cluster-cidr", "10.88.0.0/33")
    assert result.exit_code == 2 and "--cluster-cidr" in result.output and "10.88.0.0/33" in result.output
