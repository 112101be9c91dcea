"""`cca apply --wait`: show the applied services' instances converging until every one is ready and
its rolling update has completed (a rollback fails the wait with its reason; a
progress bar per service on a terminal, `waiting: …` lines otherwise), or fail at the timeout
naming each instance still short and why (its observed state and reason, or its placement reasons)."""

from __future__ import annotations

import sys
import time
from typing import Any

from ccattler.engine.facts import CcaError, display_name

POLL_SECONDS = 0.5


def applied_services(result: dict[str, Any]) -> list[str]:
    """`tenant/name` of every service the apply created or changed."""
    refs = result.get("added", []) + result.get("changed", [])
    return sorted(f"{r['tenant']}/{r['name']}" for r in refs if r.get("kind") == "service")


def _rolling(rows: dict[str, dict[str, Any]], services: list[str]) -> list[str]:
    """Services whose rolling update is still under way (or not started on the new spec yet);
    raises for one that rolled back or failed, with its reason (engine/rollout)."""
    out = []
    for full in services:
        rollout = (rows.get(full) or {}).get("rollout")
        if not isinstance(rollout, dict):
            continue  # no rollout controller: the counts alone decide
        if not rollout.get("current") or rollout.get("state") in ("progressing", "waiting"):
            out.append(full)
        elif rollout.get("state") in ("rolled back", "failed"):
            name = display_name(*full.split("/", 1))
            raise CcaError(f"{name}: rollout {rollout.get('revision')} {rollout['state']}: "
                           f"{rollout.get('reason')} (cca rollout history {name})")
    return out


def _counts(rows: dict[str, dict[str, Any]], services: list[str]) -> dict[str, tuple[int, int]]:
    """service → (ready, desired); a service not listed yet counts as 0/0 and short."""
    return {full: (row["ready"], row["desired"] or 0) if (row := rows.get(full)) else (0, -1)
            for full in services}


def _line(counts: dict[str, tuple[int, int]]) -> str:
    return "  ".join(f"{display_name(*s.split('/', 1))} {r}/{max(d, 0)}" for s, (r, d) in counts.items())


def why_not_ready(instance: dict[str, Any]) -> str:
    """`hello-x7k2p: not placed (3 nodes: insufficient memory …)` or `…: failed on n1: exit 1`."""
    name = instance["name"]
    if instance.get("node") is None:
        from ccattler.engine.placement.reasons import render

        reasons = "; ".join(render(r) for r in instance.get("unplaced") or ()) or "waiting for placement"
        return f"{name}: not placed ({reasons})"
    state = instance.get("state") or "pending"
    if state == "running" and not instance.get("ready"):
        state = "running, not ready"
    reason = instance.get("reason")
    return f"{name}: {state} on {instance['node']}" + (f": {reason}" if reason else "")


def _short_instances(api: Any, services: list[str]) -> list[str]:
    rows = api.get("instances", all_tenants=True)["items"]
    return [why_not_ready(r) for r in rows if r["service"] in services and not r.get("ready")]


def wait_ready(api: Any, services: list[str], timeout: float) -> None:
    """Poll until every service in `services` has all its instances ready; show progress."""
    if not services:
        return
    deadline = time.monotonic() + timeout
    progress = _Bars(services) if sys.stderr.isatty() else _Lines()
    try:
        while True:
            rows = {f"{r['tenant']}/{r['name']}": r for r in api.get("services", all_tenants=True)["items"]}
            counts = _counts(rows, services)
            progress.show(counts)
            short = [s for s, (ready, desired) in counts.items() if desired < 0 or ready < desired]
            short += [s for s in _rolling(rows, services) if s not in short]
            if not short:
                break
            if time.monotonic() > deadline:
                details = _short_instances(api, short)
                names = ", ".join(display_name(*s.split("/", 1)) for s in short)
                raise CcaError(f"timed out after {timeout:g}s waiting for {names} to be ready "
                               f"({_line(counts)})" + "".join(f"\n  {d}" for d in details))
            time.sleep(POLL_SECONDS)
    finally:
        progress.close()
    print("all instances ready", file=sys.stderr)


class _Lines:
    """A `waiting: web 1/2` line whenever the counts change (logs, pipes, CI)."""

    def __init__(self) -> None:
        self.last = ""

    def show(self, counts: dict[str, tuple[int, int]]) -> None:
        line = _line(counts)
        if line != self.last:
            print(f"waiting: {line}", file=sys.stderr)
            self.last = line

    def close(self) -> None:
        pass


class _Bars:
    """One rich progress bar per service (ready of desired) on a terminal."""

    def __init__(self, services: list[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("ready"), TimeElapsedColumn(), console=Console(stderr=True))
        self.tasks = {s: self.progress.add_task(display_name(*s.split("/", 1)), total=None)
                      for s in services}
        self.progress.start()

    def show(self, counts: dict[str, tuple[int, int]]) -> None:
        for service, (ready, desired) in counts.items():
            total = desired if desired >= 0 else None
            self.progress.update(self.tasks[service], completed=ready, total=total)

    def close(self) -> None:
        self.progress.stop()
