"""Every example is canonical and tested (issue 19 part 6): each `examples/**/*.cca` passes `cca fmt
--check` and `cca lint --strict`, and applies on one simulated cluster (`cca up --simulate
examples/sim-cluster.cca`, shared by all of them); then the same file with one service removed is
applied, and `cca status` is polled while the pruned service is torn down: its instances are never
counted as running once they are no longer desired (they are `stopping` until gone), and
running ≤ placed ≤ desired holds in every answer."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ccattler.cli.main import app
from ccattler.dsl.compiler import compile_sources
from ccattler.dsl.loading import load_sources
from ccattler.engine.clientconfig import free_port_pair

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.rglob("*.cca"))
#: The order they are applied in: the tenants platform.cca declares are used by shop.cca.
ORDER = ["hello.cca", "sim-cluster.cca", "platform.cca", "shop.cca", "templated/api.cca"]
CCA = (sys.executable, "-m", "ccattler.cli.main")


def test_every_example_is_listed_here():
    assert sorted(map(str, FILES)) == sorted(ORDER) == sorted(PRUNE), "a new example: add it to ORDER, PRUNE"


@pytest.mark.parametrize("name", ORDER)
def test_example_is_canonical_and_lints_strict(name):
    path = str(EXAMPLES / name)
    fmt = CliRunner().invoke(app, ["fmt", "--check", path])
    assert fmt.exit_code == 0, fmt.output
    lint = CliRunner().invoke(app, ["lint", "--strict", path])
    assert lint.exit_code == 0, lint.output


class Sim:
    """`cca up --detach --simulate examples/sim-cluster.cca` in a home of its own."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = os.environ | {"CCA_HOME": str(home), "NO_COLOR": "1"}
        port = free_port_pair()
        self.cca("up", "--detach", "--simulate", str(EXAMPLES / "sim-cluster.cca"),
                 "--server", f"127.0.0.1:{port}", "--metrics", "off", timeout=120)
        from ccattler.engine.api.client import Client
        from ccattler.engine.clientconfig import load_config

        self.api = Client(load_config(home).context(None), timeout=30)

    def cca(self, *args: str, input: str | None = None, timeout: float = 150) -> str:
        done = subprocess.run([*CCA, *args], env=self.env, capture_output=True, text=True, input=input,
                              timeout=timeout)
        assert done.returncode == 0, f"cca {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def status(self) -> dict:
        return self.api.json("Status")

    def instances(self, service: str) -> list[dict]:
        return [i for i in self.api.get("instances", all_tenants=True)["items"]
                if i["value"].get("service") == service]

    def close(self) -> None:
        self.api.close()
        subprocess.run([*CCA, "down"], env=self.env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    c = Sim(tmp_path_factory.mktemp("examples") / "home")
    try:
        yield c
    finally:
        c.close()


def _facts(path: Path) -> dict:
    return compile_sources(load_sources([path]))


def _services(path: Path) -> list[str]:
    return sorted(f"{d['tenant']}/{d['name']}" for k, d in _facts(path).items()
                  if k.startswith("desired/service/"))


#: Per example, the service the test prunes and the lines naming it elsewhere in the file that go
#: with it (a group member), so the rest still lints strict.
PRUNE = {"hello.cca": ("default/hello", []), "sim-cluster.cca": ("default/cache", []),
         "platform.cca": ("payments/ledger-exporter", [r"^    service ledger-exporter\n"]),
         "shop.cca": ("payments/checkout", [r"^    allow frontend/web -> payments/checkout port 443\n",
                                            r"^    allow payments/checkout -> payments/database.*\n"]),
         "templated/api.cca": ("shop/api", [])}


def _without(text: str, service: str, lines: list[str]) -> str:
    """`text` without `service`'s block (written `service NAME {`, with or without its tenant, or
    a template's `service {{ … }}` when it is the only one) and without `lines`."""
    tenant, name = service.split("/")
    blocks = [b for b in re.finditer(r"^service (\S+(?: \S+ \S+)*?) \{\n.*?^\}\n", text, re.M | re.S)
              if b.group(1) in (name, service) or "{{" in b.group(1)]
    assert len(blocks) == 1, (service, [b.group(1) for b in blocks])
    rest = text[:blocks[0].start()] + text[blocks[0].end():]
    for line in lines:
        rest, n = re.subn(line, "", rest, flags=re.M)
        assert n, line
    return rest


def _check(status: dict, services: int) -> dict:
    inst = status["instances"]
    assert status["services"] == services, status
    assert inst["running"] <= inst["placed"] <= inst["desired"], status
    return inst


def _settled(sim: Sim, services: int, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        inst = _check(sim.status(), services)
        if inst["running"] == inst["placed"] == inst["desired"] and not inst["failed"] \
                and not inst.get("stopping"):
            return inst
        assert time.monotonic() < deadline, f"not settled: {inst}"
        time.sleep(0.3)


def test_each_example_applies_and_a_pruned_service_tears_down_consistently(sim, tmp_path):
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy)
    services = 0
    for name in ORDER:
        path = copy / name
        facts = _facts(path)
        sim.cca("apply", str(path))
        for key, doc in facts.items():  # a declared secret needs a value before its users start
            if key.startswith("desired/secret/"):
                sim.cca("secret", "set", f"{doc['tenant']}/{doc['name']}", input="example-value")
        services += len(_services(path))
        before = _settled(sim, services)
        assert before["desired"] > 0, name

        gone, lines = PRUNE[name]
        text = _without(path.read_text(), gone, lines)
        path.write_text(text)
        lint = CliRunner().invoke(app, ["lint", "--strict", str(path)])
        assert lint.exit_code == 0 and set(_services(path)) == set(_services(EXAMPLES / name)) - {gone}, \
            lint.output
        count = len(sim.instances(gone))
        assert count > 0, (name, gone)
        out = sim.cca("apply", str(path))
        assert "pruned" in out, out
        services -= 1
        deadline = time.monotonic() + 90
        while True:  # every answer while it is torn down is consistent
            inst = _check(sim.status(), services)
            # the service left `services` in the apply: its instances left `desired` with it
            assert inst["desired"] == before["desired"] - count, (name, gone, before, inst)
            if not sim.instances(gone) and not inst.get("stopping"):
                break
            assert time.monotonic() < deadline, f"{gone} not torn down: {inst}"
            time.sleep(0.1)  # two calls a round: well inside the server's 50 requests/s per caller
        after = _settled(sim, services)
        assert after["desired"] == before["desired"] - count, (name, gone, before, after)
