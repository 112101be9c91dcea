"""A node's slice holding a `share network` / `share volume` service group (docs/facts.md shapes),
for the sandbox tests (unit and runc e2e)."""

from __future__ import annotations

GROUP = "default/g"


def group_slice(node: str, subnet: str, members: dict[str, tuple[str, int | None, list[str]]],
                share_network: bool = True, share_volumes: tuple[str, ...] = ("default/data",)) -> dict:
    """`members`: service name → (command, exposed port or None, instance names placed on `node`)."""
    prefix = subnet.rsplit(".", 1)[0]
    facts: dict = {
        f"desired/group/{GROUP}": {"kind": "group", "tenant": "default", "name": "g", "source": "g.cca",
                                   "type": "service", "services": [f"default/{s}" for s in members],
                                   "share_network": share_network, "share_volumes": list(share_volumes)},
        "desired/volume/default/data": {"kind": "volume", "tenant": "default", "name": "data",
                                        "source": "g.cca", "size": None, "persistent": False},
        f"derived/network/subnet/{node}": {"node": node, "subnet": subnet, "gateway": f"{prefix}.1"},
    }
    n = 2
    for service, (command, port, names) in members.items():
        facts[f"desired/service/default/{service}"] = {
            "kind": "service", "tenant": "default", "name": service, "source": "g.cca", "image": "busybox",
            "instances": len(names), "command": command,
            "expose": [{"port": port, "protocol": "tcp", "external": False}] if port else [],
            "resources": {"cpu": 100, "memory": 32 << 20}, "env": {}, "config": {}, "group": GROUP}
        for name in names:
            facts[f"derived/placement/default/{name}"] = {"service": f"default/{service}", "instance": name,
                                                          "node": node, "revision": 7, "score": 0}
            facts[f"derived/network/ip/default/{name}"] = {"instance": name, "service": f"default/{service}",
                                                           "node": node, "ip": f"{prefix}.{n}", "prefix": 24,
                                                           "gateway": f"{prefix}.1"}
            n += 1
    # what the network-policy controller writes: the agent starts nothing it has not decided
    facts[f"derived/firewall/{node}"] = {"node": node, "identities": {}, "policies": {},
                                         "open": [f"default/{s}" for s in members]}
    return facts


def without(facts: dict, instance: str) -> dict:
    """The slice once `instance` is no longer placed here."""
    return {k: v for k, v in facts.items() if not k.endswith(f"/default/{instance}")}
