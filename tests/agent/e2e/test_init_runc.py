"""Init steps on runc: each step is a container in the instance's own network namespace (its
address), with its volumes and config files, run in order before the main container."""

from __future__ import annotations

import dataclasses

import pytest

from ccattler.agent.init_steps import InitStep
from ccattler.agent.runtime.base import ConfigFile, VolumeMount

pytestmark = pytest.mark.e2e


def state(name: str, want: str):
    return lambda observed: observed[f"observed/instance/default/{name}"]["state"] == want


def test_steps_run_in_order_in_the_instances_netns_volume_and_files(node) -> None:
    steps = (InitStep("ip -o -4 addr show eth0 | grep -o 'inet [0-9.]*' > /data/addr"),
             InitStep("cat /etc/app.conf >> /data/addr; echo second >> /data/addr"))
    spec = dataclasses.replace(node.spec("web-a", 2, command="cat /data/addr; exec sleep 30"), init=steps,
                               volumes=(VolumeMount("default/initdata-a", "/data"),),
                               files=(ConfigFile("/etc/app.conf", "from config\n"),))
    node.converge({spec.key: spec}, state("web-a", "running"), timeout=20)
    node.converge({spec.key: spec}, lambda o: node.runtime.logs(spec.key))
    assert node.runtime.logs(spec.key).decode() == f"inet {node.ip(2)}\nfrom config\nsecond\n"
    assert [s.name for s in node.runtime.list()] == [spec.key]
    assert "--- init step 2/2" in node.runtime.init_log_path(spec.key).read_text()


def test_a_failing_step_is_retried_then_fails_the_instance_with_its_reason(node) -> None:
    spec = dataclasses.replace(node.spec("web-b", 3), init=(InitStep("echo no database; exit 7", retry=1),))
    observed = node.converge({spec.key: spec}, state("web-b", "failed"), timeout=20)
    doc = observed["observed/instance/default/web-b"]
    assert doc["init"]["failed"] == {"step": 1, "exec": "echo no database; exit 7", "exit_code": 7,
                                     "attempts": 2, "output": "no database\n"}
    assert "exit code 7 after 2 attempt(s): no database" in doc["reason"]
    assert node.runtime.list() == []
    assert node.runtime.init_log_path(spec.key).read_text().count("no database\n--- exit code 7") == 2
