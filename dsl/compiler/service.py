"""Compile `service` blocks into `desired/service/<tenant>/<name>` documents (docs/facts.md).

Probes, placement and scaling live in service_parts.py; this module reads the simple fields and
fills every optional field with its default so consumers never guess.
"""

from __future__ import annotations

from ccattler.dsl import quantities as q
from ccattler.dsl.ast import Node
from ccattler.dsl.compiler.context import Unit
from ccattler.dsl.compiler.service_parts import compile_placement, compile_probes, compile_scale
from ccattler.dsl.limits import MAX_INSTANCES

#: A rollout that makes no progress this long (milliseconds) rolls back: `update { deadline 10m }`.
DEFAULT_DEADLINE_MS = 600_000
#: Below this a deadline is a lint warning: one capped restart delay (agent Backoff) exceeds it.
MIN_SENSIBLE_DEADLINE_MS = 30_000

_REPEATABLE = frozenset({"expose", "secret", "connection", "volume", "init"})


def compile_service(u: Unit, block: Node, tenant: str, name: str, group: str | None) -> dict:
    what = f'service "{block.name.value}"'
    f = u.singles(block, what, _REPEATABLE)
    image = f.get("image")
    if image is None:
        u.error(block.name.span, "missing-image", f"{what} has no image",
                'add a line like: image "nginx:1.27"')
    elif image.values[0].value.endswith(":latest"):
        u.warn(image.values[0].span, "latest-tag",
               f'{what} uses the "latest" tag; pin a version so rollouts are reproducible')
    if "resources" not in f:
        u.warn(block.name.span, "no-resources",
               f"{what} declares no resources; it is scheduled as if it needed none",
               "add resources { cpu 250m  memory 256Mi }")
    expose = [_expose(u, n) for n in block.fields("expose")]
    expose = [e for e in expose if e]
    first_port = expose[0]["port"] if expose else None
    return {
        "kind": "service",
        "tenant": tenant,
        "name": name,
        "source": u.source.name,
        "image": u.value(image),
        "instances": _instances(u, f.get("instances")),
        "command": u.value(f.get("command")),
        "expose": expose,
        "resources": _resources(u, f.get("resources")),
        "env": _entries(u, f.get("env"), "env"),
        "config": _config(u, f.get("config")),
        "secrets": [s for s in (_secret(u, n, tenant) for n in block.fields("secret")) if s],
        "connections": [c for c in (u.resolve("connection", n.values[0], tenant)
                                    for n in block.fields("connection")) if c],
        "volumes": [v for v in (_volume(u, n, tenant) for n in block.fields("volume")) if v],
        "stateful": "stateful" in f,
        "owner": u.value(f.get("owner")),
        "tags": _entries(u, f.get("tags"), "tags"),
        "init": [_init(u, n) for n in block.fields("init")],
        "probes": compile_probes(u, f, first_port, what),
        "placement": compile_placement(u, f.get("placement"), tenant),
        "update": _update(u, f.get("update")),
        "disruption": _disruption(u, f.get("disruption"), what),
        "scale": compile_scale(u, f.get("scale")),
        "group": group,
    }


def _expose(u: Unit, node: Node) -> dict | None:
    port = u.read(node.values[0], q.port)
    if port is None:
        return None
    flags = node.flags
    protocols = [f for f in flags if f != "external"]
    if len(protocols) > 1 or flags.count("external") > 1:
        u.error(node.keyword_span, "duplicate-field",
                f"expose {port}: give external and one protocol at most")
    return {"port": port, "protocol": protocols[0] if protocols else "tcp", "external": "external" in flags}


def _resources(u: Unit, node: Node | None) -> dict:
    if node is None:
        return {"cpu": 0, "memory": 0}
    f = u.singles(node, "resources")
    return {"cpu": u.value(f.get("cpu"), q.cpu, 0), "memory": u.value(f.get("memory"), q.size, 0)}


def _entries(u: Unit, node: Node | None, what: str) -> dict[str, str]:
    """`{ KEY [=] VALUE … }` as a dict; a key given twice is an error."""
    out: dict[str, str] = {}
    for entry in (node.body if node else ()) or ():
        key = entry.key.value
        if key in out:
            u.error(entry.key.span, "duplicate-field", f'{what} key "{key}" is given twice')
            continue
        out[key] = u.text(entry.values[0])
    return out


def _config(u: Unit, node: Node | None) -> dict:
    env: dict[str, str] = {}
    files: list[dict] = []
    paths: set[str] = set()
    for item in (node.body if node else ()) or ():
        if item.keyword == "env":
            key = item.key.value
            if key in env:
                u.error(item.key.span, "duplicate-field", f'config env "{key}" is given twice')
            env[key] = u.text(item.values[0])
            continue
        path_arg, content_arg = item.values
        path = path_arg.value
        if not path.startswith("/"):
            u.error(path_arg.span, "bad-path", f'config file path "{path}" must be absolute (start with /)')
        if path in paths:
            u.error(path_arg.span, "duplicate-field", f'config file "{path}" is given twice')
        paths.add(path)
        files.append({"path": path, "content": u.text(content_arg),
                      "from": content_arg.value if content_arg.style == "from" else None})
    return {"env": env, "files": files}


def _secret(u: Unit, node: Node, tenant: str) -> dict | None:
    name_arg = node.values[0]
    resolved = u.resolve("secret", name_arg, tenant)
    mount = f"/run/secrets/{name_arg.value.rsplit('/', 1)[-1]}"
    if len(node.values) > 1:
        mount = node.values[1].value
    elif node.body:
        mount = node.body[0].values[0].value
        for extra in node.body[1:]:
            u.error(extra.keyword_span, "duplicate-field", "mount is given twice")
    if not mount.startswith("/"):
        u.error(node.keyword_span, "bad-path", f'secret mount "{mount}" must be an absolute path')
    return {"name": resolved, "mount": mount} if resolved else None


def _volume(u: Unit, node: Node, tenant: str) -> dict | None:
    name_arg, path_arg = node.values
    resolved = u.resolve("volume", name_arg, tenant)
    if not path_arg.value.startswith("/"):
        u.error(path_arg.span, "bad-path", f'volume path "{path_arg.value}" must be absolute')
    return {"name": resolved, "path": path_arg.value} if resolved else None


def _init(u: Unit, node: Node) -> dict:
    f = u.singles(node, "init")
    if "exec" not in f:
        u.error(node.keyword_span, "missing-field", 'init needs a command: exec "…"')
    return {"exec": u.value(f.get("exec")), "timeout": u.value(f.get("timeout"), q.duration),
            "retry": u.value(f.get("retry"), q.count, 0)}


def _update(u: Unit, node: Node | None) -> dict:
    f = u.singles(node, "update") if node else {}
    deadline = u.value(f.get("deadline"), q.duration, DEFAULT_DEADLINE_MS)
    if isinstance(deadline, int) and deadline < MIN_SENSIBLE_DEADLINE_MS:
        u.warn(f["deadline"].values[0].span, "short-deadline",
               f"update deadline {deadline / 1000:g}s is shorter than one crash-loop backoff (30s): "
               "a rollout whose instances restart once rolls back", "use at least deadline 1m")
    return {"max_unavailable": u.value(f.get("max_unavailable"), q.count, 1),
            "max_extra": u.value(f.get("max_extra"), q.count, 1),
            # milliseconds without progress after which a rollout rolls back (engine/rollout)
            "deadline": deadline}


def _disruption(u: Unit, node: Node | None, what: str) -> dict:
    if node is None:
        return {"min_available": None, "max_unavailable": None}
    f = u.singles(node, "disruption")
    if len(f) != 1:
        u.error(node.keyword_span, "bad-disruption",
                f"disruption of {what} takes exactly one of min_available or max_unavailable")
    return {"min_available": u.value(f.get("min_available"), q.count),
            "max_unavailable": u.value(f.get("max_unavailable"), q.count)}


def _instances(u: Unit, node: Node | None) -> int:
    """`instances N`, at most `limits.MAX_INSTANCES` (apply and lint refuse more, never clamp)."""
    value = u.value(node, q.count, 1)
    if isinstance(value, int) and value > MAX_INSTANCES:
        u.error(node.values[0].span, "too-many",
                f"instances {value} is over the limit of {MAX_INSTANCES} per service")
    return value
