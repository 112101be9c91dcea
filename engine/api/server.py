"""The API server: two TLS listeners over one store, never a plaintext port.

`listen` (default 127.0.0.1:7443) requires a client certificate from the cluster CA (mutual TLS:
admin, nodes, workloads); `token_listen` (default: the next port) is server-verified TLS where users
present bearer tokens and joining nodes present join tokens. gRPC's Python API cannot ask for an
optional client certificate on one port, hence two. Limits: `max_message_bytes`, `rate`/`burst` per
caller, `auth_failure_rate`/`_burst` per host (failed logins are audited only up to that rate);
`watch_max_bytes` queued per Watch/WatchSlice stream (a slower client is dropped with
RESOURCE_EXHAUSTED and resumes). Audit: `audit_keep` records and `audit_max_age` seconds kept in
the store (0: no age limit); `audit_log_path` adds a JSON-lines file sink rotated at
`audit_log_max_bytes` with `audit_log_backups` old files kept. `identity_ttl` is how long
workload identities live (1 h; agents rotate at 2/3).
Operator `.lp` policies are judged in `policy_workers` pre-started worker processes, each policy
within `policy_seconds` of wall clock and `policy_memory_bytes` of address space per worker
(engine/admission/policy_pool.py).
`/metrics` and `/healthz` are plain HTTP on `metrics_listen` (localhost by default).
"""

from __future__ import annotations

import datetime as dt
import logging
from concurrent import futures
from dataclasses import dataclass

import grpc

from ccattler.engine.admission.policy_pool import PolicyLimits, configure
from ccattler.engine.api.agent import AgentService
from ccattler.engine.api.aio_server import AioListener, aio_handler
from ccattler.engine.api.audit import DEFAULT_KEEP, DEFAULT_MAX_AGE, AuditLog
from ccattler.engine.api.audit_file import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, AuditFile
from ccattler.engine.api.authn import CertAuthenticator, TokenAuthenticator
from ccattler.engine.api.calls import Plumbing, handler
from ccattler.engine.api.cluster import ClusterService
from ccattler.engine.api.limits import RateLimiter
from ccattler.engine.api.metrics import ApiMetrics, MetricsServer
from ccattler.engine.clientconfig import token_address
from ccattler.engine.facts import CcaError
from ccattler.engine.pki import WORKLOAD_LIFETIME, ClusterFiles, cert_pem, split_address
from ccattler.engine.pki.svid import LIFETIME_RANGE
from ccattler.engine.secrets import LocalKeyProvider
from ccattler.engine.store import Store

log = logging.getLogger("ccattler.api")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    listen: str = "127.0.0.1:7443"
    token_listen: str | None = None
    metrics_listen: str | None = "127.0.0.1:9443"
    max_message_bytes: int = 4 * 1024 * 1024
    rate: float = 50.0
    burst: int = 100
    auth_failure_rate: float = 1.0
    auth_failure_burst: int = 20
    audit_keep: int = DEFAULT_KEEP
    #: Seconds a workload identity (X.509-SVID) is valid (engine/pki/svid.py LIFETIME_RANGE).
    identity_ttl: float = WORKLOAD_LIFETIME.total_seconds()
    audit_max_age: float = DEFAULT_MAX_AGE
    audit_log_path: str | None = None
    audit_log_max_bytes: int = DEFAULT_MAX_BYTES
    audit_log_backups: int = DEFAULT_BACKUPS
    watch_max_bytes: int = 8 * 1024 * 1024
    #: Threads per listener. Mutual TLS (grpc.aio): the blocking calls served at once (more wait
    #: for a thread); agents' slice watches are coroutines and hold none. Token listener (sync
    #: server): one per open call, calls beyond it refused with RESOURCE_EXHAUSTED.
    workers: int = 256
    #: Operator policies at admission (engine/admission/policy_pool.py): wall clock per policy,
    #: address space per worker, workers kept started.
    policy_seconds: float = 2.0
    policy_memory_bytes: int = 1 << 30
    policy_workers: int = 2
    #: One netpolicy solve with operator extensions, in a policy worker (engine/netpolicy/isolated.py).
    netpolicy_seconds: float = 30.0


def identity_lifetime(seconds: float) -> dt.timedelta:
    """`identity_ttl` checked against `LIFETIME_RANGE`, with a clear error."""
    low, high = LIFETIME_RANGE
    if not low.total_seconds() <= seconds <= high.total_seconds():
        raise CcaError(f"identity TTL {seconds:g}s: must be between {low.total_seconds():g}s and "
                       f"{high.total_seconds():g}s")
    return dt.timedelta(seconds=seconds)


class ApiServer:
    """Serves ccattler.v1.Cluster and ccattler.v1.Agent for one store and one cluster's PKI."""

    def __init__(self, store: Store, files: ClusterFiles, options: ServerOptions = ServerOptions()) -> None:
        self.store, self.files, self.options = store, files, options
        ca = files.load_ca()
        keys = LocalKeyProvider.from_file(files.master_key)
        try:
            server_pair = (files.server_key.read_bytes(), files.server_cert.read_bytes())
        except FileNotFoundError as exc:
            raise CcaError(f"server certificate not found: {exc.filename} (run `cca init`)") from None
        self.metrics = ApiMetrics()
        # Pre-start the policy workers: the first request judged by an operator policy waits for none.
        configure(PolicyLimits(seconds=options.policy_seconds, memory_bytes=options.policy_memory_bytes,
                               workers=options.policy_workers, netpolicy_seconds=options.netpolicy_seconds))
        limiter = RateLimiter(options.rate, options.burst)
        failures = RateLimiter(options.auth_failure_rate, options.auth_failure_burst)
        sink = None
        if options.audit_log_path:
            try:
                sink = AuditFile(options.audit_log_path, options.audit_log_max_bytes,
                                 options.audit_log_backups)
            except ValueError as exc:
                raise CcaError(str(exc)) from None
        self.audit = audit_log = AuditLog(store, options.audit_keep, max_age=options.audit_max_age, sink=sink)
        self.metrics.audit_coalesced.set_function(lambda: audit_log.coalesced)
        self.metrics.audit_file_failures.set_function(lambda: sink.failures if sink else 0)
        agent = AgentService(store, ca, keys)
        agent.identity_lifetime = identity_lifetime(options.identity_ttl)
        agent.slices.max_bytes = options.watch_max_bytes
        cluster = ClusterService(store, keys, agent.tunnels, options.watch_max_bytes)
        self._slices = agent.slices
        self.tunnels = agent.tunnels  # which nodes have a logs/exec tunnel open
        grpc_options = [("grpc.max_receive_message_length", options.max_message_bytes),
                        ("grpc.max_send_message_length", 64 * 1024 * 1024),
                        ("grpc.so_reuseport", 0),
                        # Pings find vanished agents, so their streams are freed (their
                        # leases expire regardless: nothing refreshes them).
                        ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000),
                        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                        ("grpc.keepalive_permit_without_calls", 1)]

        credentials = grpc.ssl_server_credentials(
            [server_pair], root_certificates=cert_pem(ca.cert), require_client_auth=True)
        split_address(options.listen)
        # Mutual TLS (agents, admin, workloads): on grpc.aio, so idle agent streams hold no thread.
        mtls_plumbing = Plumbing(audit_log, CertAuthenticator(), limiter, self.metrics, failures)
        public = frozenset({"Health"})
        self.mtls = AioListener(
            lambda pool: [aio_handler("Cluster", cluster, mtls_plumbing, public, pool),
                          aio_handler("Agent", agent, mtls_plumbing, public, pool)],
            options.listen, credentials, grpc_options, options.workers, on_lag=store.lease_pardon)
        host = options.listen.rpartition(":")[0]
        self.listen = f"{host}:{self.mtls.port}"
        # Bearer tokens (users, joining nodes): the sync server, a thread per call.
        token_listen = options.token_listen or token_address(self.listen)
        token_plumbing = Plumbing(audit_log, TokenAuthenticator(store), limiter, self.metrics, failures)
        self.token = grpc.server(futures.ThreadPoolExecutor(options.workers, thread_name_prefix="cca-api"),
                                 options=grpc_options, maximum_concurrent_rpcs=options.workers)
        public = frozenset({"Health", "Join"})
        self.token.add_generic_rpc_handlers([handler("Cluster", cluster, token_plumbing, public),
                                             handler("Agent", agent, token_plumbing, public)])
        split_address(token_listen)
        try:
            token_port = self.token.add_secure_port(token_listen, grpc.ssl_server_credentials(
                [server_pair], root_certificates=cert_pem(ca.cert), require_client_auth=False))
        except RuntimeError as exc:
            self.mtls.stop(0)
            raise CcaError(f"cannot listen on {token_listen}: {exc}") from None
        self.token_listen = f"{token_listen.rpartition(':')[0]}:{token_port}"
        self._metrics_server: MetricsServer | None = None
        if options.metrics_listen:
            self._metrics_server = MetricsServer(self.metrics, split_address(options.metrics_listen),
                                                 self._healthy)
            self.metrics_listen = "{}:{}".format(*self._metrics_server.address[:2])

    def _healthy(self) -> bool:
        try:
            self.store.revision()
            return True
        except Exception:
            return False

    def start(self) -> ApiServer:
        self._slices.start()  # its history then covers what another server's agents resume from
        self.mtls.start()
        self.token.start()
        self.audit.start_pruning()
        log.info("serving mutual TLS on %s and bearer tokens on %s", self.listen, self.token_listen)
        return self

    def stop(self, grace: float = 1.0) -> None:
        for server in (self.mtls, self.token):
            server.stop(grace)
        self._slices.close()
        self.audit.close()
        if self._metrics_server is not None:
            self._metrics_server.close()

    def wait(self) -> None:
        self.mtls.wait_for_termination()
