"""Admission benchmark: apply a 100-service file (compile → judge → one guarded commit) on SQLite.

Each round edits every service's instance count and applies the file again, so every apply
updates 100 services. Scenarios: the admin (cluster.admin); a user whose every request goes
through a role and an ABAC `when` policy, with two operator .lp policies on top. The baseline in
the same run is the bare store transaction of the same 100 documents (a ratio survives a shared
machine). A third measure is the ordinary request's own check: one `authorize` (the capability
check of a get or exec) by the same user with and without the two operator policies, which since
policy workers costs a round trip to a worker process per policy. Run:

    .venv/bin/python bench/admission_bench.py [--services 100] [--rounds 40]

Prints p50/p99 per scenario and stage (compile, admit+commit), then per authorize scenario.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ccattler.dsl import Source, compile_sources
from ccattler.engine.admission import Principal, apply_policy, apply_sources, authorize
from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.store import open_store

ADMIN = Principal("admin", "admin")
DEV = Principal("dev", "user", team="shop")

AUTH = """
role developer { allow service.read  allow service.create  allow service.update  allow service.delete }
policy team-only { allow service.update  when subject.team == resource.team }
grant developer to user dev
"""
POLICIES = {
    "no-latest": 'deny(latest_tag, (S,)) :- image_tag(S, "latest").\n'
                 'message(latest_tag, "{0} uses latest").\n',
    "max-instances": "deny(too_many, (S, N)) :- service_instances(S, N), N > 50.\n",
}


def shop_file(services: int, instances: int) -> Source:
    blocks = [
        f"service shop/svc{i} {{\n    image registry.local:5000/shop/svc{i}:1.{i}\n"
        f"    instances {instances}\n    expose 8080\n    resources {{ cpu 100m  memory 64Mi }}\n"
        f"    tags {{ team = shop  tier = web }}\n}}\n"
        for i in range(services)
    ]
    return Source("shop.cca", "\n".join(blocks), None)


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def run(principal: Principal, services: int, rounds: int, policies: bool) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite://{Path(tmp) / 'state.db'}") as store:
        apply_sources(store, ADMIN, [Source("auth.cca", AUTH, None)])
        if policies:
            for name, text in POLICIES.items():
                apply_policy(store, ADMIN, name, text)
        apply_sources(store, ADMIN, [shop_file(services, 1)])
        times: dict[str, list[float]] = {"compile": [], "admit+commit": [], "total": []}
        for r in range(rounds):
            start = time.perf_counter()
            compiled = compile_sources([shop_file(services, 2 + r % 2)])
            compiled_at = time.perf_counter()
            result = apply_compiled(store, principal, compiled, {"shop.cca"})
            end = time.perf_counter()
            assert len(result.changed) == services, result
            times["compile"].append(compiled_at - start)
            times["admit+commit"].append(end - compiled_at)
            times["total"].append(end - start)
        return times


def authorize_times(rounds: int, policies: bool) -> list[float]:
    """One capability check by the user on one existing service (what every get/exec/logs pays)."""
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite://{Path(tmp) / 'state.db'}") as store:
        apply_sources(store, ADMIN, [Source("auth.cca", AUTH, None)])
        if policies:
            for name, text in POLICIES.items():
                apply_policy(store, ADMIN, name, text)
        apply_sources(store, ADMIN, [shop_file(10, 1)])
        authorize(store, DEV, "service.read", "shop/svc1")  # warm: the policies' reads are cached
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            decision = authorize(store, DEV, "service.read", "shop/svc1")
            samples.append(time.perf_counter() - start)
            assert decision.allowed, decision
        return samples


def bare_txn(services: int, rounds: int) -> list[float]:
    """The floor: the same 100 documents in one store transaction, no admission."""
    compiled = [compile_sources([shop_file(services, n)]) for n in (2, 3)]
    with tempfile.TemporaryDirectory() as tmp, open_store(f"sqlite://{Path(tmp) / 'state.db'}") as store:
        samples = []
        for r in range(rounds):
            start = time.perf_counter()
            store.txn((), compiled[r % 2], ())
            samples.append(time.perf_counter() - start)
        return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    floor = quantiles(bare_txn(args.services, args.rounds))
    print(f"{args.services} services, {args.rounds} applies each (ms, p50 / p99)")
    print(f"  bare store txn                          {floor[0] * 1e3:7.1f} / {floor[1] * 1e3:7.1f}")
    scenarios = [
        ("admin, no operator policies", ADMIN, False),
        ("user via role + ABAC, 2 operator .lp", DEV, True),
    ]
    for label, principal, policies in scenarios:
        times = run(principal, args.services, args.rounds, policies)
        for stage, samples in times.items():
            p50, p99 = quantiles(samples)
            print(f"  {label:38s}  {stage:13s} {p50 * 1e3:7.1f} / {p99 * 1e3:7.1f}")
    checks = (("authorize, user, no operator .lp", False), ("authorize, user, 2 operator .lp", True))
    for label, policies in checks:
        p50, p99 = quantiles(authorize_times(args.rounds * 5, policies))
        print(f"  {label:38s}  {'check':13s} {p50 * 1e3:7.1f} / {p99 * 1e3:7.1f}")


if __name__ == "__main__":
    main()
