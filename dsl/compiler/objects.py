"""Compile the namespaced blocks other than service: secret, connection, network, gate, group, volume."""

from __future__ import annotations

from ccattler.dsl import quantities as q
from ccattler.dsl.ast import Node, Scalar
from ccattler.dsl.compiler.cluster import content_hash
from ccattler.dsl.compiler.context import Unit
from ccattler.engine.facts import InvalidKey, parse_service


def compile_secret(u: Unit, block: Node) -> dict:
    description = None
    if block.body:
        f = u.singles(block, f'secret "{block.name.value}"')
        description = u.value(f.get("description"))
    return {"description": description}


def compile_connection(u: Unit, block: Node, tenant: str) -> dict:
    f = u.singles(block, f'connection "{block.name.value}"')
    for needed in ("driver", "host"):
        if needed not in f:
            u.error(block.name.span, "missing-field", f'connection "{block.name.value}" needs {needed}')
    options: dict[str, str] = {}
    for entry in (f["options"].body if "options" in f else ()) or ():
        if entry.key.value in options:
            u.error(entry.key.span, "duplicate-field", f'option "{entry.key.value}" is given twice')
        options[entry.key.value] = u.text(entry.values[0])
    host = f.get("host")
    secret = f.get("secret")
    return {
        "driver": u.value(f.get("driver")),
        "host": u.resolve("service", host.values[0], tenant) if host else None,
        "port": u.value(f.get("port"), q.port),
        "user": u.value(f.get("user")),
        "secret": u.resolve("secret", secret.values[0], tenant) if secret else None,
        "database": u.value(f.get("database")),
        "options": options,
    }


def _endpoint(u: Unit, scalar: Scalar) -> str | None:
    """A network rule end: `*`, `tenant/*` or a service name."""
    text = scalar.value
    if text == "*":
        return "*"
    if text.endswith("/*"):
        try:
            return parse_service(text[:-2] + "/x").tenant + "/*"
        except InvalidKey as exc:
            u.error(scalar.span, "bad-name", str(exc))
            return None
    return u.resolve("service", scalar)


def compile_network(u: Unit, block: Node) -> list[tuple[str, str, dict]]:
    """One (tenant, hash, document) per rule; the rule belongs to its destination's tenant."""
    rules = []
    seen: dict[str, int] = {}
    for rule in block.body or ():
        src_arg, dst_arg = rule.values[0], rule.values[1]
        src, dst = _endpoint(u, src_arg), _endpoint(u, dst_arg)
        port = u.read(rule.option("port"), q.port)
        protocols = [f for f in rule.flags if f in ("tcp", "udp")]
        if len(protocols) > 1 or rule.flags.count("port") > 1:
            u.error(rule.keyword_span, "duplicate-field", "a rule takes one port and one protocol at most")
        protocol = protocols[0] if protocols else None
        if src is None or dst is None:
            continue
        content = {"action": rule.keyword, "from": src, "to": dst, "port": port, "protocol": protocol}
        digest = content_hash(content)
        if digest in seen:
            u.warn(rule.span, "duplicate-rule",
                   f"the same rule is given twice (first at line {seen[digest]})")
            continue
        seen[digest] = rule.span.line
        tenant = dst.split("/", 1)[0] if "/" in dst else u.tenant
        rules.append((tenant, digest, {"kind": "network", "tenant": tenant, "source": u.source.name,
                                       **content}))
    return rules


#: The port a gate listens on, on every node's address, when it gives no `listen`.
GATE_LISTEN_DEFAULT = 80


def compile_gate(u: Unit, block: Node, tenant: str) -> dict:
    what = f'gate "{block.name.value}"'
    f = u.singles(block, what, frozenset({"host"}))
    target = f.get("target")
    if target is None:
        u.error(block.name.span, "missing-field", f"{what} needs a target: target SERVICE port N")
    path = u.value(f.get("path"))
    if path is not None and not path.startswith("/"):
        u.error(f["path"].values[0].span, "bad-path", f'gate path "{path}" must start with /')
    sticky = None
    if "sticky" in f:
        sf = u.singles(f["sticky"], "sticky")
        same_site = sf.get("same_site")
        sticky = {
            "cookie": u.value(sf.get("cookie"), None, f"cca_sticky_{block.name.value}"),
            "secure": u.value(sf.get("secure"), q.boolean, False),
            "http_only": u.value(sf.get("http_only"), q.boolean, True),
            "same_site": u.word(same_site.values[0], ("lax", "strict", "none"), "same_site")
            if same_site else "lax",
        }
    affinity = f.get("affinity")
    return {
        "hosts": [h.values[0].value for h in block.fields("host")],
        "path": path,
        "target": u.resolve("service", target.values[0], tenant) if target else None,
        "port": u.read(target.option("port"), q.port) if target else None,
        "sticky": sticky,
        "affinity": u.word(affinity.values[0], ("source_ip",), "affinity") if affinity else None,
        "listen": u.value(f.get("listen"), q.port, GATE_LISTEN_DEFAULT),
    }


def compile_group(u: Unit, block: Node, tenant: str) -> dict | None:
    what = f'group "{block.name.value}"'
    kinds = {item.keyword for item in block.body or ()}
    if not kinds:
        u.error(block.name.span, "group-body", f"{what} is empty",
                "list services (service NAME) for a service group or members (member NAME) for an auth group")
        return None
    if "member" in kinds and kinds - {"member"}:
        u.error(block.name.span, "group-body",
                f"{what} mixes members with services or shares",
                "a group is either a service group (service, share) or an auth group (member)")
        return None
    if kinds == {"member"}:
        return {"type": "auth", "members": sorted({m.values[0].value for m in block.fields("member")})}
    if "service" not in kinds:
        u.error(block.name.span, "group-body", f"{what} shares resources but lists no service")
    services = [s for s in (u.resolve("service", n.values[0], tenant) for n in block.fields("service")) if s]
    volumes = []
    share_network = False
    for share in block.fields("share"):
        if "network" in share.flags:
            share_network = True
        else:
            vol = u.resolve("volume", share.option("volume"), tenant)
            if vol:
                volumes.append(vol)
    return {"type": "service", "services": services, "share_network": share_network,
            "share_volumes": volumes}


def compile_volume(u: Unit, block: Node) -> dict:
    f = u.singles(block, f'volume "{block.name.value}"')
    return {"size": u.value(f.get("size"), q.size),
            "persistent": u.value(f.get("persistent"), q.boolean, False)}
