"""Container networking on one node: bridge, per-container namespace and veth, NAT table
(`node.NodeNetwork`; `nat` owns the nftables table, `netns` the namespaces)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Attachment": "node", "NetworkError": "node", "NodeNetwork": "node", "NftError": "nat"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # lazy: pyroute2 costs ~0.2 s to import
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
