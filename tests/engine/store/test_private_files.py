"""Issue 12 class 8: the SQLite state (token hashes, audit, wrapped secrets) is private on disk."""

from __future__ import annotations

import os
import stat

import pytest

from ccattler.engine.store import StoreUnavailable, open_store
from ccattler.engine.store.sqlite_files import check_private


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000, 0o077])
def test_a_new_store_its_wal_and_directory_are_private_whatever_the_umask(tmp_path, umask):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    old = os.umask(umask)
    try:
        with open_store(f"sqlite://{home}/state.db") as store:
            store.put("desired/service/default/a", {"x": 1})
            files = [p for p in home.iterdir() if p.name.startswith("state.db")]
            assert {p.name for p in files} >= {"state.db", "state.db-wal", "state.db-shm", "state.db.lock"}
            assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
            assert mode(home) == 0o700
            assert check_private(str(home / "state.db")) == []
    finally:
        os.umask(old)


def test_an_existing_world_readable_store_is_made_private_at_start_up(tmp_path):
    db = tmp_path / "state.db"
    with open_store(f"sqlite://{db}") as store:
        store.put("auth/token/x", {"hash": "h"})
    for p in tmp_path.glob("state.db*"):
        os.chmod(p, 0o644)
    os.chmod(tmp_path, 0o755)
    assert check_private(str(db))  # what an operator's `chmod` left
    with open_store(f"sqlite://{db}") as store:
        assert store.get("auth/token/x").value == {"hash": "h"}
    assert check_private(str(db)) == []


def test_a_shared_sticky_directory_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    with pytest.raises(StoreUnavailable, match="is shared .* directory of its own"):
        open_store(f"sqlite://{shared}/state.db")
    assert not (shared / "state.db").exists()
