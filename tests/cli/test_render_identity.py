"""`cca describe instance` shows the workload identity its agent reports: SPIFFE id, expiry and the
next rotation; an instance without one (not started yet, or the sim runtime) shows `-`."""

from __future__ import annotations

import time

from ccattler.cli import render


def _row(identity):  # noqa: ANN001, ANN202
    return {"key": "derived/instance/shop/web/web-a1", "name": "web-a1", "tenant": "shop", "state": "running",
            "identity": identity, "value": {"service": "shop/web"}}


def test_describe_shows_the_identity_and_its_expiry(capsys) -> None:  # noqa: ANN001
    now = time.time()
    render.describe("instances", _row({"spiffe_id": "spiffe://ccattler/shop/web", "serial": "1f2e",
                                       "expires": now + 3000, "rotates": now + 1800}))
    out = capsys.readouterr().out
    assert "Identity:         spiffe://ccattler/shop/web\n" in out
    assert "(in 49m), rotates in 29m, serial 1f2e" in out


def test_an_expired_or_missing_identity_says_so(capsys) -> None:  # noqa: ANN001
    expired = {"spiffe_id": "spiffe://ccattler/shop/web", "expires": time.time() - 5}
    render.describe("instances", _row(expired))
    assert "(EXPIRED)" in capsys.readouterr().out
    render.describe("instances", _row(None))
    assert "Identity:         -\n" in capsys.readouterr().out
