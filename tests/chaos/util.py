"""Helpers shared by the chaos tests."""

from __future__ import annotations

import time

from ccattler.dsl import Source


def wait_for(predicate, what: str, timeout: float, step: float = 0.05):
    """Poll `predicate` until it returns something truthy; that value, or an AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


def service(name: str, count: int) -> Source:
    return Source(f"{name}.cca", f"service {name} {{\n  image busybox\n  instances {count}\n"
                                 "  resources { cpu 10m  memory 16Mi }\n}\n")


def running(api, name: str) -> list[dict]:
    return [i for i in api.get("instances", all_tenants=True)["items"]
            if i["service"] == f"default/{name}" and i["state"] == "running"]
