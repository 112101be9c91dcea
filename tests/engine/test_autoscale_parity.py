"""`cca autoscale replay` decides as the live controller does: the documented example timeline
(examples/autoscale/web-replay.json) run through replay and, step by step, through the live
`AutoscaleController` on snapshots holding the same observations as the agents and `cca metric
set` would write them (per-instance requests/s samples, an event, cgroup cpu), with its own
stored document carried from step to step. Recommended and desired counts agree at every step."""

import json
from pathlib import Path
from types import MappingProxyType

from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.sources import Source
from ccattler.engine.autoscale import replay
from ccattler.engine.controllers.autoscale import AutoscaleController
from ccattler.engine.facts.snapshot import Snapshot

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscale" / "web-replay.json"


def live_decisions(data: dict) -> list[tuple[int, int]]:
    plan = replay.load(data)
    base = dict(compile_sources([Source("web.cca", data["service"])]))
    controller, scale, out = AutoscaleController(), None, []
    for at, insts, events in plan["steps"]:
        now = (plan["start"] + at) / 1000
        facts = dict(base)
        for i in insts:
            facts[f"derived/instance/default/web/{i.name}"] = {"service": "default/web", "name": i.name}
            usage = {"cpu": i.samples["cpu"], "memory": 1} if "cpu" in i.samples else None
            facts[f"observed/instance/default/{i.name}"] = {"state": i.state, "ready": i.ready,
                                                            "usage": usage}
            for metric, value in i.samples.items():
                if metric not in ("cpu", "memory"):
                    facts[f"observed/metric/default/web/{metric}/{i.name}"] = {
                        "value": value, "time": now, "source": i.name}
        for source, value in events.items():
            facts[f"observed/metric/default/web/{source}/cli"] = {"value": value, "time": now,
                                                                  "source": "cli"}
        if scale is not None:
            facts["derived/scale/default/web"] = scale
        change = controller.reconcile(Snapshot(len(out) + 1, MappingProxyType(facts)), now)
        scale = change.puts.get("derived/scale/default/web", scale)
        out.append((scale["recommended"], scale["desired"]))
    return out


def test_replay_and_the_live_controller_decide_the_same_for_the_documented_example():
    data = json.loads(EXAMPLE.read_text())
    offline = [(r["recommended"], r["desired"]) for r in replay.run(data)]
    assert live_decisions(data) == offline == [(3, 3), (9, 9), (1, 9), (1, 9), (1, 2)]
