"""Builders for admission tests: documents in the shapes of docs/facts.md, and a real SQLite store."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from ccattler.engine.admission import Principal

ADMIN = Principal("admin", "admin")
ALICE = Principal("alice", "user", team="storefront")


def service(full: str, *, source: str = "shop.cca", image: str = "registry.local:5000/app:1.0",
            instances: int = 1, cpu: int = 100, memory: int = 64 * 2**20, owner: str | None = None,
            tags: dict[str, str] | None = None, secrets: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    tenant, _, name = full.rpartition("/")
    tenant = tenant or "default"
    doc = {
        "kind": "service", "tenant": tenant, "name": name, "source": source, "image": image,
        "instances": instances, "command": None, "expose": [], "resources": {"cpu": cpu, "memory": memory},
        "env": {}, "config": {"env": {}, "files": []},
        "secrets": [{"name": s, "mount": f"/run/secrets/{s}"} for s in secrets],
        "connections": [], "volumes": [], "stateful": False, "owner": owner, "tags": dict(tags or {}),
        "init": [], "probes": {"liveness": None, "startup": None, "readiness": None},
        "placement": None, "update": {"max_unavailable": 1, "max_extra": 1},
        "disruption": None, "scale": None, "group": None,
    }
    return f"desired/service/{tenant}/{name}", doc


def role(name: str, *allow: str, scopes: tuple[str, ...] = (), source: str = "auth.cca"):
    return f"desired/role/{name}", {"kind": "role", "name": name, "source": source,
                                    "allow": list(allow), "scopes": list(scopes)}


def policy(name: str, allow: list[str], when: list[tuple[str, str, Any]], source: str = "auth.cca"):
    return f"desired/policy/{name}", {
        "kind": "policy", "name": name, "source": source, "allow": allow,
        "when": [{"attr": a, "op": op, "operand": v} for a, op, v in when],
    }


def grant(role_name: str, to: str, subject: str, source: str = "auth.cca"):
    digest = hashlib.sha256(f"{role_name}|{to}|{subject}".encode()).hexdigest()[:12]
    return f"desired/grant/{digest}", {"kind": "grant", "name": digest, "source": source,
                                       "role": role_name, "to": to, "subject": subject}


def tenant(name: str, source: str = "tenants.cca", **quota: int | None):
    full = {k: quota.get(k) for k in ("cpu", "memory", "instances", "volumes", "storage")}
    return f"desired/tenant/{name}", {"kind": "tenant", "name": name, "source": source,
                                      "quota": full, "weight": None}


def seed(store, *pairs: tuple[str, dict[str, Any]]) -> int:
    """Put documents straight into the store (as an earlier admin apply would have)."""
    return store.txn((), list(pairs), ())[1]


def docs(*pairs: tuple[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return dict(pairs)


def operator_policy(name: str, text: str):
    """A stored operator policy, as `apply_policy` writes it (for tests not about its validation)."""
    return f"desired/lp/{name}", {"kind": "lp", "name": name, "source": f"{name}.lp", "text": text}


class CommitAfterBothRead:
    """A store whose first commit waits until every racing apply has read the store and judged
    (and, given `after`, until that event is set: another racer committed first)."""

    def __init__(self, store, barrier: threading.Barrier, after: threading.Event | None = None) -> None:
        self._store, self._barrier, self._after, self.tries = store, barrier, after, []
        self.committed = threading.Event()

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def txn(self, compares, puts, deletes, lease=None):
        if not self.tries:
            self._barrier.wait(timeout=30)
            if self._after is not None:
                assert self._after.wait(timeout=30), "the other racer did not commit"
        ok, revision = self._store.txn(compares, puts, deletes, lease)
        self.tries.append(ok)
        self.committed.set()
        return ok, revision
