"""Ground an operator policy over a one-of-everything fixture in a child process, with a time limit.

Grounding cannot be interrupted inside the server (a policy such as `p(X+1) :- p(X).` never
finishes), so `cca policy apply` tries it here first: `probe(name, text)` runs
`python -m ccattler.engine.admission.probe NAME` with the policy on stdin and gives up after
`PROBE_SECONDS`.
"""

from __future__ import annotations

import subprocess
import sys

from ccattler.engine.admission.model import ObjectRef, PolicyError, Principal
from ccattler.engine.admission.vocabulary import (
    Facts,
    Request,
    add_auth,
    add_quota,
    add_requests,
    add_subject,
)
from ccattler.engine.solve import Const, LogicError, Session, SolveOptions, program_from_text

PROBE_SECONDS = 10.0

_SERVICE = {
    "kind": "service", "tenant": "shop", "name": "web", "image": "registry.local:5000/web:1.0",
    "instances": 2, "expose": [{"port": 8080, "protocol": "tcp", "external": True}],
    "resources": {"cpu": 250, "memory": 128 * 2**20}, "env": {"MODE": "prod"}, "stateful": True,
    "secrets": [{"name": "shop/db.password"}], "volumes": [{"name": "shop/data"}],
    "owner": "shop", "tags": {"team": "shop"},
}
_AUTH = {
    "desired/role/dev": {"name": "dev", "allow": ["service.update"], "scopes": ["shop"]},
    "desired/grant/g": {"role": "dev", "to": "user", "subject": "sample"},
    "desired/group/shop/ops": {"tenant": "shop", "name": "ops", "type": "auth", "members": ["sample"]},
    "desired/policy/p": {"name": "p", "allow": ["service.update"],
                         "when": [{"attr": "subject.team", "op": "in", "operand": ["shop"]},
                                  {"attr": "subject.team", "op": "==", "operand": "resource.team"}]},
}


def sample_facts() -> Facts:
    """At least one fact of every vocabulary predicate, built by the same code as real requests."""
    facts = Facts()
    add_subject(facts, Principal("sample", "user", team="shop", groups=("ops",)))
    ref = ObjectRef("service", "shop", "web", "desired/service/shop/web")
    add_requests(facts, [Request("update", "service", "shop/web", ref, _SERVICE, _SERVICE)])
    add_auth(facts, _AUTH)
    docs = {"desired/tenant/shop": {"quota": {"cpu": 1000, "storage": 2**30}},
            ref.key: _SERVICE, "desired/volume/shop/data": {"name": "data", "size": 2**30}}
    add_quota(facts, ["shop"], docs, docs)
    facts.add("image_digest", "shop/web", "sha256:0")
    facts.add("confers", "dev", Const("service"), Const("update"), "shop")
    facts.add("scope_path", "shop", "shop")
    return facts


def probe(name: str, text: str) -> None:
    """Raise `PolicyError` unless `text` grounds and solves over the fixture in time."""
    command = [sys.executable, "-m", "ccattler.engine.admission.probe", name]
    try:
        done = subprocess.run(command, input=text, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        raise PolicyError(
            f"policy {name} is not valid:\n{name}.lp: error: grounding over a one-service fixture did not "
            f"finish in {PROBE_SECONDS:g} s (unbounded recursion, e.g. `p(X+1) :- p(X).`?)"
        ) from None
    if done.returncode != 0:
        detail = done.stdout.strip() or (done.stderr.strip().splitlines() or ["the probe failed"])[-1]
        raise PolicyError(f"policy {name} is not valid:\n{detail}")


def main() -> int:
    name, text = sys.argv[1], sys.stdin.read()
    try:
        session = Session(program_from_text(f"lp/{name}", text, label=f"{name}.lp"),
                          SolveOptions(conflicts=10_000, wall_seconds=PROBE_SECONDS, optimize=False))
        facts = sample_facts()
        session.add_facts(facts.select(facts.by_signature))
        session.ground()
        session.solve()
    except LogicError as exc:
        # The bridge labels parse messages only; grounding messages still say <block>.
        print(str(exc).replace("<block>", f"{name}.lp"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
