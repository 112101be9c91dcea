"""Network policy: rules/netpolicy.lp over identities and rules, its controller and explanations.

The wing: `rules/netpolicy.lp` ↔ `engine/netpolicy/` ↔ `rules/tests/netpolicy_test.lp`.
`facts.py` turns a snapshot into typed facts, `evaluate.py` solves and decodes (`Policy`),
`controller.py` writes `derived/firewall/<node>`, `explain.py` answers `cca explain connection|service`.
"""

from ccattler.engine.netpolicy.evaluate import Allowed, Policy, evaluate
from ccattler.engine.netpolicy.explain import explain_connection, explain_service, parse_endpoint

__all__ = ["Allowed", "Policy", "evaluate", "explain_connection", "explain_service", "parse_endpoint"]
