#!/usr/bin/env bash
# The main job on one machine (run deploy/install.sh first, as root for real containers): start the
# embedded cluster in the background (`cca up --detach`: API server + runner on SQLite, and a local
# runc agent), apply examples/hello.cca and wait until both busybox web servers run, then ask each
# one for its page at its own address. Safe to run again. `.venv/bin/cca down` stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
cca() { .venv/bin/cca "$@"; }

cca up --detach
cca apply examples/hello.cca --wait --timeout 120
cca get instances -o wide
echo
WGET="wget"; command -v wget >/dev/null || WGET="busybox wget"
for ip in $(cca get instances -o json | .venv/bin/python -c \
        'import json, sys; print(" ".join(i["ip"] for i in json.load(sys.stdin) if i["ip"]))'); do
    echo "\$ wget -qO- http://$ip:8080/"
    env -u http_proxy -u HTTP_PROXY $WGET -qO- "http://$ip:8080/"
done
echo
echo "more: .venv/bin/cca get nodes | cca explain default/hello | cca status; stop: .venv/bin/cca down"
