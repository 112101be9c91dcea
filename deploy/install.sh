#!/usr/bin/env bash
# Installs everything CCattler needs on a fresh Debian 12 machine: system packages, the venv
# (.venv beside this checkout) and the project with its dev tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SYSTEM_PACKAGES=(etcd-server etcd-client runc busybox-static iproute2 nftables libnftables1
                 iputils-ping skopeo docker-registry e2fsprogs conntrack clang libbpf-dev bpftool haproxy)
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
# Each node's agent runs its own HAProxy for gates (agent/gates/): the distribution's service stays off.
if [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now haproxy.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/haproxy ]; then
    $SUDO /etc/init.d/haproxy stop >/dev/null 2>&1 || true
    $SUDO update-rc.d haproxy disable >/dev/null 2>&1 || true
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[dev]'
# The busybox image, so a fresh machine runs containers with no registry (node state dir).
.venv/bin/cca image build-busybox
# The eBPF data plane's object, built against this kernel's BTF (bpf/build.py); a kernel without
# BTF only loses `--dataplane ebpf`, so a failure here is reported, not fatal.
.venv/bin/python -m ccattler.bpf.build || echo "warning: no eBPF data plane on this machine (see above)"
echo "installed: $(.venv/bin/cca --version)"
