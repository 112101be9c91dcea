"""Certificates and CSRs as an attacker sends them: random bytes, broken PEM framing, flipped DER
inside valid framing, other key types and signature algorithms. In process only `PkiError`
escapes `load_csr`/`load_cert`/`identity_of`/`sign_csr`; over the wire `Join`, `RenewCert` and
`IssueIdentity` refuse with INVALID_ARGUMENT (or a documented status), a bad CSR spends no join
token, and the server keeps serving."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.auth import create_token
from ccattler.engine.pki import NODE_LIFETIME, PkiError, identity_of, load_cert, make_csr, new_key
from ccattler.engine.pki.ca import CertificateAuthority, load_csr
from tests.engine.api.test_agent_calls import join
from tests.fuzz.abuse import assert_alive, examples, outcome_is_clean, raw_unary, state

CA = CertificateAuthority.create("fuzz-ca")


def sign(csr: bytes):
    return CA.sign_csr(csr, name="n9", kind="node", lifetime=NODE_LIFETIME)


GOOD_CSR = make_csr(new_key(), "n9")
GOOD_CERT = CA.cert.public_bytes(serialization.Encoding.PEM)


def _csr(key, name="n9", algorithm=hashes.SHA256()) -> bytes:
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
    return builder.sign(key, algorithm).public_bytes(serialization.Encoding.PEM)


def _self_signed(subject: list[x509.NameAttribute]) -> bytes:
    key = new_key()
    now = dt.datetime.now(dt.UTC)
    name = x509.Name(subject)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


#: Well-formed inputs the CA must still refuse or handle: other keys, hashes, subjects.
ODD_CSRS = [
    pytest.param(_csr(rsa.generate_private_key(public_exponent=65537, key_size=1024)), id="rsa"),
    pytest.param(_csr(ed25519.Ed25519PrivateKey.generate(), algorithm=None), id="ed25519"),
    pytest.param(_csr(new_key(), algorithm=hashes.SHA512()), id="sha512"),
    pytest.param(_csr(ec.generate_private_key(ec.SECP521R1())), id="p521"),
    pytest.param(_csr(new_key(), name="x" * 64), id="long-cn"),
    pytest.param(_csr(new_key(), name="../../é\u202e"), id="odd-cn"),
    pytest.param(GOOD_CERT, id="a-certificate-not-a-csr"),
    pytest.param(GOOD_CSR.replace(b"CERTIFICATE REQUEST", b"CERTIFICATE"), id="wrong-label"),
    pytest.param(GOOD_CSR * 3, id="three-csrs"),
    pytest.param(b"-----BEGIN CERTIFICATE REQUEST-----\n"  # found by the fuzzer: version 1
                 b"MIHHMG8CAQEwDTELMAkGA1UEAwwCbjkwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAT/0chfKhJX\n"
                 b"IBXDaubTd/rcTb636og91TW1s6TTGzzlcYx+BCeFOlXiTqxZJmlSOexCuHnD4RyEFXIA24IIHYPi\n"
                 b"oAAwCgYIKoZIzj0EAwIDSAAwRQIgH0mEcXxBs7tz0/aW8x2x6yWqk3WnW9F6hm5CvroqwtMCIQCA\n"
                 b"SPm+CVsde1mLg3KnlJIxZmcQ2r9DIJPYsz19AGe9Fw==\n-----END CERTIFICATE REQUEST-----\n",
                 id="csr-version-1"),
    pytest.param(b"", id="empty"),
    pytest.param(b"\x00" * 64, id="nuls"),
]


def pem_mutations(pem: bytes) -> st.SearchStrategy[bytes]:
    """`pem` with its framing or its DER body damaged (flips, cuts, insertions), re-framed."""
    lines = pem.strip().split(b"\n")
    head, body, tail = lines[0], base64.b64decode(b"".join(lines[1:-1])), lines[-1]

    @st.composite
    def mutate(draw):
        if draw(st.booleans()):  # break the framing or the base64
            out = bytearray(pem)
            for _ in range(draw(st.integers(1, 3))):
                at = draw(st.integers(0, len(out) - 1))
                out[at] = draw(st.integers(0, 255))
            return bytes(out)
        der = bytearray(body)
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(der) - 1))
            action = draw(st.sampled_from(["flip", "cut", "insert"]))
            if action == "flip":
                der[at] ^= draw(st.integers(1, 255))
            elif action == "cut":
                del der[at:at + draw(st.integers(1, 16))]
            else:
                der[at:at] = draw(st.binary(min_size=1, max_size=8))
        return head + b"\n" + base64.encodebytes(bytes(der)) + tail + b"\n"

    return mutate()


HOSTILE = st.one_of(st.binary(max_size=300), pem_mutations(GOOD_CSR), pem_mutations(GOOD_CERT))


def _only_pki_errors(fn, data):
    try:
        return fn(data)
    except PkiError as exc:
        assert str(exc)
        return None


@examples(150)
@given(data=HOSTILE)
def test_parsers_raise_only_pki_errors(data):
    _only_pki_errors(load_csr, data)
    cert = _only_pki_errors(load_cert, data)
    if cert is not None:
        _only_pki_errors(identity_of, cert)
    if _only_pki_errors(sign, data) is not None:
        assert data.startswith(b"-----BEGIN CERTIFICATE REQUEST")


@pytest.mark.parametrize("csr", ODD_CSRS)
def test_odd_csrs_in_process(csr):
    _only_pki_errors(sign, csr)


@pytest.mark.parametrize("subject", [
    [], [x509.NameAttribute(NameOID.COMMON_NAME, "n1")],
    [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "admin")],
    [x509.NameAttribute(NameOID.COMMON_NAME, "é" * 30),
     x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "node"),
     x509.NameAttribute(NameOID.ORGANIZATION_NAME, "\x00")],
])
def test_identity_of_foreign_certificates(subject):
    _only_pki_errors(identity_of, load_cert(_self_signed(subject)))


def _join(server, channel, token: str, csr: bytes):
    before = state(server.store)
    payload = api_pb2.JoinRequest(token=token, node="fzj", csr=csr).SerializeToString()
    reply = raw_unary(channel, "Agent", "Join", payload)
    outcome_is_clean(reply, server.store, before, f"Join with {csr[:60]!r}")
    assert_alive(channel)
    return reply


@pytest.fixture(scope="module")
def anonymous(server):
    from ccattler.engine.api.client import Client

    with Client(server.context(cert=None, key=None), anonymous=True) as client:
        yield client


@pytest.fixture(scope="module")
def node(server, tmp_path_factory):
    client, _ = join(server, tmp_path_factory.mktemp("node"), "fzc")
    with client:
        yield client


@examples(40)
@given(csr=st.one_of(HOSTILE, st.sampled_from([p.values[0] for p in ODD_CSRS])))
def test_join_with_a_bad_csr_spends_no_token(server, anonymous, csr):
    token, record = create_token(server.store, "join", 3600)
    reply = _join(server, anonymous.channel, token, csr)  # refused: the store, token included, unchanged
    if isinstance(reply, bytes):  # a CSR the CA accepts (an EC key): the token is spent, as designed
        assert server.store.get(f"auth/token/{record.id}") is None


@examples(40)
@given(csr=st.one_of(HOSTILE, st.sampled_from([p.values[0] for p in ODD_CSRS])),
       method=st.sampled_from(["RenewCert", "IssueIdentity"]))
def test_node_certificate_calls_with_bad_csrs(server, node, csr, method):
    request = (api_pb2.CsrRequest(csr=csr) if method == "RenewCert"
               else api_pb2.IdentityRequest(instance="default/web-1", csr=csr))
    before = state(server.store)
    reply = raw_unary(node.channel, "Agent", method, request.SerializeToString())
    outcome_is_clean(reply, server.store, before, f"{method} with {csr[:60]!r}")
    assert_alive(node.channel)


#: Found by the fuzzer (a random run): a certificate with its key-usage extension twice.
FOUND_CERTS = [
    b"-----BEGIN CERTIFICATE-----\n"
    b"MIIBaTCCARCgAwIBAgITF/p7DNXwwpR9u3sM1pfNio9l+zAKBggqhkjOPQQDAjASMRAwDgYDVQQD\n"
    b"DAdmdXp6LWNhMB4XDTI2MTIwMzEzMjgxNVoXDTM2MTEzMDEzMzMxNVowEjEQMA4GA1UEAwwHZnV6\n"
    b"ei1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGW/PK4iNJ6AePgZQYPHxZ7FEOxpa8vpUiZQ\n"
    b"LgssGWUZXGaymv67ZSh2IA90pbs31SDc03Pc+3Q8IZ7lEfydtSujRTBDMBIGA1UdEwEB/wQIMAYB\n"
    b"Af8CAQAwDgYDVR0PAQH/BAQDAgGGMB0GA1UdDwQWBBSUyeKwad5EghHdxW6tvpWJb34f3zAKBggq\n"
    b"hkjOPQQDAgNHADBEAiAnVlSMF8LslJESHxk1NP1SMcPsXe58aB4HX0N+p0bN8gIgCZM8JtV528QT\n"
    b"QAZMtqUAldqlTV/82uoLr/nGVap3pOQ=\n-----END CERTIFICATE-----\n",
]


@pytest.mark.parametrize("pem", FOUND_CERTS)
def test_found_certificates(pem):
    with pytest.raises(PkiError):
        identity_of(load_cert(pem))
