"""Rolling updates: the rollout controller steps `derived/rollout/<tenant>/<service>` (step.py is the
arithmetic, controller.py reads the snapshot and keeps the document); docs/controllers.md."""
