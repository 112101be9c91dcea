"""One horizontal decision: max of terms, blocked scale-down, no metric, schedule floor, clamp, and
asymmetric stabilization driven by a fake clock (the time is an argument, as in the controller)."""

import datetime as dt

from ccattler.engine.autoscale import horizontal
from ccattler.engine.autoscale.calc import Instance

T0 = int(dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC).timestamp() * 1000)  # a Monday


def spec(**kw):
    h = {"min": 1, "max": 20, "targets": [{"metric": "cpu", "value": 50, "percent": True}],
         "events": [], "schedules": [], "stabilization": {"scale_up": 0, "scale_down": 300_000}}
    h.update(kw)
    return h


def insts(n, cpu=None, rps=None):
    out = []
    for i in range(n):
        s = {}
        if cpu is not None:
            s["cpu"] = cpu
        if rps is not None:
            s["requests_per_second"] = rps
        out.append(Instance(f"w{i}", requests={"cpu": 1000}, samples=s))
    return out


def test_max_of_terms_wins_and_names_the_term():
    h = spec(targets=[{"metric": "cpu", "value": 50, "percent": True},
                      {"metric": "requests_per_second", "value": 100, "percent": False}],
             events=[{"source": "q", "per_instance": 10}])
    d = horizontal.decide(h, 3, insts(3, cpu=500, rps=200), {"q": 75}, T0, [])
    assert (d.recommended, d.desired, d.term) == (8, 8, "event q")
    assert [t["recommendation"] for t in d.terms] == [3, 6, 8]


def test_no_metric_at_all_is_no_change():
    d = horizontal.decide(spec(), 5, insts(5), {}, T0, [])
    assert (d.recommended, d.desired, d.term) == (5, 5, "none")


def test_unreadable_metric_blocks_a_scale_down_but_not_a_scale_up():
    h = spec(targets=[{"metric": "cpu", "value": 50, "percent": True},
                      {"metric": "requests_per_second", "value": 100, "percent": False}])
    down = horizontal.decide(h, 6, insts(6, cpu=100), {}, T0, [])
    assert (down.recommended, down.term) == (6, "blocked")
    up = horizontal.decide(h, 2, insts(2, cpu=1000), {}, T0, [])
    assert up.recommended == 4


def test_clamp_to_min_and_max():
    assert horizontal.decide(spec(min=2), 3, insts(3, cpu=10), {}, T0, []).desired == 2
    d = horizontal.decide(spec(max=4), 3, insts(3, cpu=1000), {}, T0, [])
    assert (d.recommended, d.desired, d.clamp) == (6, 4, "lowered to max 4")


def test_schedule_floor_in_the_cluster_time_zone():
    h = spec(schedules=[{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00",
                         "minimum": 10}])
    d = horizontal.decide(h, 3, insts(3, cpu=500), {}, T0, [])       # 09:00 UTC, Monday
    assert (d.desired, d.term, d.floor) == (10, "schedule", 10)
    # 09:00 UTC is 04:00 in New York: outside the window
    d = horizontal.decide(h, 3, insts(3, cpu=500), {}, T0, [], tz="America/New_York")
    assert (d.desired, d.floor) == (3, None)
    saturday = T0 + 5 * 86_400_000
    assert horizontal.decide(h, 3, insts(3, cpu=500), {}, saturday, []).desired == 3


def test_stabilization_down_window_with_a_fake_clock():
    h, history, current = spec(), [], 2
    now = T0
    timeline = [(0, 1000, 4), (30, 100, 4), (120, 100, 4), (299, 100, 4), (301, 100, 1)]
    for at, cpu, expected in timeline:
        now = T0 + at * 1000
        d = horizontal.decide(h, current, insts(current, cpu=cpu), {}, now, history)
        history, current = d.history, d.desired
        assert current == expected, (at, d.reasons)
    assert all(last > now - 300_000 for _, last, _ in history)


def test_hold_explains_the_window():
    h = spec()
    d1 = horizontal.decide(h, 4, insts(4, cpu=1000), {}, T0, [])       # recommends 8
    d2 = horizontal.decide(h, 8, insts(8, cpu=100), {}, T0 + 60_000, d1.history)
    assert d2.desired == 8
    assert d2.hold == {"direction": "down", "at": T0, "until": T0 + 300_000, "count": 8}
    assert "held at 8 until 09:05:00 by a recommendation at 09:00:00" in " ".join(d2.reasons)


def test_scale_up_window_waits_for_the_lowest():
    h = spec(stabilization={"scale_up": 60_000, "scale_down": 0})
    d1 = horizontal.decide(h, 2, insts(2, cpu=500), {}, T0, [])        # recommends 2
    d2 = horizontal.decide(h, 2, insts(2, cpu=1000), {}, T0 + 30_000, d1.history)
    assert (d2.recommended, d2.desired, d2.hold["direction"]) == (4, 2, "up")
    d3 = horizontal.decide(h, 2, insts(2, cpu=1000), {}, T0 + 61_000, d2.history)
    assert d3.desired == 4


def test_a_repeated_recommendation_is_one_run():
    _, runs, _ = horizontal.stabilize(4, 4, T0, [], 0, 300_000)
    _, runs, _ = horizontal.stabilize(4, 4, T0 + 15_000, runs, 0, 300_000)
    _, runs, _ = horizontal.stabilize(3, 4, T0 + 30_000, runs, 0, 300_000)
    assert runs == [[T0, T0 + 15_000, 4], [T0 + 30_000, T0 + 30_000, 3]]
    # runs last seen before the longest window are dropped (the live controller first extends the
    # standing run to now: it was recommended at every tick in between)
    _, runs, _ = horizontal.stabilize(3, 4, T0 + 400_000, runs, 0, 300_000)
    assert runs == [[T0 + 400_000, T0 + 400_000, 3]]


def _stabilize_unpruned(recommendation, current, now_ms, history, up_ms, down_ms):
    """`stabilize` as it was before pruning: every run inside the longest window kept."""
    count, _, hold = horizontal.stabilize(recommendation, current, now_ms, history, up_ms, down_ms)
    keep = max(up_ms, down_ms)
    runs = [list(r) for r in history if r[1] > now_ms - keep]
    if runs and runs[-1][2] == recommendation:
        runs[-1][1] = now_ms
    else:
        runs.append([now_ms, now_ms, recommendation])
    return count, runs, hold


def test_pruning_the_history_decides_exactly_as_the_whole_history():
    """Issue 12 class 3: the stored history is pruned of runs no decision can use, and the
    decisions (count and hold) over random recommendation sequences are those of the whole one."""
    import random

    rng = random.Random(12)
    dropped = 0
    for _ in range(40):
        up_ms, down_ms = rng.choice([0, 30_000, 120_000]), rng.choice([60_000, 300_000, 900_000])
        whole: list = []
        pruned: list = []
        now, current = T0, 5
        for _ in range(200):
            now += rng.choice([1_000, 10_000, 15_000, 60_000])
            rec = rng.randint(1, 12)
            # the histories differ, so compare decisions on each, as the live controller makes them
            count_a, _, hold_a = horizontal.stabilize(rec, current, now, whole, up_ms, down_ms)
            count_b, pruned, hold_b = horizontal.stabilize(rec, current, now, pruned, up_ms, down_ms)
            _, whole, _ = _stabilize_unpruned(rec, current, now, whole, up_ms, down_ms)
            assert (count_a, hold_a) == (count_b, hold_b)
            assert len(pruned) <= len(whole)
            current = count_a
        dropped += len(whole) - len(pruned)
    assert dropped > 0  # the pruning did drop runs


def test_the_history_is_capped_whatever_the_window():
    """A recommendation changing at every tick inside a 30-day window keeps at most
    MAX_HISTORY_RUNS runs (the newest): the document does not grow with history."""
    runs: list = []
    day = 86_400_000
    for tick in range(3 * horizontal.MAX_HISTORY_RUNS):
        rec = 1 + tick % 2 * 9  # 1, 10, 1, 10, …: ties keep every run until the cap
        _, runs, _ = horizontal.stabilize(rec, 5, T0 + tick * 1_000, runs, 30 * day, 30 * day)
    assert len(runs) == horizontal.MAX_HISTORY_RUNS
    assert runs[-1][0] == T0 + (3 * horizontal.MAX_HISTORY_RUNS - 1) * 1_000
