"""What every abuse case asserts (issue 12 class 9): the answer is a documented status with a
message (never UNKNOWN or INTERNAL, i.e. never a traceback), a refused request leaves the store
as it was (audit records aside), and the server is still serving afterwards.

Example counts are bounded and the runs derandomized so CI time and results do not depend on
luck; `CCA_FUZZ_EXAMPLES=2000 CCA_FUZZ_RANDOM=1 pytest tests/fuzz` explores further.
"""

from __future__ import annotations

import os

import grpc
from hypothesis import HealthCheck, settings

from ccattler.engine.api.gen.ccattler.v1 import api_pb2

#: Statuses a refused request may get (docs/api.md "Errors, limits, audit").
REFUSALS = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.OUT_OF_RANGE,
})


def examples(default: int) -> settings:
    """Hypothesis settings for `default` examples (scaled by CCA_FUZZ_EXAMPLES / 100)."""
    scale = int(os.environ.get("CCA_FUZZ_EXAMPLES", "100")) / 100
    return settings(max_examples=max(1, int(default * scale)), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck),
                    derandomize=not os.environ.get("CCA_FUZZ_RANDOM"))


def state(store) -> dict[str, int]:
    """Every non-audit key with its modification revision."""
    return {f.key: f.mod_revision for f in store.range("")[0] if not f.key.startswith("audit/")}


def check_refusal(code: grpc.StatusCode, details: str | None, what: str) -> None:
    assert code in REFUSALS, f"{what}: {code.name} {details!r}"
    assert details and "Traceback" not in details, f"{what}: {code.name} without a clear message"


def assert_alive(channel: grpc.Channel) -> None:
    health = channel.unary_unary("/ccattler.v1.Cluster/Health", request_serializer=lambda b: b,
                                 response_deserializer=api_pb2.Json.FromString)
    assert "ok" in health(api_pb2.Empty().SerializeToString(), timeout=10).json


def raw_unary(channel: grpc.Channel, service: str, method: str, payload: bytes, timeout: float = 15):
    """Send `payload` as the request bytes of `service/method`; the reply or the RpcError."""
    rpc = channel.unary_unary(f"/ccattler.v1.{service}/{method}", request_serializer=lambda b: b,
                              response_deserializer=lambda b: b)
    try:
        return rpc(payload, timeout=timeout)
    except grpc.RpcError as exc:
        return exc


def outcome_is_clean(reply, store, before: dict[str, int], what: str) -> bool:
    """True when the call succeeded; a refusal must be documented and have changed nothing."""
    if not isinstance(reply, grpc.RpcError):
        return True
    check_refusal(reply.code(), reply.details(), what)
    after = state(store)
    assert after == before, f"{what}: refused ({reply.code().name}) yet changed " \
        f"{sorted(set(after.items()) ^ set(before.items()))[:5]}"
    return False
