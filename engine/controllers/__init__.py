"""Controllers: pure `reconcile(snapshot, now) -> ChangeSet` functions run by the runner (the
`Snapshot`/`ChangeSet`/`Controller` contract lives in `engine/facts/snapshot.py`; the placement
controller in `engine/placement/`, beside the rest of placement)."""
