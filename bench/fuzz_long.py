"""The long run of the abuse and fuzz suite (issue 12 class 9): tests/fuzz with many examples.

CI runs tests/fuzz with fixed, derandomized example counts (under a minute); this drives the
same suite through pytest with `CCA_FUZZ_EXAMPLES` scaling every property's `max_examples`
(tests/fuzz/abuse.py: `examples(default)` × N / 100) and, unless `--derandomize`, fresh random
inputs (`CCA_FUZZ_RANDOM=1`; `--seed` makes a random run repeatable). It reports, per module
and in total, the cases run (hypothesis examples, passing + failing, from
`--hypothesis-show-statistics`; a plain or parametrized test counts once), the failed tests and
the time, and exits 1 when anything failed. Nothing here duplicates a case: the cases are the
suite's.

    .venv/bin/python bench/fuzz_long.py [--examples 2000] [--seed N] [--derandomize]
        [--json] [-k EXPR] [PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = "tests/fuzz"

_TEST = re.compile(r"^(tests/\S+::\S+):\s*$")
_CASES = re.compile(r"- (\d+) passing, (\d+) failing, and (\d+) invalid test cases")


def hypothesis_cases(output: str) -> dict[str, tuple[int, int, int]]:
    """test id → (passing, failing, invalid) examples summed over its phases, from pytest's
    `--hypothesis-show-statistics` section."""
    cases: dict[str, list[int]] = {}
    current = None
    for line in output.splitlines():
        if match := _TEST.match(line.strip()):
            current = match.group(1)
            cases.setdefault(current, [0, 0, 0])
        elif current and (match := _CASES.search(line)):
            for i, n in enumerate(match.groups()):
                cases[current][i] += int(n)
    return {k: (v[0], v[1], v[2]) for k, v in cases.items()}


def junit_results(path: Path) -> dict[str, str]:
    """test id → "passed" / "failed" / "error" / "skipped", from pytest's JUnit XML."""
    results: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        test_id = f"{module}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
        results[test_id] = outcome
    return results


def run(paths: list[str], examples: int, randomize: bool, seed: int | None, keyword: str | None,
        ) -> dict:
    env = dict(os.environ, CCA_FUZZ_EXAMPLES=str(examples))
    env.pop("CCA_FUZZ_RANDOM", None)
    if randomize:
        env["CCA_FUZZ_RANDOM"] = "1"
    with tempfile.TemporaryDirectory(prefix="cca-fuzz-long-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hypothesis-show-statistics",
               f"--junitxml={junit}", "-o", "junit_family=xunit1", *paths]
        if seed is not None:
            cmd.append(f"--hypothesis-seed={seed}")
        if keyword:
            cmd += ["-k", keyword]
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        results = junit_results(junit) if junit.exists() else {}
    cases = hypothesis_cases(proc.stdout)
    modules: dict[str, dict] = defaultdict(lambda: {"tests": 0, "cases": 0, "failed": []})
    for test_id, outcome in sorted(results.items()):
        module = modules[test_id.split("::", 1)[0]]
        if outcome == "skipped":
            continue
        module["tests"] += 1
        stats = cases.get(test_id) or cases.get(test_id.split("[", 1)[0])
        module["cases"] += sum(stats[:2]) if stats else 1
        if outcome != "passed":
            module["failed"].append(test_id)
    return {"examples": examples, "random": randomize, "seed": seed, "seconds": round(seconds, 1),
            "returncode": proc.returncode, "modules": dict(modules),
            "cases": sum(m["cases"] for m in modules.values()),
            "failed": [t for m in modules.values() for t in m["failed"]],
            "output": proc.stdout[-20_000:] + proc.stderr[-5_000:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[SUITE])
    parser.add_argument("--examples", type=int, default=2000,
                        help="CCA_FUZZ_EXAMPLES: 100 is CI's count, each property scales by N/100")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed of a random run")
    parser.add_argument("--derandomize", action="store_true", help="CI's fixed inputs, only more of them")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.examples < 1:
        parser.error("--examples must be at least 1")
    result = run(args.paths, args.examples, not args.derandomize, args.seed, args.keyword)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "output"}, indent=2))
    else:
        print(f"fuzz suite, CCA_FUZZ_EXAMPLES={result['examples']}, "
              f"{'random' if result['random'] else 'derandomized'}"
              + (f", seed {result['seed']}" if result["seed"] is not None else ""))
        print(f"{'module':<40} {'tests':>6} {'cases':>8} {'failed':>7}")
        for name, module in sorted(result["modules"].items()):
            print(f"{name:<40} {module['tests']:>6} {module['cases']:>8} {len(module['failed']):>7}")
        print(f"{'total':<40} {sum(m['tests'] for m in result['modules'].values()):>6} "
              f"{result['cases']:>8} {len(result['failed']):>7}   {result['seconds']} s")
        for test_id in result["failed"]:
            print(f"FAILED {test_id}")
    if result["failed"] or result["returncode"] not in (0, 5) or not result["modules"]:
        if not args.json:
            print(result["output"], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
