"""Where controllers' snapshots come from: a direct read at one revision, or a watch-fed cache.

`read_snapshot` does one `range` per prefix at one revision (what `settle` uses). `FactCache`
keeps one in-memory view per prefix, listed once and then updated from `watch` events (re-listed
when the watch reports `resync`), so a tick costs a dictionary copy instead of a full read; its
snapshots may lag the store by the watch delay, which the commit guards catch.

Both hand out documents frozen (`engine/facts/frozen.py`): decoded once per revision and shared by
every controller, so one that mutates a document raises instead of changing what the others see.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ccattler.engine.facts.frozen import freeze
from ccattler.engine.facts.snapshot import Snapshot
from ccattler.engine.store.base import Event, Store, StoreError, Watch


def minimal_prefixes(prefixes: Iterable[str]) -> list[str]:
    """The prefixes not already covered by a shorter one in the set."""
    result: list[str] = []
    for prefix in sorted(set(prefixes)):
        if not any(prefix.startswith(kept) for kept in result):
            result.append(prefix)
    return result


def read_snapshot(store: Store, prefixes: Iterable[str],
                  frozen: dict[str, tuple[int, Any]] | None = None) -> Snapshot:
    """All facts under `prefixes` at one revision (one range per prefix). `frozen` (key → (mod
    revision, frozen value)), kept by the caller across reads, reuses the value frozen at the same
    mod revision: `settle` then hands every controller one object per revision, as the cache does."""
    values: dict[str, Any] = {}
    mods: dict[str, int] = {}
    revision: int | None = None
    for prefix in minimal_prefixes(prefixes):
        facts, rev = store.range(prefix, revision)
        revision = rev if revision is None else revision
        for fact in facts:
            held = frozen.get(fact.key) if frozen is not None else None
            if held is not None and held[0] == fact.mod_revision:
                value = held[1]
            else:
                value = freeze(fact.value)
                if frozen is not None:
                    frozen[fact.key] = (fact.mod_revision, value)
            values[fact.key] = value
            mods[fact.key] = fact.mod_revision
    if revision is None:
        revision = store.revision()
    return Snapshot(revision, MappingProxyType(values), MappingProxyType(mods))


@dataclass(slots=True)
class _View:
    prefix: str
    values: dict[str, Any] = field(default_factory=dict)
    mods: dict[str, int] = field(default_factory=dict)
    revision: int = 0
    listed_at: int = 0  # events up to here are in the last list (an old watch may still deliver them)
    watch: Watch | None = None
    thread: threading.Thread | None = None


class FactCache:
    """Per-prefix views fed by watches; `on_change(key, revision, *change)` is called after each
    applied event that changed a value, `change` being (old value, new value); after a re-list it
    is called with the prefix itself as `key` and no `change`."""

    def __init__(self, store: Store, prefixes: Iterable[str], on_change: Callable[..., None]) -> None:
        self._store = store
        self._on_change = on_change
        self._views = {p: _View(p) for p in minimal_prefixes(prefixes)}
        self._lock = threading.Condition()
        self._stopped = threading.Event()

    def start(self) -> None:
        for view in self._views.values():
            self._relist(view)
            view.thread = threading.Thread(target=self._pump, args=(view,), daemon=True)
            view.thread.start()

    def stop(self) -> None:
        self._stopped.set()
        for view in self._views.values():
            if view.watch is not None:
                view.watch.cancel()
        for view in self._views.values():
            if view.thread is not None and view.thread is not threading.current_thread():
                view.thread.join(timeout=5)

    def _relist(self, view: _View) -> None:
        facts, revision = self._store.range(view.prefix)
        watch = self._store.watch(view.prefix, revision)
        with self._lock:
            old, view.watch = view.watch, watch
            view.values = {f.key: freeze(f.value) for f in facts}
            view.mods = {f.key: f.mod_revision for f in facts}
            view.revision = view.listed_at = revision
            self._lock.notify_all()
        if old is not None:
            old.cancel()

    def _pump(self, view: _View) -> None:
        while not self._stopped.is_set():
            watch = view.watch
            try:
                event = watch.get(timeout=0.5) if watch is not None else None
            except StoreError:  # the watch broke for good: start over from a fresh list
                event = Event("resync", view.prefix, None, view.revision)
            if event is None:
                continue
            if event.kind == "resync":
                try:
                    self._relist(view)
                except StoreError:
                    self._stopped.wait(0.5)
                    continue
                self._on_change(view.prefix, view.revision)
                continue
            value = freeze(event.value)
            with self._lock:
                if event.revision <= view.listed_at:
                    continue  # from the watch a re-list replaced: already in the listed values
                if event.kind == "put":
                    view.values[event.key] = value
                    view.mods[event.key] = event.revision
                else:
                    view.values.pop(event.key, None)
                    view.mods.pop(event.key, None)
                view.revision = max(view.revision, event.revision)
                self._lock.notify_all()
            if event.kind != "put" or event.value != event.prev_value:
                # A rewrite of the same value triggers nothing.
                self._on_change(event.key, event.revision, event.prev_value, value)

    def relist(self, prefixes: Iterable[str]) -> None:
        """Re-read the views covering `prefixes` from the store (after repeated conflicts)."""
        for view in self._covering(prefixes):
            self._relist(view)

    def _covering(self, keys: Iterable[str]) -> list[_View]:
        keys = list(keys)
        return [v for v in self._views.values() if any(k.startswith(v.prefix) for k in keys)]

    def wait_for(self, written: Iterable[tuple[int, Iterable[str]]], timeout: float) -> bool:
        """Wait until every view has applied the last committed revision that wrote into it
        (read-your-writes). `written` is (revision, keys) per committed transaction."""
        targets: dict[str, int] = {}
        for revision, keys in written:
            for view in self._covering(keys):
                targets[view.prefix] = max(targets.get(view.prefix, 0), revision)
        views = [(self._views[prefix], revision) for prefix, revision in targets.items()]
        with self._lock:
            return self._lock.wait_for(lambda: all(v.revision >= r for v, r in views), timeout)

    def snapshot(self, prefixes: Iterable[str]) -> Snapshot:
        prefixes = tuple(prefixes)
        values: dict[str, Any] = {}
        mods: dict[str, int] = {}
        with self._lock:
            revision = 0
            for view in self._covering(prefixes):
                revision = max(revision, view.revision)
                if any(p.startswith(view.prefix) and p != view.prefix for p in prefixes):
                    for key, value in view.values.items():
                        if key.startswith(prefixes):
                            values[key] = value
                            mods[key] = view.mods[key]
                else:
                    values.update(view.values)
                    mods.update(view.mods)
        return Snapshot(revision, MappingProxyType(values), MappingProxyType(mods))
