"""`cca benchmark`: the cluster benchmark (bench/cluster_bench.py in the source checkout) — an API
server + runner and simulated nodes over mutual TLS; convergence, scale-up, idle and node loss,
each figure beside its target."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import typer

from ccattler.cli._common import reports_errors

BENCH = Path(__file__).resolve().parents[1] / "bench" / "cluster_bench.py"


@reports_errors
def benchmark(ctx: typer.Context) -> None:
    """Run the cluster benchmark. Options (passed through): --nodes N --instances N
    --store sqlite|etcd --runs N --ttl S --kill K --tick S --idle S --timeout S --no-scale-up --json --verbose
    --profile PREFIX --logs DIR (see bench/cluster_bench.py)."""
    from ccattler.engine.facts import CcaError

    if not BENCH.is_file():
        raise CcaError(f"the cluster benchmark ships with the source checkout; {BENCH} is not there")
    spec = importlib.util.spec_from_file_location("cca_cluster_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        code = module.main(list(ctx.args))
    except (TimeoutError, RuntimeError) as exc:  # a phase that did not converge: say which
        raise CcaError(f"benchmark failed: {exc}") from None
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("benchmark", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
        benchmark)
