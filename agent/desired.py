"""What should run on this node: `InstanceSpec`s read from the agent's slice of facts.

The slice is a mapping key → document (docs/facts.md): `derived/placement/<t>/<inst>` picks the
instances placed on `node`; `desired/service/<t>/<svc>` gives command, env, config and resources;
`derived/instance/<t>/<svc>/<inst>` (when present) the image and resources the rollout chose;
`derived/rollout/<t>/<svc>` the fields of older specs: an instance of an older spec kept during a
rolling update (or re-created by a rollback) is built from its own spec's command, env and config;
`derived/network/ip/<t>/<inst>` (`{"ip": "10.88.1.5", "node": …}`, engine/controllers/network.py)
the address; `derived/network/subnet/<node>` (`{"subnet": "10.88.1.0/24", …}`) the node's subnet;
`desired/volume/<t>/<n>` (`{"size", "persistent"}`) each volume's declaration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ccattler.agent.init_steps import InitStep, init_steps
from ccattler.agent.probes import Probe, probes_of
from ccattler.agent.runtime.base import ConfigFile, ContainerSpec, IdentityFiles, SecretFile, VolumeMount
from ccattler.engine.facts import derived_instance, parse_service, service_doc
from ccattler.engine.facts.keys import (
    ADDRESSES,
    DESIRED_GROUPS,
    DESIRED_SERVICES,
    DESIRED_VOLUMES,
    ENDPOINTS,
    INSTANCES,
    OBSERVED_INSTANCES,
    PLACEMENTS,
    ROLLOUTS,
    SUBNETS,
)


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """One instance placed on this node, with everything its container needs."""

    tenant: str
    name: str
    service: str
    image: str
    command: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    files: tuple[ConfigFile, ...] = ()
    cpu: int = 0
    memory: int = 0
    ip: str | None = None
    probes: tuple[Probe, ...] = ()  # not part of the hash: changing a probe does not restart
    #: Secret names and `connection:<t>/<n>`s; the values are fetched when the container starts.
    secrets: tuple[str, ...] = ()
    volumes: tuple[VolumeMount, ...] = ()
    #: Run in order, each to completion, before the main container first starts (agent/init_steps).
    init: tuple[InitStep, ...] = ()
    #: A stateful ordinal waits for the previous one to be ready before it first starts (not hashed).
    waiting_for: str | None = field(default=None, compare=False)
    #: The service group (`tenant/name`) its service belongs to (agent/sandboxes.py reads it).
    group: str | None = field(default=None, compare=False)
    #: The shared network namespace of a `share network` group seat (set by agent/sandboxes.py):
    #: the node network's attachment of that name is this container's namespace; `ip` is the seat's.
    sandbox: str | None = None
    #: A hash of everything that shapes the container: a change means replace it (set on creation).
    spec_hash: str = field(init=False, default="", compare=False)

    def __post_init__(self) -> None:
        shape = (self.image, self.command, sorted(self.env.items()), self.cpu, self.memory, self.ip,
                 [(f.path, f.content) for f in self.files], self.secrets)
        if self.volumes:  # only then: adding the field must not change (restart) every other container
            shape += ([(v.key, v.path) for v in self.volumes],)
        if self.init:  # the same: a changed init step means a replacement, which runs them again
            shape += ([(s.exec, s.timeout, s.retry) for s in self.init],)
        if self.sandbox:  # joining (or leaving) a group's namespace means a new container
            shape += (self.sandbox,)
        object.__setattr__(self, "spec_hash", hashlib.sha256(repr(shape).encode()).hexdigest()[:16])

    @property
    def key(self) -> str:
        """`tenant/instance`: the name the runtime and the network know it by."""
        return f"{self.tenant}/{self.name}"

    @property
    def observed_key(self) -> str:
        return f"{OBSERVED_INSTANCES}{self.tenant}/{self.name}"

    def container(self, netns: str | None = None, secrets: tuple[SecretFile, ...] = (),
                  identity: IdentityFiles | None = None) -> ContainerSpec:
        return ContainerSpec(name=self.key, image=self.image, command=self.command, env=self.env,
                             files=self.files, cpu_millis=self.cpu, memory_bytes=self.memory,
                             netns=netns, ip=self.ip, spec_hash=self.spec_hash, secrets=secrets,
                             volumes=self.volumes, identity=identity)


def _probes(service: Mapping[str, Any]) -> tuple[Probe, ...]:
    """The service's probes; a network probe without a port gets the first exposed port."""
    expose = service_doc.expose(service)
    first = expose[0].get("port") if expose else None
    return tuple(p if p.port or p.type == "exec" else replace(p, port=first) for p in probes_of(service))


#: Where a group's `share volume NAME` is mounted in a member that does not declare that volume.
SHARED_VOLUME_DIR = "/shared"


def service_groups(facts: Mapping[str, Any]) -> dict[str, str]:
    """`t/svc` → its service group `t/g`, from the `desired/group` documents (a group applied in
    another file than its services still counts; the service document's `group` is the fallback)."""
    groups = {}
    for key, doc in facts.items():
        if key.startswith(DESIRED_GROUPS) and isinstance(doc, dict) and doc.get("type") == "service":
            for service in doc.get("services") or []:
                groups[str(service)] = key.removeprefix(DESIRED_GROUPS)
    return groups


def _volumes(facts: Mapping[str, Any], service: Mapping[str, Any], instance: str,
             group_key: str | None = None) -> tuple[VolumeMount, ...]:
    """A stateful instance gets its own directory per volume (stable per ordinal); others share it.
    The size comes from `desired/volume/<t>/<n>` (None until that document is known).

    A volume its service group shares (`share volume data`) is the node's one directory `t/data`
    in every member, stateful or not: at the member's own path when it declares the volume, else at
    `/shared/<name>`."""
    own = f"/{instance}" if service.get("stateful") else ""
    group = facts.get(f"{DESIRED_GROUPS}{group_key}") if group_key else None
    shared = [str(v) for v in group.get("share_volumes") or []] if isinstance(group, dict) else []

    def size_of(name: str) -> int | None:
        declared = facts.get(f"{DESIRED_VOLUMES}{name}")
        size = declared.get("size") if isinstance(declared, dict) else None
        return int(size) if size else None

    mounts = []
    for v in service_doc.volumes(service):
        key = v["name"] if v["name"] in shared else f"{v['name']}{own}"
        mounts.append(VolumeMount(key, v["path"], size_of(v["name"])))
    declared = {v["name"] for v in service_doc.volumes(service)}
    for name in shared:
        if name not in declared:
            mounts.append(VolumeMount(name, f"{SHARED_VOLUME_DIR}/{name.rsplit('/', 1)[-1]}", size_of(name)))
    return tuple(mounts)


def declared_volumes(facts: Mapping[str, Any]) -> dict[str, Any]:
    """`tenant/volume` → its `desired/volume` document, for every volume the slice declares."""
    return {key.removeprefix(DESIRED_VOLUMES): doc for key, doc in facts.items()
            if key.startswith(DESIRED_VOLUMES)}


def _predecessor_not_ready(facts: Mapping[str, Any], service: Any, svc: Mapping[str, Any],
                           instance: str) -> str | None:
    """`db-0` while it is not among `db`'s endpoints, for `db-1` of a stateful `db` (ordered start).
    The ordinal comes from the name (the derived instance document may arrive after the placement)."""
    suffix = instance.removeprefix(f"{service.name}-")
    if not svc.get("stateful") or not suffix.isdigit() or int(suffix) < 1:
        return None
    ordinal = int(suffix)
    previous = f"{service.name}-{ordinal - 1}"
    endpoints = facts.get(f"{ENDPOINTS}{service.tenant}/{service.name}") or {}
    ready = {e.get("instance") for e in endpoints.get("endpoints") or []}
    return None if previous in ready else previous


def built_from(svc: Mapping[str, Any], derived: Mapping[str, Any] | None, rollout: Any) -> Mapping[str, Any]:
    """The service document an instance is built from: the rollout document's fields of the
    instance's own spec laid over the service's (engine/rollout), else the service's own. The
    fields win even for the spec being rolled out: right after an apply the service document is
    new while the rollout document is not yet, and an old instance must not be rebuilt meanwhile."""
    spec = derived_instance.spec(derived)
    fields = ((rollout.get("fields") or {}).get(spec) if isinstance(rollout, dict) and spec else None)
    return {**svc, **fields} if isinstance(fields, dict) else svc


def node_subnet(facts: Mapping[str, Any], node: str) -> str | None:
    """The node's subnet from `derived/network/subnet/<node>`, or None when not allocated yet."""
    doc = facts.get(f"{SUBNETS}{node}")
    return doc.get("subnet") if isinstance(doc, dict) else None


def desired_instances(facts: Mapping[str, Any], node: str) -> dict[str, InstanceSpec]:
    """`tenant/instance` → spec for every placement on `node` whose service document is known.

    A placement whose service is not in the slice yet is left out (the next slice brings it).
    """
    wanted: dict[str, InstanceSpec] = {}
    groups: dict[str, str] | None = None  # read once, only when a placement is here
    for key, placement in facts.items():
        if not key.startswith(PLACEMENTS) or not isinstance(placement, dict):
            continue
        if placement.get("node") != node:
            continue
        tenant = key.split("/")[2]
        instance = placement["instance"]
        service = parse_service(placement["service"], tenant)
        svc = facts.get(f"{DESIRED_SERVICES}{service.tenant}/{service.name}")
        if not isinstance(svc, dict):
            continue
        derived = facts.get(f"{INSTANCES}{service.tenant}/{service.name}/{instance}")
        svc = built_from(svc, derived, facts.get(f"{ROLLOUTS}{service.tenant}/{service.name}"))
        resources = derived_instance.resources(derived) or service_doc.resources(svc)
        config = service_doc.config(svc)
        env = {**service_doc.env(svc), **(config.get("env") or {})}
        files = tuple(ConfigFile(f["path"], f.get("content") or "") for f in config.get("files") or [])
        ip_doc = facts.get(f"{ADDRESSES}{tenant}/{instance}")
        if groups is None:
            groups = service_groups(facts)
        group = groups.get(service.full) or svc.get("group")
        spec = InstanceSpec(
            tenant=tenant, name=instance, service=service.full,
            image=derived_instance.image(derived) or svc["image"], command=svc.get("command"),
            env=MappingProxyType({str(k): str(v) for k, v in env.items()}), files=files,
            cpu=int(resources.get("cpu") or 0), memory=int(resources.get("memory") or 0),
            ip=ip_doc.get("ip") if isinstance(ip_doc, dict) and ip_doc.get("node", node) == node else None,
            probes=_probes(svc), secrets=tuple(s["name"] for s in service_doc.secrets(svc))
            + tuple(f"connection:{c}" for c in service_doc.connections(svc)),
            volumes=_volumes(facts, svc, instance, group), init=init_steps(svc),
            waiting_for=_predecessor_not_ready(facts, service, svc, instance), group=group)
        wanted[spec.key] = spec
    return wanted
