"""What the cluster benchmark measures, seen from inside the server process (a store watch, so the
observer adds no gRPC streaming lag): registered nodes, wanted/placed/running instances with the
time each change arrived, and the waits that turn them into figures. Times are CLOCK_MONOTONIC,
comparable with the driver process's `time.monotonic()`.
"""

from __future__ import annotations

import math
import threading
import time


class ClusterView:
    """The cluster as a store watch in the server process sees it, with the time each change arrived."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.nodes: dict[str, float] = {}  # registered node → when
        self.node_gone: dict[str, float] = {}  # node whose observed/node vanished → when
        self.wanted: set[str] = set()  # tenant/instance that should exist
        self.placed: dict[str, str | None] = {}
        self.observed: dict[str, tuple[str, str]] = {}  # instance → (node, state)
        self.running_since: dict[str, float] = {}  # instance → when it first ran where placed
        self.placed_at: dict[str, float] = {}  # instance → when it was last placed
        self.revision = 0
        self.error: Exception | None = None
        self.unplaced_reason = ""
        self.timeline: dict[str, list] | None = None  # prefix → [first, last, events] (--verbose)
        self.marked: set[str] = set()
        self.affected: set[str] = set()

    def follow(self, store, revision: int) -> None:
        """Fold the store's changes after `revision` in (a daemon thread's loop)."""
        try:
            with store.watch("", revision) as watch:
                while True:
                    event = watch.get(timeout=1.0)
                    if event is not None:
                        self._fold(event.key, event.value, event.revision, time.monotonic())
        except Exception as exc:  # surfaced by the waits
            self.error = exc
            with self.cond:
                self.cond.notify_all()

    def _fold(self, key: str, value, revision: int, now: float) -> None:
        parts = key.split("/")
        with self.cond:
            if self.timeline is not None and len(parts) > 2:
                first_last = self.timeline.setdefault("/".join(parts[:2]), [now, now, 0])
                first_last[1] = now
                first_last[2] += 1
            self.revision = max(self.revision, revision)
            if parts[:2] == ["observed", "node"]:
                if value is None:
                    self.nodes.pop(parts[2], None)
                    self.node_gone[parts[2]] = now
                else:
                    self.nodes.setdefault(parts[2], now)
            elif parts[:2] == ["derived", "instance"]:
                name = f"{parts[2]}/{parts[4]}"
                (self.wanted.add if value is not None else self.wanted.discard)(name)
            elif parts[:2] == ["derived", "placement"]:
                name = f"{parts[2]}/{parts[3]}"
                self.placed[name] = value["node"] if value else None
                if self.placed[name]:
                    self.placed_at[name] = now
                if value and value["node"] is None:
                    self.unplaced_reason = f"{name}: {value.get('reasons')}"
                self._check(name, now)
            elif parts[:2] == ["observed", "instance"]:
                name = f"{parts[2]}/{parts[3]}"
                if value is None:
                    self.observed.pop(name, None)
                else:
                    self.observed[name] = (value["node"], value["state"])
                self._check(name, now)
            self.cond.notify_all()

    def _check(self, name: str, now: float) -> None:
        node = self.placed.get(name)
        if node is not None and self.observed.get(name) == (node, "running"):
            self.running_since.setdefault(name, now)
        else:
            self.running_since.pop(name, None)

    def summary(self) -> str:
        states: dict[str, int] = {}
        for _, state in self.observed.values():
            states[state] = states.get(state, 0) + 1
        placed = sum(1 for n in self.wanted if self.placed.get(n))
        return (f"{len(self.nodes)} nodes, {len(self.wanted)} instances wanted, {placed} placed, "
                f"{sum(1 for n in self.wanted if n in self.running_since)} running where placed; "
                f"observed states {states}; last unplaced {self.unplaced_reason[:300]}")

    def all_running(self, expected: int) -> bool:
        return len(self.wanted) == expected and all(n in self.running_since for n in self.wanted)

    def wait(self, predicate, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                if self.error is not None:
                    raise RuntimeError(f"watch failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: not within {timeout:.0f} s ({self.summary()})")
                self.cond.wait(min(left, 0.5))
        return time.monotonic()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]



def converge(view: ClusterView, before: set[str], t0: float, expected: int, timeout: float,
             verbose: bool) -> dict:
    """Seconds from `t0` (the driver's apply) until every wanted instance runs where placed, and
    per instance asked for since `before` (p50/p99), and when the last of them was placed."""
    done = view.wait(lambda: view.all_running(expected), timeout, f"{expected} instances running")
    with view.cond:
        new = [n for n in view.wanted if n not in before]
        per = [view.running_since[n] - t0 for n in new] or [0.0]
        placed = max((view.placed_at[n] for n in new), default=t0) - t0
        timeline = {k: [a - t0, b - t0, n] for k, (a, b, n) in sorted((view.timeline or {}).items())}
        view.timeline = None
    out = {"total": done - t0, "all_placed": placed, "p50": _percentile(per, 0.5),
           "p99": _percentile(per, 0.99)}
    if verbose:
        out["timeline"] = timeline
    return out


def failure(view: ClusterView, victims: set[str], affected: set[str], t_kill: float, ttl: float,
            timeout: float) -> dict:
    """Detection: kill → the victims' leases expired (observed/node gone). Re-placement: detection →
    every instance that was on them runs on another node."""
    view.wait(lambda: victims <= set(view.node_gone) and not victims & set(view.nodes),
              ttl * 3 + timeout, "lost nodes' leases expire")
    with view.cond:
        detected = max(view.node_gone[v] for v in victims)

    def moved() -> bool:
        return all(view.placed.get(n) not in (None, *victims) and n in view.running_since for n in affected)

    recovered = view.wait(moved, timeout, f"{len(affected)} instances running elsewhere")
    return {"killed_nodes": len(victims), "affected": len(affected), "detection": detected - t_kill,
            "replacement": recovered - detected}


def command(view: ClusterView, request: dict) -> dict:
    """One driver request (a JSON line on the server process's stdin) → its JSON answer."""
    op = request["op"]
    if op == "nodes":
        view.wait(lambda: len(view.nodes) == request["count"], request["timeout"],
                  f"{request['count']} nodes registered")
        return {}
    if op == "mark":  # before an apply: what already runs, and start the timeline
        with view.cond:
            view.marked = set(view.running_since)
            view.timeline = {} if request.get("verbose") else None
        return {}
    if op == "converge":
        return converge(view, view.marked, request["t0"], request["expected"], request["timeout"],
                        request.get("verbose", False))
    if op == "affected":
        with view.cond:
            view.affected = {n for n, node in view.placed.items()
                             if node in request["victims"] and n in view.wanted}
        return {"affected": len(view.affected)}
    if op == "failure":
        return failure(view, set(request["victims"]), view.affected, request["t_kill"], request["ttl"],
                       request["timeout"])
    raise ValueError(f"unknown op {op!r}")
