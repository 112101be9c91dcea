"""open_store(url): the backends it picks and the clear errors for URLs it cannot open."""

from __future__ import annotations

import pytest

from ccattler.engine.store import StoreError, StoreUnavailable, open_store
from ccattler.engine.store.etcd_process import free_port

pytestmark = pytest.mark.store


def test_sqlite_memory_url_opens_an_empty_store():
    with open_store("sqlite://:memory:") as store:
        store.put("a", 1)
        assert store.get("a").value == 1
        assert store.url == "sqlite://:memory:"


def test_sqlite_file_url_with_options(tmp_path):
    url = f"sqlite://{tmp_path}/state.db?history=50&max_txn_ops=5"
    with open_store(url) as store:
        assert store.url == url
        store.txn(puts={f"k/{i}": i for i in range(5)})
        with pytest.raises(StoreError, match="limit is 5 operations"):
            store.txn(puts={f"k/{i}": i for i in range(6)})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        pytest.param("mysql://db/x", "unknown store URL scheme 'mysql://'", id="unknown-scheme"),
        pytest.param("/var/lib/state.db", "has no scheme", id="no-scheme"),
        pytest.param("sqlite://state.db", "needs an absolute path", id="relative-path"),
        pytest.param("sqlite:///no/such/dir/state.db", "directory /no/such/dir does not exist", id="no-dir"),
        pytest.param("sqlite://:memory:?history=0", "history must be a positive integer", id="bad-number"),
        pytest.param("sqlite://:memory:?colour=red", "unknown option", id="unknown-option"),
        pytest.param("etcd://localhost", "is not host:port", id="etcd-no-port"),
        pytest.param("etcd://h:1,:2", "is not host:port", id="etcd-empty-host"),
        pytest.param("etcd://h:1?timeout=-3", "timeout must be a positive", id="etcd-bad-timeout"),
    ],
)
def test_bad_urls_are_clear_errors_naming_the_url(url, message):
    with pytest.raises(StoreError, match=message) as caught:
        open_store(url)
    assert url in str(caught.value)


def test_an_unreachable_etcd_is_store_unavailable_naming_the_url():
    url = f"etcd://127.0.0.1:{free_port()}"
    with pytest.raises(StoreUnavailable, match="unreachable") as caught:
        open_store(url + "?timeout=1")
    assert url in str(caught.value)
    assert caught.value.retriable
