#!/usr/bin/env bash
# Runs CCattler's etcd in the foreground without systemd: `deploy/etcd/start.sh [CONF]`.
# CONF defaults to etcd.conf beside this script; any ETCD_* variable already set wins over it.
set -euo pipefail
conf=${1:-"$(dirname "$0")/etcd.conf"}
while IFS='=' read -r name value; do
    case "$name" in
        ETCD_*) [ -n "${!name:-}" ] || export "$name=$value" ;;
    esac
done < <(grep -E '^ETCD_[A-Z_]+=' "$conf")
install -d -m 0700 "$ETCD_DATA_DIR"
exec etcd
