"""Malformed protobuf bytes and random field values for every unary call of ccattler.v1.Cluster
(as the admin, who may do the most) and ccattler.v1.Agent (as a joined node), over a real
mutual-TLS channel to a real server: a documented status or success, never UNKNOWN/INTERNAL, a
refusal changes nothing, and the server keeps serving."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given
from hypothesis import strategies as st

from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from tests.engine.api.test_agent_calls import join
from tests.fuzz.abuse import assert_alive, examples, outcome_is_clean, raw_unary, state

#: Calls that wait on a node's tunnel or a policy child process: fuzzed elsewhere or not unary.
_SLOW = {"PolicyApply"}  # tests/fuzz/test_policies.py


def unary_methods(service: str) -> list[tuple[str, type]]:
    out = []
    for method in api_pb2.DESCRIPTOR.services_by_name[service].methods:
        if not method.client_streaming and not method.server_streaming and method.name not in _SLOW:
            out.append((method.name, getattr(api_pb2, method.input_type.name)))
    return out


CLUSTER = unary_methods("Cluster")
AGENT = [m for m in unary_methods("Agent") if m[0] != "Join"]  # Join: tests/fuzz/test_certificates.py

#: Strings that have broken parsers before: separators, NUL, non-ASCII, traversal, globs, sizes.
NASTY = st.sampled_from(["", "/", "//", "a/b", "a/b/c", "*", "**", "..", "../etc/passwd", "\x00",
                         "a\x00b", "é", "\u202e", "\ud7ff", " ", "-", "default", "desired/", "x" * 300,
                         "{", "{{ 1 }}", "%", "\n", "service", "9" * 30, "NaN", "-1"])
TEXT = st.one_of(NASTY, st.text(max_size=24))
NUMBERS = {
    "TYPE_DOUBLE": st.floats(allow_nan=True, allow_infinity=True), "TYPE_FLOAT": st.floats(width=32),
    "TYPE_INT32": st.integers(-2**31, 2**31 - 1), "TYPE_INT64": st.integers(-2**63, 2**63 - 1),
    "TYPE_UINT32": st.integers(0, 2**32 - 1), "TYPE_UINT64": st.integers(0, 2**64 - 1),
    "TYPE_SINT32": st.integers(-2**31, 2**31 - 1), "TYPE_SINT64": st.integers(-2**63, 2**63 - 1),
    "TYPE_BOOL": st.booleans(),
}
_TYPE_NAMES = {v: k for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}


def _scalar(field) -> st.SearchStrategy:
    name = _TYPE_NAMES[field.type]
    if name == "TYPE_STRING":
        return TEXT
    if name == "TYPE_BYTES":
        return st.binary(max_size=64)
    if name == "TYPE_ENUM":
        return st.sampled_from([v.number for v in field.enum_type.values])
    if name == "TYPE_MESSAGE":
        return message(getattr(api_pb2, field.message_type.name))
    return NUMBERS[name]


def message(cls) -> st.SearchStrategy:
    """Messages of `cls` with each field left out or set to a random (often hostile) value."""
    fields = {}
    for field in cls.DESCRIPTOR.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            k, v = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            fields[field.name] = st.dictionaries(_scalar(k), _scalar(v), max_size=3)
        elif field.is_repeated:
            fields[field.name] = st.lists(_scalar(field), max_size=3)
        else:
            fields[field.name] = _scalar(field)

    @st.composite
    def build(draw):
        out = cls()
        for name, strategy in fields.items():
            if not draw(st.booleans()):
                continue
            value = draw(strategy)
            target = getattr(out, name)
            if isinstance(value, dict):
                for k, v in value.items():
                    if hasattr(target[k], "CopyFrom"):
                        target[k].CopyFrom(v)
                    else:
                        target[k] = v
            elif isinstance(value, list):
                for item in value:
                    if hasattr(item, "SerializeToString"):
                        target.add().CopyFrom(item)
                    else:
                        target.append(item)
            elif hasattr(value, "SerializeToString"):
                target.CopyFrom(value)
            elif value is not None:
                setattr(out, name, value)
        return out

    return build()


def mutated_bytes(data: bytes) -> st.SearchStrategy:
    """`data` with bytes flipped, cut, repeated or appended: broken lengths, tags and UTF-8."""
    @st.composite
    def mutate(draw):
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(out)))
            action = draw(st.sampled_from(["flip", "cut", "insert", "repeat"]))
            if action == "flip" and out:
                out[min(at, len(out) - 1)] ^= draw(st.integers(1, 255))
            elif action == "cut":
                del out[at:at + draw(st.integers(1, 8))]
            elif action == "insert":
                out[at:at] = draw(st.binary(min_size=1, max_size=6))
            else:
                out[at:at] = out[at:at + draw(st.integers(1, 16))] * draw(st.integers(1, 4))
        return bytes(out)

    return mutate()


@pytest.fixture(scope="module")
def node(server, tmp_path_factory):
    client, _ = join(server, tmp_path_factory.mktemp("node"), "fz1")
    with client:
        yield client


def _call(server, channel, service, method, payload):
    before = state(server.store)
    reply = raw_unary(channel, service, method, payload)
    outcome_is_clean(reply, server.store, before, f"{service}/{method} {payload[:80]!r}")
    assert_alive(channel)


def _payloads(methods):
    @st.composite
    def draw_one(draw):
        name, cls = draw(st.sampled_from(methods))
        kind = draw(st.sampled_from(["fields", "mutated", "random"]))
        if kind == "random":
            return name, draw(st.binary(max_size=96))
        valid = draw(message(cls)).SerializeToString()
        return name, valid if kind == "fields" else draw(mutated_bytes(valid))

    return draw_one()


@examples(100)
@given(case=_payloads(CLUSTER))
def test_cluster_calls_with_hostile_bytes_and_values(server, admin, case):
    _call(server, admin.channel, "Cluster", *case)


@examples(50)
@given(case=_payloads(AGENT))
def test_agent_calls_with_hostile_bytes_and_values(server, node, case):
    _call(server, node.channel, "Agent", *case)


@examples(20)
@given(request=message(api_pb2.WatchRequest))
def test_watch_with_hostile_prefixes_and_revisions(server, admin, request):
    stream = admin.cluster.Watch(request, timeout=0.5)
    try:
        next(iter(stream))
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # a valid watch with nothing new waits
            outcome_is_clean(exc, server.store, state(server.store), f"Watch {request}")
    except StopIteration:
        pass
    finally:
        stream.cancel()
    assert_alive(admin.channel)
