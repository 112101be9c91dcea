"""Probes the networking e2e tests run against a `cca up --nodes 3` cluster: an HTTP GET by raw
socket (from the host, or from a container's network namespace through `ip netns exec`), and a
timed probe loop that prints one line per attempt. busybox httpd answers with the instance's
hostname (the `SERVE` command), so an answer names the backend that gave it."""

from __future__ import annotations

import json
import socket
import sqlite3

from ccattler.agent.dataplane import conntrack
from ccattler.agent.dataplane.policy_nft import PolicyError, run_command

#: busybox httpd on PORT answering with its own hostname (the instance name).
SERVE = "mkdir -p /w && hostname > /w/index.html && exec httpd -f -p {port} -h /w"

#: Run with `python -c LOOP HOST PORT SECONDS`: one line per attempt, `<unix time> <local port> ok
#: <answer>` or `<unix time> <local port> fail <error>`, for SECONDS; each attempt a new connection
#: (0.4 s to answer), at most 20 a second. The local port names the attempt in conntrack
#: (`backends_by_port`), so a failure can be traced to the backend the kernel chose for it.
LOOP = r"""
import socket, sys, time
host, port, until = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
while time.time() < until:
    start, local = time.time(), 0
    try:
        with socket.socket() as s:
            s.settimeout(0.4)
            s.bind(("", 0))
            local = s.getsockname()[1]
            s.connect((host, port))
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        body = data.decode(errors="replace").strip().splitlines()
        print(f"{start:.3f} {local} ok {body[-1] if body else '-'}", flush=True)
    except OSError as exc:
        print(f"{start:.3f} {local} fail {type(exc).__name__}", flush=True)
    time.sleep(max(0.0, 0.05 - (time.time() - start)))  # about 20 attempts a second at most
"""


def http_get(address: str, port: int, host: str | None = None, cookie: str | None = None,
             timeout: float = 3.0) -> tuple[int, dict[str, str], str]:
    """(status, headers lower-cased, body) of `GET /` over a new connection."""
    lines = ["GET / HTTP/1.0", f"Host: {host or address}"] + ([f"Cookie: {cookie}"] if cookie else [])
    with socket.create_connection((address, port), timeout=timeout) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.decode(errors="replace").partition("\r\n\r\n")
    status_line, *header_lines = head.split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), value.strip())
    return int(status_line.split()[1]), headers, body.strip()


def parse_loop(text: str) -> list[tuple[float, bool, str, int]]:
    """The lines of LOOP as (time, answered, answer or error, local port)."""
    rows = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in ("ok", "fail"):
            rows.append((float(parts[0]), parts[2] == "ok", parts[3], int(parts[1])))
    return rows


def backends_by_port(netns: str, vip: str, port: int) -> dict[int, str]:
    """Client port → the backend address the kernel translated `vip:port` to, from the conntrack
    table of `netns` (the node whose prerouting hook translates the client's VIP traffic). Entries
    outlive their connections (TIME_WAIT, an unanswered SYN_SENT: 120 s), though the agent deletes
    those of a backend that left the service (a connection cut there is not in the table)."""
    argv = ["ip", "netns", "exec", netns, "conntrack", "-L", "-p", "tcp", "--orig-dst", vip,
            "--dport", str(port)]
    return {int(m["sport"]): m["rsrc"] for m in conntrack.listed(run_command, (PolicyError,), argv)}


def fact(shell, key: str) -> dict:  # noqa: ANN001
    """One document, read from the server's SQLite file read-only (the server owns the store)."""
    db = sqlite3.connect(f"file:{shell.home}/state.db?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else {}
    finally:
        db.close()


def running(shell, service: str) -> list[dict]:  # noqa: ANN001
    """The running instances of `default/<service>` that have an address."""
    return [i for i in shell.instances() if i["service"] in (service, f"default/{service}")
            and i["state"] == "running" and i.get("ip")]


def timeline(rows: list[tuple[float, bool, str, int]], since: float) -> str:
    """Per second from `since`: how many attempts each backend answered and how many failed, by
    error (`fail:TimeoutError`: no answer in time; `fail:ConnectionRefusedError`: nothing listens)."""
    seconds: dict[int, dict[str, int]] = {}
    for t, ok, answer, _ in rows:
        counts = seconds.setdefault(int(t - since) if t >= since else -1, {})
        key = answer if ok else f"fail:{answer}"
        counts[key] = counts.get(key, 0) + 1
    return "\n".join(f"  t{s:+3d}s " + " ".join(f"{k}={v}" for k, v in sorted(c.items()))
                     for s, c in sorted(seconds.items()))
