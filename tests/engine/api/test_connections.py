"""Connection URLs: every part percent-escaped, the host as its service's stable name."""

from __future__ import annotations

from ccattler.engine.api.connections import connection_url


def test_url_escapes_user_password_and_database() -> None:
    doc = {"driver": "postgres", "host": "payments/db", "port": 5432, "user": "app user",
           "database": "shop/main", "options": {"sslmode": "require", "a b": "c&d"}}
    assert connection_url(doc, b"p@ss:w/rd?#\n") == (
        "postgres://app%20user:p%40ss%3Aw%2Frd%3F%23@db.payments:5432/shop%2Fmain?a+b=c%26d&sslmode=require")


def test_optional_parts_are_left_out() -> None:
    assert connection_url({"driver": "redis", "host": "default/cache", "port": None, "user": None,
                           "database": None, "options": {}}, None) == "redis://cache.default"
