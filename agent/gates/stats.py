"""Requests per second of the services behind this node's gates, measured by HAProxy: each
backend's `req_tot` (HTTP requests since the worker started, `show stat`), made a rate by
agent/service_metrics.py's `Rates`."""

from __future__ import annotations

from ccattler.agent.gates.runtime_api import RuntimeApi, RuntimeApiError

#: `show stat <proxy> <type> <server>`: every proxy, backends only (type mask 2).
_BACKENDS = "show stat -1 2 -1"


def backend_request_totals(api: RuntimeApi) -> dict[str, int]:
    """Backend name → HTTP requests served since HAProxy's worker started."""
    lines = api.command(_BACKENDS).splitlines()
    if not lines or not lines[0].startswith("#"):
        raise RuntimeApiError(f"HAProxy's `{_BACKENDS}` answered {lines[:1]!r}, not its CSV header")
    header = lines[0].lstrip("# ").split(",")
    try:
        name, svname, total = header.index("pxname"), header.index("svname"), header.index("req_tot")
    except ValueError:
        raise RuntimeApiError("HAProxy's statistics have no pxname/svname/req_tot columns") from None
    totals = {}
    for line in lines[1:]:
        fields = line.split(",")
        if len(fields) > max(name, svname, total) and fields[svname] == "BACKEND" and fields[total].isdigit():
            totals[fields[name]] = int(fields[total])
    return totals
