"""`cca status` counts (views.status): a pruned service's instances leave desired, placed and running
in the same answer as the service leaves `services`, and count as stopping until their nodes drop
them (issue 19 part 6)."""

from ccattler.engine.api import views
from ccattler.engine.store import open_store


def _instance(store, service: str, name: str, node: str, state: str | None) -> None:
    store.put(f"derived/instance/default/{service}/{name}", {"service": f"default/{service}", "name": name})
    store.put(f"derived/placement/default/{name}", {"service": f"default/{service}", "instance": name,
                                                    "node": node})
    if state:
        store.put(f"observed/instance/default/{name}", {"node": node, "state": state})


def test_a_pruned_service_is_stopping_never_running_and_gone():
    with open_store("sqlite://:memory:") as store:
        store.put("desired/service/default/web", {"instances": 2})
        store.put("desired/service/default/db", {"instances": 1})
        _instance(store, "web", "web-a", "n1", "running")
        _instance(store, "web", "web-b", "n2", "running")
        _instance(store, "db", "db-0", "n1", "failed")
        before = views.status(store)
        assert before["services"] == 2
        assert before["instances"] == {"desired": 3, "placed": 3, "running": 2, "failed": 1, "stopping": 0}

        store.delete("desired/service/default/web")  # pruned: the controllers have not run yet
        pruned = views.status(store)
        assert pruned["services"] == 1
        assert pruned["instances"] == {"desired": 1, "placed": 1, "running": 0, "failed": 1, "stopping": 2}

        for name in ("web-a", "web-b"):  # the controllers remove instance and placement
            store.delete(f"derived/instance/default/web/{name}")
            store.delete(f"derived/placement/default/{name}")
        assert views.status(store)["instances"] == pruned["instances"]  # still on their nodes
        store.delete("observed/instance/default/web-a")
        store.delete("observed/instance/default/web-b")
        assert views.status(store)["instances"] == {"desired": 1, "placed": 1, "running": 0, "failed": 1,
                                                    "stopping": 0}


def test_an_unplaced_instance_is_desired_not_placed():
    with open_store("sqlite://:memory:") as store:
        store.put("desired/service/default/web", {"instances": 1})
        store.put("derived/instance/default/web/web-a", {"service": "default/web", "name": "web-a"})
        store.put("derived/placement/default/web-a", {"service": "default/web", "instance": "web-a",
                                                      "node": None})
        assert views.status(store)["instances"] == {"desired": 1, "placed": 0, "running": 0, "failed": 0,
                                                    "stopping": 0}
