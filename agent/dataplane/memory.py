"""The in-memory data plane: keeps the last applied state and answers the questions the kernel
planes answer (which backend a connection to a frontend may reach, whether policy admits a packet),
so agent and state-builder tests run without root. The conformance tests
(tests/agent/dataplane/test_conformance.py) hold it and the kernel planes to the same behaviour.
"""

from __future__ import annotations

from dataclasses import replace

from ccattler.agent.dataplane.base import Backend, DataPlane, DataPlaneState


class MemoryDataPlane(DataPlane):
    name = "memory"

    def __init__(self) -> None:
        self.state = DataPlaneState()
        self.applies = 0   # how many applies changed something (idempotence checks)

    def apply(self, state: DataPlaneState) -> None:
        if state != self.state:
            self.applies += 1
        self.state = state

    def programmed(self) -> DataPlaneState:
        return self.state

    def admit(self, identity: str, ip: str) -> None:
        ingress = self.state.policies.get(identity)
        if ingress is None or ip in ingress.local_ips:
            return
        policies = dict(self.state.policies)
        policies[identity] = replace(ingress, local_ips=ingress.local_ips | {ip})
        identities = dict(self.state.identities)
        identities[identity] = identities.get(identity, frozenset()) | {ip}
        self.state = replace(self.state, policies=policies, identities=identities)

    def backends(self, ip: str, port: int, protocol: str = "tcp") -> tuple[Backend, ...] | None:
        """The backends a connection to ip:port/protocol is balanced over; () refuses, None: not a
        frontend (the connection goes where its address says)."""
        for table in (self.state.services, self.state.external):
            for front, backends in table.items():
                if (front.ip in (ip, "")) and front.port == port and front.protocol == protocol:
                    return backends
        return None

    def admits(self, source_ip: str, destination_ip: str, port: int, protocol: str) -> bool:
        """Whether policy lets a new connection from source_ip into the local destination_ip."""
        for ingress in self.state.policies.values():
            if destination_ip not in ingress.local_ips:
                continue
            sources = {name for name, ips in self.state.identities.items() if source_ip in ips}
            return any(src in sources and p in (0, port) and proto in ("any", protocol)
                       for src, p, proto in ingress.allowed)
        return True  # not a default-deny destination: open

    def teardown(self) -> None:
        self.state = DataPlaneState()
