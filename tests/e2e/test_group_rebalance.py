"""Rebalancing a service group on a running cluster, as a user sees it (issue 17 part 3, groups):
`cca up --sim-nodes 2` with sim-2 disabled, a `share network` group of two services with three
instances each lands wholly on sim-1; `cca enable-node sim-2` and the rebalancer moves one seat —
both members together, never split across nodes in any observation — and `cca explain` names
the group move (members, from, to, gain) and why the group moves no further. Then, on the same
cluster, `cca drain sim-2` with b at its floor: the seat there surges whole onto sim-1 and the
old one goes only once the new one is ready — never split in any observation — and sim-2 ends
drained."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.sampling import Sampler

pytestmark = pytest.mark.e2e

GROUP = """service a {
    image "busybox"
    instances 3
    resources { cpu 500m  memory 64Mi }
}
service b {
    image "busybox"
    instances 3
    resources { cpu 500m  memory 64Mi }
}
group g {
    service a
    service b
    share network
}
"""


def seats(shell) -> dict[str, tuple[int, int]]:  # noqa: ANN001
    """node → (a's instances placed there, b's)."""
    rows = shell.instances()
    a = Counter(r.get("node") for r in rows if r.get("service") == "default/a")
    b = Counter(r.get("node") for r in rows if r.get("service") == "default/b")
    return {n: (a[n], b[n]) for n in sorted(set(a) | set(b), key=str) if n is not None}


class SplitWatch(Sampler):
    """Polls the placements on a thread and keeps every observation where a node held a's and b's
    instances in different numbers (half a seat)."""

    every = 0.1

    def __init__(self, shell) -> None:  # noqa: ANN001
        super().__init__()
        self.shell, self.splits, self.seen, self.most = shell, [], 0, 0

    def sample(self) -> None:
        now = seats(self.shell)
        self.seen += 1
        self.most = max(self.most, sum(x for x, _ in now.values()))  # a's placed instances
        if any(x != y for x, y in now.values()):
            self.splits.append(now)


def test_a_group_seat_moves_whole_to_an_enabled_node(shell, tmp_path: Path, port: int, wait):
    state = tmp_path / "state"
    shell.cca("init", "--server", f"127.0.0.1:{port}")
    shell.cca("up", "--detach", "--sim-nodes", "2", "--server", f"127.0.0.1:{port}", "--state-dir",
              str(state), "--metrics", "off", "--rebalance-interval", "2")
    try:
        shell.cca("disable-node", "sim-2")
        (tmp_path / "g.cca").write_text(GROUP)
        shell.cca("apply", str(tmp_path / "g.cca"), "--wait")
        wait(lambda: len([r for r in shell.instances() if r.get("state") == "running"]) == 6, "6 running", 60)
        assert seats(shell) == {"sim-1": (3, 3)}

        with SplitWatch(shell) as watched:
            shell.cca("enable-node", "sim-2")
            wait(lambda: seats(shell).get("sim-2") == (1, 1), "one seat of g on sim-2", 60)
            wait(lambda: sum(r.get("state") == "running" for r in shell.instances()) == 6, "6 running", 30)
        assert watched.seen and not watched.splits, watched.splits
        assert seats(shell) == {"sim-1": (2, 2), "sim-2": (1, 1)}

        explained = shell.cca("explain", "b").stdout
        assert "rebalancing: moved at" in explained, explained
        line = next(x for x in explained.splitlines() if "group default/g (" in x)
        assert "default/a-" in line and "default/b-" in line and "sim-1 → sim-2" in line, line
        assert "sim-1 75 % cpu → 50 %" in line, line

        # A drain of the node holding a seat (b at its floor: the seat surges first, as one unit).
        floor = GROUP.replace("instances 3\n    resources { cpu 500m  memory 64Mi }\n}\ngroup",
                              "instances 3\n    resources { cpu 500m  memory 64Mi }\n"
                              "    disruption { min_available 3 }\n}\ngroup")
        assert floor != GROUP
        (tmp_path / "g.cca").write_text(floor)
        shell.cca("apply", str(tmp_path / "g.cca"), "--wait")
        with SplitWatch(shell) as watched:
            shell.cca("drain", "sim-2", "--wait", timeout=90)
            wait(lambda: seats(shell) == {"sim-1": (3, 3)}
                 and sum(r.get("state") == "running" for r in shell.instances()) == 6,
                 "the seat back on sim-1, 6 running", 30)
        assert watched.seen and not watched.splits, watched.splits
        assert watched.most == 4, watched.most  # the seat surged (max_extra 1) before the old went
        nodes = {r["name"]: r for r in shell.get("nodes")}
        assert "drained" in str(nodes["sim-2"]).lower(), nodes["sim-2"]
    finally:
        shell.cca("down", check=False, timeout=120)
