"""Prometheus metrics for the API server and a health check, served over plain HTTP on a separate
port bound to localhost by default (`--metrics ADDR`): `/metrics` and `/healthz`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)


class ApiMetrics:
    """One registry per server, so several servers (tests) live in one process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("cca_api_requests", "API calls by method and status code",
                                ["method", "code"], registry=self.registry)
        self.latency = Histogram("cca_api_request_seconds", "API call latency by method", ["method"],
                                 registry=self.registry)
        self.denials = Counter("cca_api_denials", "Calls refused for authentication, authorization or rate",
                               ["reason"], registry=self.registry)
        self.streams = Gauge("cca_api_open_streams", "Open watch and heartbeat streams", ["method"],
                             registry=self.registry)
        self.audit_coalesced = Gauge("cca_audit_coalesced", "Calls an earlier identical audit record "
                                     "stands for (repeated secret refreshes), since start",
                                     registry=self.registry)
        self.audit_file_failures = Gauge("cca_audit_file_failures", "Audit lines the file sink could not "
                                         "write (each record is still in the store)", registry=self.registry)


class MetricsServer:
    """`/metrics` (Prometheus text) and `/healthz` (200 "ok" when `healthy()` is True)."""

    def __init__(self, metrics: ApiMetrics, address: tuple[str, int], healthy: Callable[[], bool]) -> None:
        registry = metrics.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path == "/metrics":
                    body, ctype, status = generate_latest(registry), CONTENT_TYPE_LATEST, 200
                elif self.path == "/healthz":
                    ok = healthy()
                    body, ctype = (b"ok\n" if ok else b"unhealthy\n"), "text/plain"
                    status = 200 if ok else 503
                else:
                    body, ctype, status = b"not found: try /metrics or /healthz\n", "text/plain", 404
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(address, Handler)
        self.address = self.httpd.server_address
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="cca-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
