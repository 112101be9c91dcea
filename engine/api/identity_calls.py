"""`IssueIdentity` of ccattler.v1.Agent, mixed into `AgentService`: a node's agent asks for the
X.509-SVID of an instance placed on it, with a CSR it made (the key never leaves the node).

Refused: an instance not placed on the calling node (PERMISSION_DENIED, audited like every denial),
a CSR that is malformed or asks for anything but exactly the instance's SPIFFE id
(INVALID_ARGUMENT). Knob: `identity_lifetime` (1 h; `cca server --identity-ttl`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from ccattler.engine.api.calls import Call
from ccattler.engine.api.errors import BadRequest
from ccattler.engine.api.gen.ccattler.v1 import api_pb2
from ccattler.engine.pki import WORKLOAD_LIFETIME, CertificateAuthority, PkiError, cert_pem
from ccattler.engine.pki.svid import check_identity_csr, issue_svid, spiffe_id


def identity_summary(request: Any) -> str:
    """The audit record's object: `identity of instance shop/web-1`."""
    return f"identity of instance {request.instance or '?'}"


class IdentityCalls:
    """Needs `ca`, `_node(call)`, `_own_instance(node, ref)` and `_service_of(tenant, instance)`
    from the service (engine/api/agent.py)."""

    ca: CertificateAuthority
    #: How long an identity is valid; agents rotate at 2/3 of it (agent/identity.py).
    identity_lifetime: dt.timedelta = WORKLOAD_LIFETIME
    _node: Callable[[Call], str]
    _own_instance: Callable[[str, str], tuple[str, str]]
    _service_of: Callable[[str, str], str]

    def IssueIdentity(self, request: api_pb2.IdentityRequest, call: Call) -> api_pb2.WorkloadIdentity:
        node = self._node(call)
        tenant, instance = self._own_instance(node, request.instance)  # placed here, or Forbidden
        identity = spiffe_id(tenant, self._service_of(tenant, instance))
        try:
            key = check_identity_csr(request.csr, identity)
        except PkiError as exc:
            raise BadRequest(f"identity of {tenant}/{instance}: {exc}") from None
        cert = issue_svid(self.ca, key, identity, self.identity_lifetime)
        return api_pb2.WorkloadIdentity(cert=cert_pem(cert), bundle=cert_pem(self.ca.cert),
                                        spiffe_id=identity, expires=cert.not_valid_after_utc.timestamp())
