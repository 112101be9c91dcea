"""The cluster certificate authority: creates the CA and issues server, client, node and workload
certificates (ECDSA P-256) from public keys or CSRs.

Lifetimes are the module constants (`ADMIN_LIFETIME`, `NODE_LIFETIME`, `WORKLOAD_LIFETIME`); the
subject says who a client is: CN = name, OU = kind (admin, node, user, workload), O = groups.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ccattler.engine.facts import CcaError

CA_LIFETIME = dt.timedelta(days=3650)
SERVER_LIFETIME = dt.timedelta(days=365)
ADMIN_LIFETIME = dt.timedelta(days=365)
NODE_LIFETIME = dt.timedelta(hours=24)
WORKLOAD_LIFETIME = dt.timedelta(hours=1)
#: Certificates start being valid a little in the past so small clock skew does not reject them.
_BACKDATE = dt.timedelta(minutes=5)


class PkiError(CcaError):
    """A certificate, key or CSR is malformed, foreign or expired."""


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise PkiError(f"not a PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError("private key is not an ECDSA key")
    return key


def load_cert(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except (ValueError, x509.InvalidVersion) as exc:  # InvalidVersion is no ValueError (tests/fuzz)
        raise PkiError(f"not a PEM certificate: {exc}") from None


def make_csr(key: ec.EllipticCurvePrivateKey, name: str) -> bytes:
    """A CSR for `name` (the node or workload asks; its private key stays with it)."""
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM)


def load_csr(pem: bytes) -> x509.CertificateSigningRequest:
    try:
        csr = x509.load_pem_x509_csr(pem)
    except (ValueError, x509.InvalidVersion) as exc:  # InvalidVersion is no ValueError (tests/fuzz)
        raise PkiError(f"not a PEM certificate signing request: {exc}") from None
    try:  # parsed lazily: a damaged key or an unknown algorithm shows only here (found by tests/fuzz)
        csr.public_key()
        valid = csr.is_signature_valid
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise PkiError(f"the CSR's public key or signature cannot be read: {exc}") from None
    if not valid:
        raise PkiError("the CSR's signature does not match its public key")
    return csr


def csr_key(pem: bytes) -> ec.EllipticCurvePublicKey:
    """The public key of a CSR the CA will sign (`PkiError` for anything it would refuse): check
    it before spending anything on the request, such as a single-use join token."""
    public_key = load_csr(pem).public_key()
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        raise PkiError("the CSR's key must be an ECDSA key")
    return public_key


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a client certificate names: CN, OU (kind) and O (groups)."""

    name: str
    kind: str
    groups: tuple[str, ...] = ()
    spiffe_id: str | None = None


def identity_of(cert: x509.Certificate) -> Identity:
    try:  # subject and extensions are parsed lazily: damage shows here (found by tests/fuzz)
        return _identity(cert)
    except (ValueError, TypeError, UnsupportedAlgorithm, x509.DuplicateExtension,
            x509.UnsupportedGeneralNameType) as exc:
        raise PkiError(f"certificate cannot be read: {exc}") from None


def _identity(cert: x509.Certificate) -> Identity:
    subject = cert.subject
    cn = [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    ou = [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)]
    groups = tuple(str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    spiffe = None
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        uris = [u for u in sans.get_values_for_type(x509.UniformResourceIdentifier)
                if u.startswith("spiffe://")]
        spiffe = uris[0] if uris else None
    except x509.ExtensionNotFound:
        pass
    if not cn or not ou:
        raise PkiError("client certificate has no CN or OU: it was not issued by cca")
    return Identity(str(cn[0]), str(ou[0]), groups, spiffe)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """The cluster CA: its certificate and private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, name: str = "ccattler-ca") -> CertificateAuthority:
        key = new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + CA_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert: bytes, key: bytes) -> CertificateAuthority:
        return cls(load_cert(cert), load_key(key))

    def issue(
        self,
        public_key: ec.EllipticCurvePublicKey,
        *,
        name: str,
        kind: str,
        lifetime: dt.timedelta,
        groups: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
        uris: tuple[str, ...] = (),
        server: bool = False,
        both: bool = False,
    ) -> x509.Certificate:
        """Sign a leaf certificate for `public_key`; `server` makes it a TLS server certificate,
        `both` a server and client one (a workload's X.509-SVID)."""
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, name),
                 x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, kind)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        now = dt.datetime.now(dt.UTC)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
        if both:
            usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + lifetime)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_encipherment=False, key_cert_sign=False,
                    crl_sign=False, content_commitment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        sans = [_san(h) for h in hosts] + [x509.UniformResourceIdentifier(u) for u in uris]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(self.key, hashes.SHA256())

    def sign_csr(self, csr_pem: bytes, **kwargs: object) -> x509.Certificate:
        """Issue a certificate for the CSR's key; the subject comes from `kwargs`, not the CSR."""
        return self.issue(csr_key(csr_pem), **kwargs)  # type: ignore[arg-type]

    def verify(self, cert: x509.Certificate, now: dt.datetime | None = None) -> None:
        """Raise `PkiError` unless `cert` was signed by this CA and is valid at `now`."""
        try:
            cert.verify_directly_issued_by(self.cert)
        except (ValueError, TypeError, InvalidSignature) as exc:
            raise PkiError(f"certificate {cert.subject.rfc4514_string()} was not issued by this CA") from exc
        now = now or dt.datetime.now(dt.UTC)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise PkiError(
                f"certificate {cert.subject.rfc4514_string()} expired or not yet valid "
                f"(valid {cert.not_valid_before_utc:%Y-%m-%d %H:%M} to "
                f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC)"
            )
