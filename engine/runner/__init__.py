"""The runner: runs controllers against a store, live (`Runner`: watch-triggered, leader-elected) or
offline to a fixed point (`settle`, used by `cca plan`)."""

from ccattler.engine.facts.keys import LEADER_RUNNER
from ccattler.engine.runner.changes import GroupTooLarge, plan_batches, prune
from ccattler.engine.runner.leader import LeaderElection
from ccattler.engine.runner.loop import Runner
from ccattler.engine.runner.metrics import RunnerCollector
from ccattler.engine.runner.settle import NoFixedPoint, SettleResult, settle
from ccattler.engine.runner.snapshot import FactCache, read_snapshot
from ccattler.engine.runner.stats import ControllerStats

__all__ = [
    "LEADER_RUNNER",
    "ControllerStats",
    "FactCache",
    "GroupTooLarge",
    "LeaderElection",
    "NoFixedPoint",
    "Runner",
    "RunnerCollector",
    "SettleResult",
    "plan_batches",
    "prune",
    "read_snapshot",
    "settle",
]
