"""The fact store: one interface (`Store`), two backends chosen by URL in `open_store`.

`sqlite:///abs/path.db` or `sqlite://:memory:` is the embedded default; `etcd://h:p[,h:p]
[?prefix=/ccattler/]` reaches an etcd cluster.
"""

from ccattler.engine.store.base import (
    Compacted,
    Compare,
    Event,
    Fact,
    LeaseNotFound,
    Store,
    StoreError,
    StoreUnavailable,
    TxnTooLarge,
    Watch,
)
from ccattler.engine.store.url import open_store

__all__ = [
    "Compacted",
    "Compare",
    "Event",
    "Fact",
    "LeaseNotFound",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "TxnTooLarge",
    "Watch",
    "open_store",
]
