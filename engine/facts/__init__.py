"""The leaf vocabulary of CCattler: key schema, name rules and the base error type.

Everything in the cluster is a fact `(key, value)`; this package says what keys look like and who
owns each prefix (docs/facts.md has the document shapes). It imports nothing of ours, so the
language (`dsl`) and every engine module can depend on it.
"""

from ccattler.engine.facts.errors import CcaError, InvalidKey, InvalidValue
from ccattler.engine.facts.keys import (
    CLUSTER_KINDS,
    DEFAULT_TENANT,
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    NAMESPACED_KINDS,
    PREFIX_OWNERS,
    ServiceRef,
    check_key,
    check_value,
    desired_key,
    display_name,
    instance_key,
    owner_of,
    parse_service,
    placement_key,
)

__all__ = [
    "CLUSTER_KINDS",
    "DEFAULT_TENANT",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "NAMESPACED_KINDS",
    "PREFIX_OWNERS",
    "CcaError",
    "InvalidKey",
    "InvalidValue",
    "ServiceRef",
    "check_key",
    "check_value",
    "desired_key",
    "display_name",
    "instance_key",
    "owner_of",
    "parse_service",
    "placement_key",
]
