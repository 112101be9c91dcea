"""User records at `auth/user/<name>`: a name, a team and groups, used for authorization."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ccattler.engine.facts import CcaError, parse_service
from ccattler.engine.facts.keys import AUTH_TOKENS, AUTH_USERS
from ccattler.engine.store import Compare, Store


class UserError(CcaError):
    """A user name is invalid, already taken or unknown."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    team: str | None
    groups: tuple[str, ...]
    created: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "team": self.team, "groups": list(self.groups), "created": self.created}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> User:
        return cls(doc["name"], doc.get("team"), tuple(doc.get("groups", ())), doc.get("created", 0.0))


def _check_name(name: str, what: str) -> str:
    try:
        parse_service(name, "default")
    except CcaError as exc:
        raise UserError(f"{what}: {exc}") from None
    if "/" in name:
        raise UserError(f"{what} {name!r} must not contain '/'")
    return name


def create_user(store: Store, name: str, team: str | None, groups: tuple[str, ...]) -> User:
    _check_name(name, "user name")
    if team:
        _check_name(team, "team")
    for group in groups:
        _check_name(group, "group")
    user = User(name, team or None, tuple(groups), time.time())
    ok, _ = store.txn([Compare(f"{AUTH_USERS}{name}", 0)], [(f"{AUTH_USERS}{name}", user.to_json())])
    if not ok:
        raise UserError(f"user {name} already exists")
    return user


def get_user(store: Store, name: str) -> User | None:
    fact = store.get(f"{AUTH_USERS}{_check_name(name, 'user name')}")
    return None if fact is None else User.from_json(fact.value)


def delete_user(store: Store, name: str) -> bool:
    """Remove the user and every bearer token issued to it (one transaction)."""
    key = f"{AUTH_USERS}{_check_name(name, 'user name')}"
    if store.get(key) is None:
        return False
    tokens, _ = store.range(AUTH_TOKENS)
    store.txn((), (), [key] + [t.key for t in tokens if t.value.get("user") == name])
    return True


def list_users(store: Store) -> list[User]:
    facts, _ = store.range(AUTH_USERS)
    return [User.from_json(f.value) for f in facts]
