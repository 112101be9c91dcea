"""`cca autoscale replay`: the documented file format, its errors naming the field, the output."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.engine.autoscale import replay, vertical

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "autoscale" / "web-replay.json"
SERVICE = ('service web { image "nginx" instances 3 resources { cpu 500m memory 256Mi } '
           'scale { horizontal { min 2 max 30 target cpu = 60 } %s } }')


def test_example_decisions():
    rows = replay.run_file(str(EXAMPLE))
    assert [(r["at"], r["recommended"], r["desired"]) for r in rows] == [
        ("0s", 3, 3), ("30s", 9, 9), ("60s", 1, 9), ("120s", 1, 9), ("360s", 1, 2)]
    assert rows[1]["term"] == "target requests_per_second"
    assert "held at 9 until 09:05:30 by a recommendation at 09:00:30" in rows[2]["reasons"][1]
    assert set(rows[0]) == {"at", "recommended", "desired", "term", "reasons"}


def test_cli_json_and_table():
    r = CliRunner().invoke(app, ["autoscale", "replay", str(EXAMPLE), "-o", "json"])
    assert r.exit_code == 0, r.output
    assert [x["desired"] for x in json.loads(r.output)] == [3, 9, 9, 9, 2]
    r = CliRunner().invoke(app, ["autoscale", "replay", str(EXAMPLE)])
    assert r.exit_code == 0 and "RECOMMENDED" in r.output and "held at 9" in r.output


@pytest.mark.parametrize("patch,message", [
    ({"start": "yesterday"}, "start: expected an RFC3339 time"),
    ({"steps": []}, "steps: expected a non-empty list"),
    ({"steps": [{"at": "0s", "same": True}]}, 'steps[0]: "same" needs a previous step'),
    ({"steps": [{"at": "soon"}]}, "steps[0].at:"),
    ({"steps": [{"at": "0s", "instances": [{"name": "a", "state": "dead"}]}]}, "steps[0].instances[0].state"),
    ({"steps": [{"at": "0s", "instances": [{"name": "a", "cpu_usage_m": "x"}]}]},
     "steps[0].instances[0].cpu_usage_m"),
    ({"steps": [{"at": "0s", "instances": [{"name": "a", "cpu": 1}]}]}, "unknown field 'cpu'"),
    ({"service": "service web {"}, "service:"),
])
def test_errors_name_the_field(patch, message):
    data = {"service": SERVICE % "", "start": "2026-01-05T09:00:00Z", "steps": [{"at": "0s"}]}
    data.update(patch)
    with pytest.raises(replay.ReplayError) as exc:
        replay.run(data)
    assert message in str(exc.value)


def test_cli_reports_a_bad_file_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    r = CliRunner().invoke(app, ["autoscale", "replay", str(bad)])
    assert r.exit_code == 1 and "not JSON" in r.output and "Traceback" not in r.output


def test_missing_usage_is_no_sample_and_same_repeats():
    steps = [{"at": "0s", "instances": [{"name": "a", "cpu_usage_m": 600}, {"name": "b"},
                                        {"name": "c", "cpu_usage_m": 600}]},
             {"at": "15s", "same": True}]
    rows = replay.run({"service": SERVICE % "", "start": "2026-01-05T09:00:00Z", "steps": steps})
    # 120 % of request on two, one missing counted as 0 on the scale-up: 80 % / 60 % → ceil(1.33×3)
    assert [r["recommended"] for r in rows] == [4, 4]  # the count follows the instances measured


def test_vertical_waits_then_applies():
    vert = "vertical { cpu { min 100m max 2 } }"
    steps = [{"at": f"{s}s", "instances": [{"name": "a", "cpu_usage_m": 700}]} for s in (0, 30, 61)]
    rows = replay.run({"service": SERVICE % vert, "start": "2026-01-05T09:00:00Z", "steps": steps})
    assert [r["vertical"]["cpu_m"] for r in rows] == [500, 500, 1000]


def test_vertical_stabilization_sets_the_waits():
    """`vertical { stabilization { scale_up 10s  scale_down 20s } }`: up after 10 s, down after 20 s
    (the defaults 60 s / 5 min are in the test above)."""
    vert = "vertical { cpu { min 100m max 2 }  stabilization { scale_up 10s  scale_down 20s } }"
    steps = [{"at": f"{s}s", "instances": [{"name": "a", "cpu_usage_m": 700}]} for s in (0, 5, 10)]
    rows = replay.run({"service": SERVICE % vert, "start": "2026-01-05T09:00:00Z", "steps": steps})
    assert [r["vertical"]["cpu_m"] for r in rows] == [500, 500, 1000]
    bounds = {"cpu": {"min": 100, "max": 2000}, "stabilization": {"scale_up": 10_000, "scale_down": 20_000}}
    idle = [[0, 140, None]]
    out, state, _, _ = vertical.recommend(bounds, {"cpu": 1000}, idle, 0, {})
    out, state, _, _ = vertical.recommend(bounds, {"cpu": 1000}, idle, 19_999, state)
    assert out == {"cpu": 1000}
    out, state, _, _ = vertical.recommend(bounds, {"cpu": 1000}, idle, 20_000, state)
    assert out == {"cpu": 200} and state == {}


def test_vertical_ignores_small_changes_and_clamps():
    bounds = {"cpu": {"min": 100, "max": 800}}
    out, state, _, _ = vertical.recommend(bounds, {"cpu": 1000}, [[0, 720, None]], 0, {})
    assert out["cpu"] == 1000 and state == {"cpu": {"direction": "down", "since": 0}}
    out, _, _, detail = vertical.recommend(bounds, {"cpu": 1000}, [[0, 700, None]], 0, {})
    assert detail["cpu"]["recommendation"] == 800 and out == {"cpu": 1000}
    out, state, _, _ = vertical.recommend({"cpu": {"min": 1, "max": 9000}}, {"cpu": 1000},
                                          [[0, 730, None]], 0, {})
    assert out == {"cpu": 1000} and state == {}


def test_after_a_vertical_change_the_cpu_term_uses_the_applied_request():
    """As the live controller: once the vertical block raised the request to 1000m, 700m of usage is
    70 %, not 140 % of the user's 500m (the instances state no request of their own)."""
    both = ("vertical { cpu { min 100m max 2 }  stabilization { scale_up 0s } }")
    steps = [{"at": f"{s}s", "instances": [{"name": f"web-{n}", "cpu_usage_m": 700} for n in range(3)]}
             for s in (0, 15)]
    rows = replay.run({"service": SERVICE % both, "start": "2026-01-05T09:00:00Z", "steps": steps})
    assert rows[0]["vertical"]["cpu_m"] == 1000  # raised in the first step (no wait)
    assert rows[1]["recommended"] == 4, rows[1]  # ceil(3 × 70/60): the 1000m request; with 500m, 7
