#!/usr/bin/env bash
# Installs everything (deploy/install.sh), then runs the linter and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
