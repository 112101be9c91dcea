"""Workload identities as X.509-SVIDs: the SPIFFE id of a service, the CSR a node agent makes for
one of its instances (the key stays on the node), the server's check of that CSR, and the
certificate the CA signs for it.

An SVID carries exactly one URI SAN, `spiffe://ccattler/<tenant>/<service>`, is a leaf (no CA),
and is good for both ends of a TLS connection (serverAuth and clientAuth), so two instances can
talk mutual TLS with nothing else. Its lifetime is the caller's (`WORKLOAD_LIFETIME`, 1 h, by
default; the API server's `identity_ttl` setting).
"""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ccattler.engine.pki.ca import CertificateAuthority, PkiError, load_csr

TRUST_DOMAIN = "ccattler"
#: Shortest and longest identity lifetimes a server may be set to (a short one is for tests).
LIFETIME_RANGE = (dt.timedelta(seconds=10), dt.timedelta(hours=24))


def spiffe_id(tenant: str, service: str) -> str:
    """`spiffe://ccattler/<tenant>/<service>`: the identity every instance of the service shares."""
    return f"spiffe://{TRUST_DOMAIN}/{tenant}/{service}"


def identity_csr(key: ec.EllipticCurvePrivateKey, identity: str) -> bytes:
    """A PEM CSR asking for `identity` as its only SAN (made on the node, with the node's key)."""
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _common_name(identity))]))
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity)]),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM)


def check_identity_csr(pem: bytes, identity: str) -> ec.EllipticCurvePublicKey:
    """The CSR's public key if the CSR is well-formed, self-signed, ECDSA and asks for exactly the
    SAN `identity`; else `PkiError` saying what is wrong."""
    if not pem:
        raise PkiError("the identity request carries no CSR")
    csr = load_csr(pem)
    key = csr.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise PkiError("the CSR's key must be an ECDSA key")
    try:
        sans = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        raise PkiError(f"the CSR asks for no SAN; it must ask for exactly {identity}") from None
    except ValueError as exc:  # an extension the parser cannot read
        raise PkiError(f"the CSR's extensions cannot be read: {exc}") from None
    asked = [_describe(name) for name in sans]
    if asked != [identity]:
        raise PkiError(f"the CSR asks for {', '.join(asked) or 'no SAN'}; this instance's identity is "
                       f"{identity} (exactly that one URI SAN)")
    return key


def _common_name(identity: str) -> str:
    """`tenant/service` for the subject (informational: the SAN is the identity); X.509 caps a CN at
    64 characters."""
    return identity.removeprefix(f"spiffe://{TRUST_DOMAIN}/")[:64]


def _describe(name: x509.GeneralName) -> str:
    if isinstance(name, x509.UniformResourceIdentifier):
        return name.value
    return f"{type(name).__name__} {name.value}"


def issue_svid(ca: CertificateAuthority, public_key: ec.EllipticCurvePublicKey, identity: str,
               lifetime: dt.timedelta) -> x509.Certificate:
    """The X.509-SVID for `identity` (CN = its path, OU = workload), valid `lifetime` from now."""
    return ca.issue(public_key, name=_common_name(identity), kind="workload", lifetime=lifetime,
                    uris=(identity,), both=True)


def svid_identity(cert: x509.Certificate) -> str | None:
    """The SPIFFE id an SVID names (its one `spiffe://` URI SAN), or None."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    uris = [u for u in sans.get_values_for_type(x509.UniformResourceIdentifier) if u.startswith("spiffe://")]
    return uris[0] if len(uris) == 1 else None
