"""Start and stop local etcd members on free loopback ports (tests, benchmarks, `cca up`).

It runs with CCattler's transaction limits raised (`--max-txn-ops 10000`, `--max-request-bytes
10 MiB`) so one apply is one txn, and a fast heartbeat so 1-second leases are honoured.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from urllib.parse import quote

from ccattler.engine.store.base import StoreUnavailable
from ccattler.engine.store.ops import MAX_TXN_BYTES, MAX_TXN_OPS


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (all held open while choosing, so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """PEM file paths: the CA, etcd's server certificate and a client certificate it accepts."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


class EtcdProcess:
    """One etcd member as a child process; use as a context manager or call `start()`/`stop()`.

    Alone by default; `EtcdCluster` passes `name`, ports and `initial_cluster` to make members.
    """

    def __init__(
        self,
        data_dir: str | None = None,
        *,
        binary: str = "etcd",
        max_txn_ops: int = MAX_TXN_OPS,
        max_request_bytes: int = MAX_TXN_BYTES,
        tls: EtcdTls | None = None,
        name: str = "cca",
        port: int = 0,
        peer_port: int = 0,
        initial_cluster: str | None = None,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="cca-etcd-")
        self.binary = binary
        self.max_txn_ops = max_txn_ops
        self.max_request_bytes = max_request_bytes
        self.tls = tls
        self.name = name
        self.port = port
        self.peer_port = peer_port
        self.initial_cluster = initial_cluster
        self._command: list[str] = []
        self._process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The member's process id once launched (benchmarks read its CPU from /proc)."""
        return self._process.pid if self._process is not None else None

    @property
    def url(self) -> str:
        """The store URL, with the client certificate options when etcd requires mutual TLS."""
        if self.tls is None:
            return f"etcd://{self.endpoint}"
        files = {"ca": self.tls.ca, "cert": self.tls.client_cert, "key": self.tls.client_key}
        return f"etcd://{self.endpoint}?" + "&".join(f"{k}={quote(v)}" for k, v in files.items())

    def start(self, timeout: float = 20.0) -> EtcdProcess:
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting (cluster members wait for each other)."""
        if not self._command:
            self._command = self._build_command()
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self._command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )

    def _build_command(self) -> list[str]:
        if shutil.which(self.binary) is None:
            raise StoreUnavailable(
                f"cannot start etcd: {self.binary!r} is not installed (apt-get install etcd-server)"
            )
        if not self.port or not self.peer_port:
            self.port, self.peer_port = free_ports(2)
        scheme = "https" if self.tls else "http"
        client_url, peer_url = f"{scheme}://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer_port}"
        self.log_path = os.path.join(self.data_dir, "etcd.log")
        command = [
            self.binary, "--name", self.name, "--data-dir", os.path.join(self.data_dir, "member-data"),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", self.initial_cluster or f"{self.name}={peer_url}",
            "--max-txn-ops", str(self.max_txn_ops), "--max-request-bytes", str(self.max_request_bytes),
            "--heartbeat-interval", "50", "--election-timeout", "500",
        ]
        if self.tls:
            command += [
                "--cert-file", self.tls.server_cert, "--key-file", self.tls.server_key,
                "--trusted-ca-file", self.tls.ca, "--client-cert-auth",
            ]
        return command

    def restart(self, timeout: float = 20.0) -> None:
        """Stop etcd and start it again on the same ports and data (to test reconnects)."""
        self._terminate()
        self.start(timeout)

    def kill(self) -> None:
        """SIGKILL the member, keeping its data (to test failover)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def wait_ready(self, timeout: float) -> None:
        import grpc
        from etcd3 import etcdrpc

        deadline = time.monotonic() + timeout
        if self.tls is None:
            channel = grpc.insecure_channel(self.endpoint)
        else:
            def read(path: str) -> bytes:
                with open(path, "rb") as file:
                    return file.read()

            credentials = grpc.ssl_channel_credentials(
                read(self.tls.ca), read(self.tls.client_key), read(self.tls.client_cert)
            )
            channel = grpc.secure_channel(self.endpoint, credentials)
        with channel:
            stub = etcdrpc.KVStub(channel)
            while True:
                if self._process.poll() is not None:
                    raise StoreUnavailable(
                        f"etcd exited with code {self._process.returncode}; see {self.log_path}"
                    )
                try:
                    stub.Range(etcdrpc.RangeRequest(key=b"\0", limit=1), timeout=1.0)
                    return
                except grpc.RpcError:
                    if time.monotonic() > deadline:
                        self._terminate()
                        raise StoreUnavailable(
                            f"etcd did not answer within {timeout:.0f}s; see {self.log_path}"
                        ) from None
                    time.sleep(0.05)

    def stop(self) -> None:
        """Stop etcd (SIGTERM, then SIGKILL) and remove the data directory if we made it."""
        self._terminate()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _terminate(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EtcdCluster:
    """`size` etcd members on loopback forming one cluster; `url` names every endpoint."""

    def __init__(self, size: int = 3, **options) -> None:
        ports = free_ports(2 * size)
        clients, peers = ports[:size], ports[size:]
        initial = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, peer in enumerate(peers))
        self.members = [
            EtcdProcess(name=f"m{i}", port=clients[i], peer_port=peers[i], initial_cluster=initial, **options)
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(member.endpoint for member in self.members)

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        try:
            for member in self.members:
                member.launch()
            for member in self.members:
                member.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
