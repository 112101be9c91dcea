from __future__ import annotations

import pytest

from ccattler.agent.images.refs import DOCKER_HUB, InvalidReference, parse_reference

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "name", "remote"),
    [
        pytest.param("busybox", "busybox:latest", (DOCKER_HUB, "library/busybox"), id="bare"),
        pytest.param("busybox:1.36", "busybox:1.36", (DOCKER_HUB, "library/busybox"), id="tag"),
        pytest.param("shop/api:2", "shop/api:2", (DOCKER_HUB, "shop/api"), id="hub-user"),
        pytest.param("docker.io/library/busybox:7", "busybox:7", (DOCKER_HUB, "library/busybox"),
                     id="hub-long"),
        pytest.param("127.0.0.1:5000/a/b:1", "127.0.0.1:5000/a/b:1", ("127.0.0.1:5000", "a/b"), id="port"),
        pytest.param("localhost/x", "localhost/x:latest", ("localhost", "x"), id="localhost"),
        pytest.param(f"reg.io/x@{DIGEST}", f"reg.io/x@{DIGEST}", ("reg.io", "x"), id="digest"),
    ],
)
def test_parse(text: str, name: str, remote: tuple[str, str]) -> None:
    ref = parse_reference(text)
    assert (ref.name, ref.remote) == (name, remote)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("Busybox", "lowercase", id="uppercase"),
        pytest.param("busybox:bad tag", "tag", id="bad-tag"),
        pytest.param("busybox@sha256:12", "digest must be", id="short-digest"),
    ],
)
def test_invalid_references_say_why(text: str, message: str) -> None:
    with pytest.raises(InvalidReference, match=message):
        parse_reference(text)
