"""The node's nftables table: masquerade for traffic leaving the node subnet, forwarding allowed
to and from the bridge. Driven as `nft -f -` text, replaced atomically in one nft transaction.

Table naming leaves room for later data planes: `cca_<job>_<bridge>`; this module owns
`cca_nat_<bridge>` (overlay, VIPs and policy get their own tables, e.g. `cca_vip_<bridge>`).
"""

from __future__ import annotations

import ipaddress
import subprocess

from ccattler.engine.facts import CcaError


class NftError(CcaError):
    """nft refused a ruleset (the message carries nft's own error)."""


def table_name(bridge: str) -> str:
    return f"cca_nat_{bridge.replace('-', '_')}"


def _nft(script: str) -> None:
    try:
        result = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise NftError("nft not found: install Debian's nftables") from None
    if result.returncode != 0:
        raise NftError(f"nft failed: {result.stderr.strip()}")


def nat_ruleset(bridge: str, subnet: str, no_masquerade: tuple[str, ...] = ()) -> str:
    """The table text; `no_masquerade` lists destinations reached unNATed (e.g. the cluster CIDR)."""
    net = ipaddress.ip_network(subnet)
    nets = [net, *(ipaddress.ip_network(c) for c in no_masquerade)]
    keep = ", ".join(str(n) for n in ipaddress.collapse_addresses(nets))  # nft refuses overlaps
    table = table_name(bridge)
    return (
        f"table ip {table} {{}}\n"
        f"delete table ip {table}\n"
        f"table ip {table} {{\n"
        f"  chain postrouting {{\n"
        f"    type nat hook postrouting priority srcnat; policy accept;\n"
        f'    ip saddr {net} ip daddr != {{ {keep} }} oifname != "{bridge}" masquerade\n'
        f"  }}\n"
        f"  chain forward {{\n"
        f"    type filter hook forward priority filter; policy accept;\n"
        f'    iifname "{bridge}" accept\n'
        f'    oifname "{bridge}" ct state established,related accept\n'
        f"  }}\n"
        f"}}\n"
    )


def install(bridge: str, subnet: str, no_masquerade: tuple[str, ...] = ()) -> None:
    """Install (or replace) the node table."""
    _nft(nat_ruleset(bridge, subnet, no_masquerade))


def remove(bridge: str) -> None:
    """Delete the node table if present."""
    table = table_name(bridge)
    _nft(f"table ip {table} {{}}\ndelete table ip {table}\n")


def exists(bridge: str) -> bool:
    argv = ["nft", "list", "table", "ip", table_name(bridge)]
    result = subprocess.run(argv, capture_output=True, timeout=10)
    return result.returncode == 0
