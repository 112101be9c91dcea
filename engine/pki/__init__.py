"""The cluster PKI: the CA and its certificates (`ca`), and the files `cca init` writes (`cluster`)."""

from ccattler.engine.pki.ca import (
    ADMIN_LIFETIME,
    NODE_LIFETIME,
    WORKLOAD_LIFETIME,
    CertificateAuthority,
    Identity,
    PkiError,
    cert_pem,
    identity_of,
    key_pem,
    load_cert,
    load_key,
    make_csr,
    new_key,
)
from ccattler.engine.pki.cluster import ADMIN_GROUP, ClusterFiles, init_cluster, split_address

__all__ = [
    "ADMIN_GROUP",
    "ADMIN_LIFETIME",
    "NODE_LIFETIME",
    "WORKLOAD_LIFETIME",
    "CertificateAuthority",
    "ClusterFiles",
    "Identity",
    "PkiError",
    "cert_pem",
    "identity_of",
    "init_cluster",
    "key_pem",
    "load_cert",
    "load_key",
    "make_csr",
    "new_key",
    "split_address",
]
