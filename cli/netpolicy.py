"""`cca explain connection SRC DST[:PORT[/PROTO]]` and `cca explain service ID`: network policy
verdicts from rules/netpolicy.lp on the live store (through the API, nothing written); with
`--dataplane NODE`, also the data plane entries NODE's kernel relies on for the connection."""

from __future__ import annotations

import typer

from ccattler.cli._common import client, emit

KINDS = ("connection", "service")


def explain_network(kind: str, args: list[str], output: str, tenant: str, context, server, token,
                    node: str | None = None) -> None:
    """`node` (connection only): also the entries that node's kernel relies on for it, read back by
    its agent (`cca node-inspect NODE --dataplane`), and whether they give the same verdict."""

    wanted = 2 if kind == "connection" else 1
    if len(args) != wanted:
        usage = "SOURCE DESTINATION[:PORT[/tcp|udp]]" if kind == "connection" else "SERVICE"
        raise typer.BadParameter(f"explain {kind} takes {usage}")
    if node and kind != "connection":
        raise typer.BadParameter("--dataplane NODE goes with `explain connection`", param_hint="--dataplane")
    source, destination = (args[0], args[1]) if kind == "connection" else ("", args[0])
    with client(context, server, token) as api:
        answer = api.explain_network(kind, source, destination, tenant)
        if node:
            from ccattler.agent.dataplane.inspect import relied_on

            plane = api.node_inspect(node, dataplane=True)["dataplane"]
            kernel = relied_on(plane, answer["source"], answer["destination"], answer.get("port"),
                               answer["protocol"])
            answer["dataplane"] = {"node": node, "plane": plane.get("plane"), "note": plane.get("note"),
                                   **kernel, "agrees": kernel["verdict"] == answer["verdict"]}
    if output in ("json", "yaml"):
        emit([], [], output, raw={k: v for k, v in answer.items() if k != "lines"})
        return
    typer.echo("\n".join(answer["lines"]))
    if node:
        typer.echo("\n".join(_kernel_lines(answer["dataplane"])))


def _kernel_lines(kernel: dict) -> list[str]:
    """What `explain connection --dataplane NODE` adds: the entries and the kernel's verdict."""
    if kernel["plane"] is None:
        return [f"kernel on {kernel['node']}: nothing programmed ({kernel['note']})"]
    lines = [f"kernel on {kernel['node']} ({kernel['plane']}): {kernel['verdict']} — {kernel['why']}"
             + ("" if kernel["agrees"] else "  [DIFFERS from the rules]")]
    for t in kernel["tuples"]:
        lines.append(f"  tuple {t['source']} port {t['port'] or 'any'}/{t['protocol']} hits {_n(t['hits'])}")
    lines.append(f"  source addresses: {', '.join(kernel['source_addresses']) or '(none on this node)'}")
    if kernel["destination"]:
        d = kernel["destination"]
        lines.append(f"  guarded here: {', '.join(d['local_addresses']) or '-'}"
                     f" (dropped {_n(d['dropped'])})")
    for v in kernel["vips"]:
        backends = ", ".join(f"{b['ip']}:{b['port']}" for b in v["backends"])
        lines.append(f"  via VIP {v['frontend']} -> {backends} (hits {_n(v['hits'])})")
    return lines


def _n(count: int | None) -> str:
    return "-" if count is None else str(count)
