"""The conntrack entries the data planes end (revoked policy flows, a removed backend's flows): one
`conntrack -L` listing parsed, and entries deleted by their original tuple (to the VIP, for a
DNAT-ed flow). A run that fails is taken as nothing listed or nothing left to delete: conntrack
exits 1 when nothing matched, and a flow may end meanwhile."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

#: One listed entry: its original tuple, and the reply's source (a DNAT-ed flow's backend).
ENTRY = re.compile(r"^(?P<proto>tcp|udp)\s.*?src=(?P<src>\S+) dst=(?P<dst>\S+) "
                   r"sport=(?P<sport>\d+) dport=(?P<dport>\d+)"
                   r".*? src=(?P<rsrc>\S+) dst=\S+ sport=(?P<rsport>\d+) dport=\d+")

Run = Callable[[Sequence[str], str | None], str]  # the planes' runners: (argv, stdin) → stdout


def listed(run: Run, errors: tuple[type[BaseException], ...], argv: Sequence[str]) -> Iterator[re.Match]:
    """The entries `argv` (a `conntrack -L …`) lists."""
    try:
        text = run(argv, None)
    except errors:
        return
    yield from filter(None, map(ENTRY.match, text.splitlines()))


def delete(run: Run, errors: tuple[type[BaseException], ...], entry: re.Match) -> None:
    """Delete `entry` by its original tuple."""
    try:
        run(["conntrack", "-D", "-p", entry["proto"], "-s", entry["src"], "-d", entry["dst"],
             "--sport", entry["sport"], "--dport", entry["dport"]], None)
    except errors:
        pass
