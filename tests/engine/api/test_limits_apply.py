"""Issue 12 class 3 over the API: apply refuses exactly what `cca lint` reports (one table,
`dsl/limits.py`), and `cca describe tenant` shows the quota admission enforces."""

from __future__ import annotations

import grpc
import pytest

from ccattler.cli import render
from ccattler.dsl import limits
from ccattler.dsl.lint import lint_sources
from ccattler.dsl.sources import Source
from ccattler.engine.api.client import ApiError


def service(name: str, instances: int) -> str:
    return f'service {name} {{\n  image "busybox:1"\n  instances {instances}\n}}\n'


@pytest.mark.parametrize("text", [
    service("web", limits.MAX_INSTANCES + 1),
    "service web {\n  image \"busybox:1\"\n  instances {{ 10 ** 9 }}\n}\n",
    "".join(f'service s{i} {{ image "busybox:1" }}\n' for i in range(limits.MAX_SERVICES + 1)),
], ids=["instances", "template-left-unrendered", "services"])
def test_apply_refuses_what_lint_reports(cluster, text):
    source = Source("web.cca", text)
    linted = [d.message for d in lint_sources([source]) if d.severity == "error"]
    assert linted
    with cluster.client() as client, pytest.raises(ApiError) as err:
        client.apply([source])
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert any(m in str(err.value) for m in linted)
    assert cluster.store.range("desired/")[0] == []


def test_describe_tenant_shows_the_default_quota(cluster, capsys):
    with cluster.client() as client:
        client.apply([Source("web.cca", service("web", 3))])
        (row,) = client.get("tenant", "default")["items"]
    assert (row["instances"], row["instance_quota"], row["declared"]) == (3, limits.DEFAULT_TENANT_INSTANCES,
                                                                          False)
    render.describe("tenant", row)
    out = capsys.readouterr().out
    assert f"Quota:            instances {limits.DEFAULT_TENANT_INSTANCES} (default)" in out
    assert "Instances:        3" in out


def test_describe_tenant_shows_a_declared_quota(cluster):
    text = "tenant shop {\n  quota {\n    instances 50\n    cpu 2\n  }\n}\n"
    with cluster.client() as client:
        client.apply([Source("t.cca", text)])
        rows = {r["name"]: r for r in client.get("tenant")["items"]}
    assert set(rows) == {"default", "shop"}
    assert rows["shop"]["declared"] and rows["shop"]["instance_quota"] == 50
    assert rows["shop"]["quota"] == "cpu 2000, instances 50"
