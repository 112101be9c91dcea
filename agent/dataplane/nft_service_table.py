"""The service table's text (`ip cca_svc_<bridge>`): its fixed layout, the element lines of a
transaction, and the parsers of a listing back into elements and their counters.
agent/dataplane/nftables.py (the plane) decides what changes; this module only writes and reads the
nft text of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

EXACT = 32          # pick_1 … pick_32: exact equal shares
WIDE = 256          # pick_256: services with more backends (round robin over 256 slots)
EXTERNAL = 0x40000000  # ct mark offset of external-port connections (masqueraded when remote)
LAYOUT = "layout_v1"   # an empty named counter marks the layout (nft -j shows no table comment)

_IP = r"(\d+\.\d+\.\d+\.\d+)"
_COUNTED = r"( counter packets \d+ bytes \d+)?"
_SERVICE = re.compile(rf"{_IP} \. (tcp|udp) \. (\d+){_COUNTED} : goto (\w+)")
_SLOT = re.compile(rf"{_IP} \. (tcp|udp) \. (\d+) \. (0x[0-9a-f]+) : {_IP} \. (\d+)")
_NODEPORT = re.compile(rf"(tcp|udp) \. (\d+){_COUNTED} : goto (\w+)")
_EXT_SLOT = re.compile(rf"(tcp|udp) \. (\d+) \. (0x[0-9a-f]+) : {_IP} \. (\d+)")
_PAIR = re.compile(rf"{_IP} \. {_IP}")
_ADDR = re.compile(_IP)
_BLOCK = re.compile(r"^\t(map|set|chain|counter) (\w+) \{\n(.*?)^\t\}", re.M | re.S)

SvcKey = tuple[str, str, int]       # (vip, protocol, port)
ExtKey = tuple[str, int]            # (protocol, port)
Addr = tuple[str, int]              # (backend ip, port)


def table_name(bridge: str) -> str:
    return f"cca_svc_{bridge.replace('-', '_')}"


def chain_for(count: int, prefix: str = "pick") -> str:
    if count == 0:
        return "refuse"
    return f"{prefix}_{count if count <= EXACT else WIDE}"


def slot_map(backends: tuple[Addr, ...]) -> dict[int, Addr]:
    if len(backends) <= EXACT:
        return dict(enumerate(backends))
    return {i: backends[i % len(backends)] for i in range(WIDE)}


@dataclass
class Kernel:
    """What the table holds, element by element (kept after each transaction; read back at start)."""

    services: dict[SvcKey, str] = field(default_factory=dict)            # key → chain
    slots: dict[SvcKey, dict[int, Addr]] = field(default_factory=dict)
    nodeports: dict[ExtKey, str] = field(default_factory=dict)
    ext_slots: dict[ExtKey, dict[int, Addr]] = field(default_factory=dict)
    hairpin: set[str] = field(default_factory=set)
    node_addrs: set[str] = field(default_factory=set)


def skeleton(table: str, bridge: str, node_addresses: tuple[str, ...]) -> str:
    """The table without elements: delete whatever is there, then declare the fixed layout."""
    t = table
    local = "ip daddr @node_addrs" if node_addresses else "fib daddr type local"
    lines = [f"table ip {t}", f"delete table ip {t}", f"table ip {t} {{",
             f"  counter {LAYOUT} {{ }}",
             "  map services { type ipv4_addr . inet_proto . inet_service : verdict; counter; }",
             "  map slots { type ipv4_addr . inet_proto . inet_service . mark"
             " : ipv4_addr . inet_service; }",
             "  map nodeports { type inet_proto . inet_service : verdict; counter; }",
             "  map ext_slots { type inet_proto . inet_service . mark : ipv4_addr . inet_service; }",
             "  set hairpin { type ipv4_addr . ipv4_addr; }",
             "  set node_addrs { type ipv4_addr; }",
             "  counter refused { }",
             "  chain refuse {",
             "    counter name refused",
             "    meta l4proto tcp reject with tcp reset",
             "    reject",
             "  }"]
    for n in (*range(1, EXACT + 1), WIDE):
        lines += [f"  chain pick_{n} {{",
                  f"    ct mark set numgen random mod {n}",
                  "    dnat ip to ip daddr . meta l4proto . th dport . ct mark map @slots",
                  "  }",
                  f"  chain xpick_{n} {{",
                  f"    ct mark set numgen random mod {n} offset {EXTERNAL}",
                  "    dnat ip to meta l4proto . th dport . ct mark map @ext_slots",
                  "  }"]
    for hook, priority in (("prerouting", "dstnat"), ("output", "-100")):
        lines += [f"  chain {hook} {{",
                  f"    type nat hook {hook} priority {priority}; policy accept;",
                  "    ip daddr . meta l4proto . th dport vmap @services",
                  f"    {local} meta l4proto . th dport vmap @nodeports",
                  "  }"]
    lines += ["  chain postrouting {",
              "    type nat hook postrouting priority srcnat; policy accept;",
              "    ct status dnat ip saddr . ip daddr @hairpin masquerade",
              f'    ct mark and {EXTERNAL:#x} == {EXTERNAL:#x} oifname != "{bridge}" masquerade',
              "  }", "}"]
    return "\n".join(lines) + "\n"


def parse(text: str, node_addresses: tuple[str, ...]) -> Kernel | None:
    """The elements of a listed table (`nft list table`), or None when it is of another layout
    (then it is replaced). Parsed by pattern: JSON is slower to produce and to load."""
    blocks = {(kind, name): body for kind, name, body in _BLOCK.findall(text)}
    local = "@node_addrs" if node_addresses else "fib daddr type local"
    if (local not in blocks.get(("chain", "prerouting"), "") or ("counter", LAYOUT) not in blocks
            or ("chain", f"xpick_{WIDE}") not in blocks):
        return None
    kernel = Kernel()
    listed = {name: blocks.get((kind, name), "") for kind, name in (
        ("map", "services"), ("map", "slots"), ("map", "nodeports"), ("map", "ext_slots"),
        ("set", "hairpin"), ("set", "node_addrs"))}
    for ip, proto, port, _, chain in _SERVICE.findall(listed["services"]):
        kernel.services[(ip, proto, int(port))] = chain
    for ip, proto, port, mark, bip, bport in _SLOT.findall(listed["slots"]):
        kernel.slots.setdefault((ip, proto, int(port)), {})[int(mark, 16)] = (bip, int(bport))
    for proto, port, _, chain in _NODEPORT.findall(listed["nodeports"]):
        kernel.nodeports[(proto, int(port))] = chain
    for proto, port, mark, bip, bport in _EXT_SLOT.findall(listed["ext_slots"]):
        kernel.ext_slots.setdefault((proto, int(port)), {})[int(mark, 16) - EXTERNAL] = (bip, int(bport))
    kernel.hairpin = {a for a, b in _PAIR.findall(listed["hairpin"]) if a == b}
    kernel.node_addrs = set(_ADDR.findall(listed["node_addrs"].partition("elements")[2]))
    return kernel


_SERVICE_HITS = re.compile(rf"{_IP} \. (tcp|udp) \. (\d+) counter packets (\d+)")
_NODEPORT_HITS = re.compile(r"(tcp|udp) \. (\d+) counter packets (\d+)")
_PACKETS = re.compile(r"packets (\d+)")


def counted(text: str) -> dict[str, dict | int]:
    """The element counters of a listed table: new connections per VIP (`vip:port/proto`) and per
    external port (`*:port/proto`), and the packets of counter `refused`."""
    blocks = {(kind, name): body for kind, name, body in _BLOCK.findall(text)}
    refused = _PACKETS.search(blocks.get(("counter", "refused"), ""))
    services, nodeports = blocks.get(("map", "services"), ""), blocks.get(("map", "nodeports"), "")
    return {"services": {f"{ip}:{port}/{proto}": int(n)
                         for ip, proto, port, n in _SERVICE_HITS.findall(services)},
            "external": {f"*:{port}/{proto}": int(n) for proto, port, n in _NODEPORT_HITS.findall(nodeports)},
            "refused": int(refused.group(1)) if refused else 0}


class Ops:
    """The lines of one transaction: element deletes and adds, one line per map and kind."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.lines: list[str] = []

    def add(self, name: str, elements: list[str]) -> None:
        if elements:
            self.lines.append(f"add element ip {self.table} {name} {{ {', '.join(elements)} }}")

    def delete(self, name: str, elements: list[str]) -> None:
        if elements:
            self.lines.append(f"delete element ip {self.table} {name} {{ {', '.join(elements)} }}")

    def script(self) -> str:
        # deletes before adds: a changed element is deleted and re-added in the same transaction
        dels = [line for line in self.lines if line.startswith("delete")]
        adds = [line for line in self.lines if line.startswith("add")]
        return "\n".join(dels + adds) + "\n" if self.lines else ""


def svc_elem(key: SvcKey) -> str:
    return f"{key[0]} . {key[1]} . {key[2]}"


def ext_elem(key: ExtKey) -> str:
    return f"{key[0]} . {key[1]}"
