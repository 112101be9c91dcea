"""Requests per second of the services behind this node's gates, measured by HAProxy: each
backend's `req_tot` (HTTP requests since the worker started, `show stat`) sampled twice, the
difference over the time between. A reload starts a new worker whose counters begin at zero: a
total that went down starts the count again rather than giving a negative rate."""

from __future__ import annotations

from collections.abc import Mapping

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


class RequestRates:
    """Per backend, the rate between the last two samples (None until a backend has two)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}

    def sample(self, totals: Mapping[str, int], now: float) -> dict[str, float]:
        rates = {}
        for backend, total in totals.items():
            previous = self._last.get(backend)
            if previous is not None and now > previous[0] and total >= previous[1]:
                rates[backend] = (total - previous[1]) / (now - previous[0])
            self._last[backend] = (now, total)
        for gone in set(self._last) - set(totals):
            del self._last[gone]
        return rates
