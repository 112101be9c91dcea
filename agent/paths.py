"""Where a node keeps its state (images, bundles, network records): `CCA_STATE_DIR` if set, else
`/var/lib/ccattler` for root, else `$CCA_HOME/node` (CCA_HOME defaults to `~/.ccattler`)."""

from __future__ import annotations

import os
from pathlib import Path


def default_state_dir() -> Path:
    if os.environ.get("CCA_STATE_DIR"):
        return Path(os.environ["CCA_STATE_DIR"]).expanduser()
    if os.geteuid() == 0:
        return Path("/var/lib/ccattler")
    return Path(os.environ.get("CCA_HOME") or Path.home() / ".ccattler").expanduser() / "node"
