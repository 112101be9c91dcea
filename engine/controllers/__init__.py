"""Controllers: pure `reconcile(snapshot, now) -> ChangeSet` functions run by the runner."""

from ccattler.engine.controllers.base import ChangeSet, Controller, Snapshot

__all__ = ["ChangeSet", "Controller", "Snapshot"]
