"""`cca benchmark`: the cluster benchmark (bench/cluster_bench.py in the source checkout) — an API
server + runner and simulated nodes over mutual TLS; convergence, scale-up, idle and node loss,
each figure beside its target. `cca benchmark failover runner|server …` runs the failover benchmark
(bench/ha_bench.py: a 3-member etcd, real servers, runners and agents; leader killed, API server
killed), each figure beside its target."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import typer

from ccattler.cli._common import reports_errors

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"
BENCH = BENCH_DIR / "cluster_bench.py"
FAILOVER = BENCH_DIR / "ha_bench.py"


def _load(path: Path) -> ModuleType:
    from ccattler.engine.facts import CcaError

    if not path.is_file():
        raise CcaError(f"the benchmarks ship with the source checkout; {path} is not there")
    spec = importlib.util.spec_from_file_location(f"cca_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@reports_errors
def benchmark(ctx: typer.Context) -> None:
    """Run the cluster benchmark. Options (passed through): --nodes N --instances N
    --store sqlite|etcd|etcd3 --runs N --ttl S --kill K --tick S --idle S --timeout S --no-scale-up --json
    --verbose --profile PREFIX --logs DIR (see bench/cluster_bench.py). `cca benchmark failover runner
    [--ttl S --rounds N --nodes N --servers N]` and `… failover server [--nodes N --rounds N --servers N]`:
    runner and API-server failover on a 3-member etcd (bench/ha_bench.py)."""
    from ccattler.engine.facts import CcaError

    args = list(ctx.args)
    if args[:1] == ["failover"]:
        module, args = _load(FAILOVER), args[1:]
    else:
        module = _load(BENCH)
        if args[:1] == ["cluster"]:
            args = args[1:]
    try:
        code = module.main(args)
    except (TimeoutError, RuntimeError) as exc:  # a phase that did not converge: say which
        raise CcaError(f"benchmark failed: {exc}") from None
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("benchmark", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
        benchmark)
