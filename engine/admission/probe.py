"""Check an operator policy in a child process with hard limits before it goes live.

Operator code never runs first in the server: clingo can abort the whole process (a message cut
inside a UTF-8 character raises in a nothrow logger callback), and grounding cannot be interrupted
(`p(X+1) :- p(X).` never finishes). So `probe(name, text)` runs
`python -m ccattler.engine.admission.probe NAME` with the policy on stdin; the child limits its own
CPU time and memory (`resource.setrlimit`), parses, runs the static checks, then grounds and solves
over a fixture of `FIXTURE_COUNT` (3) of every vocabulary fact within the admission budget
(`policy_pool.PolicyLimits.seconds`, 2 s by default: a SIGALRM with its default action ends the
child, since grounding cannot be interrupted); the parent gives up after `PROBE_SECONDS` of wall
clock. A policy that cannot ground over three services within the budget would refuse real
requests at admission (`policy_budget`), so it is refused here instead. A child that dies (abort,
signal, limit) is reported as an error naming the policy, never raised.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys

from ccattler.engine.admission.model import ObjectRef, PolicyError, Principal
from ccattler.engine.admission.policy_pool import current_limits
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
#: Hard limits of the child: CPU seconds and address space.
PROBE_CPU_SECONDS = 10
PROBE_MEMORY_BYTES = 1 << 30
#: Solving over the fixture must finish within this many conflicts.
PROBE_CONFLICTS = 10_000
#: How many of each object the fixture holds: a join over N services grounds N^k rules, so one
#: of each hides exponential grounding that a real apply of a few services sets off.
FIXTURE_COUNT = 3

_NAMES = ("web", "api", "db", "cache", "queue")
_TENANTS = ("shop", "blog", "docs", "ops", "lab")


def _service(tenant: str, name: str, index: int) -> dict:
    return {
        "kind": "service", "tenant": tenant, "name": name, "image": f"registry.local:5000/{name}:1.{index}",
        "instances": 2 + index, "expose": [{"port": 8080 + index, "protocol": "tcp", "external": True}],
        "resources": {"cpu": 250, "memory": 128 * 2**20}, "env": {"MODE": "prod", "N": str(index)},
        "stateful": True, "secrets": [{"name": f"{tenant}/db.password"}],
        "volumes": [{"name": f"{tenant}/data"}], "owner": tenant, "tags": {"team": tenant, "tier": name},
    }


def _auth(count: int) -> dict:
    docs: dict = {}
    for i, tenant in enumerate(_TENANTS[:count]):
        docs[f"desired/role/dev{i}"] = {"name": f"dev{i}", "allow": ["service.update", "service.read"],
                                        "scopes": [tenant]}
        docs[f"desired/grant/g{i}"] = {"role": f"dev{i}", "to": "user", "subject": "sample"}
        docs[f"desired/group/{tenant}/ops"] = {"tenant": tenant, "name": "ops", "type": "auth",
                                               "members": ["sample", "other"]}
        docs[f"desired/policy/p{i}"] = {
            "name": f"p{i}", "allow": ["service.update"],
            "when": [{"attr": "subject.team", "op": "in", "operand": list(_TENANTS[:count])},
                     {"attr": "subject.team", "op": "==", "operand": "resource.team"}]}
    return docs


def sample_facts(count: int = FIXTURE_COUNT) -> Facts:
    """`count` facts (3 by default) of every vocabulary predicate, built by the same code as real
    requests: `count` tenants of `count` services each, updated in one request."""
    facts = Facts()
    tenants = _TENANTS[:count]
    add_subject(facts, Principal("sample", "user", team="shop", groups=("ops", "dev", "web")[:count]))
    requests, docs = [], {}
    for tenant in tenants:
        docs[f"desired/tenant/{tenant}"] = {"quota": {"cpu": 1000, "storage": 2**30}}
        docs[f"desired/volume/{tenant}/data"] = {"name": "data", "size": 2**30}
        for index, name in enumerate(_NAMES[:count]):
            ref = ObjectRef("service", tenant, name, f"desired/service/{tenant}/{name}")
            doc = _service(tenant, name, index)
            docs[ref.key] = doc
            requests.append(Request("update", "service", f"{tenant}/{name}", ref, doc, doc))
            facts.add("image_digest", f"{tenant}/{name}", f"sha256:{index}")
            facts.add("external_claim", f"{tenant}/{name}", 8080 + index, Const("tcp"))
            facts.add("shared_port", f"{tenant}/pod", f"{tenant}/{name}", 8080 + index, Const("tcp"))
        facts.add("shared_group", f"group:{tenant}/pod", f"{tenant}/pod")
        facts.add("scope_path", tenant, tenant)
    add_requests(facts, requests)
    add_auth(facts, _auth(count))
    add_quota(facts, list(tenants), docs, docs)
    for i, tenant in enumerate(tenants):
        for verb in ("update", "read", "create")[:count]:
            facts.add("confers", f"dev{i}", Const("service"), Const(verb), tenant)
    return facts


def _first_non_ascii(name: str, text: str) -> str:
    """`<name>.lp:line:col` of the first non-ASCII character, the usual cause of a clingo abort."""
    for index, char in enumerate(text):
        if ord(char) > 127:
            line = text.count("\n", 0, index) + 1
            column = index - (text.rfind("\n", 0, index) + 1) + 1
            return f"{name}.lp:{line}:{column}: error: non-ASCII character {char!r} (U+{ord(char):04X})"
    return f"{name}.lp: error"


def probe(name: str, text: str, program: str = "admission") -> None:
    """Raise `PolicyError` unless `text` parses, passes the static checks, grounds and solves over
    the fixture in a child process within its limits and the admission budget. `program="netpolicy"`
    runs a netpolicy extension's own checks (`netpolicy.extensions.validate_extension`) in the child."""
    budget = current_limits().seconds
    command = [sys.executable, "-m", "ccattler.engine.admission.probe", name,
               str(PROBE_CPU_SECONDS), str(PROBE_MEMORY_BYTES), repr(budget), program]
    fixture = f"a fixture of {FIXTURE_COUNT} of each fact ({FIXTURE_COUNT ** 2} services)"
    try:
        done = subprocess.run(
            command, input=text.encode("utf-8", "surrogateescape"), capture_output=True,
            timeout=PROBE_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise PolicyError(
            f"policy {name} is not valid:\n{name}.lp: error: checking it over {fixture} did not finish in "
            f"{PROBE_SECONDS:g} s (unbounded recursion, e.g. `p(X+1) :- p(X).`?)"
        ) from None
    stdout = done.stdout.decode("utf-8", "replace").strip()
    phase = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["checking"])[-1]
    if done.returncode == 0:
        return
    if done.returncode == 1 and stdout:
        raise PolicyError(f"policy {name} is not valid:\n{stdout}")
    if done.returncode == -signal.SIGALRM and phase in ("grounding", "solving"):
        raise PolicyError(
            f"policy {name} is not valid:\n{name}.lp: error: {phase} over {fixture} exceeded the "
            f"{budget:g} s {phase} time budget every admission gives a policy (grounding that grows "
            "exponentially with the number of services, e.g. a rule joining many `service(S)`?)"
        )
    # Killed by a signal (abort, CPU or memory limit) or crashed: the server itself is unharmed.
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
    raise PolicyError(
        f"policy {name} is not valid:\n{_first_non_ascii(name, text)}: the policy checker died ({how}; "
        f"limits {PROBE_CPU_SECONDS} s CPU, {PROBE_MEMORY_BYTES >> 20} MiB): clingo cannot handle this "
        "program (non-ASCII text, grounding or solving too large?)"
    )


def _phase(name: str) -> None:
    """Tell the parent which phase runs, should the budget's alarm end this process."""
    sys.stderr.write(name + "\n")
    sys.stderr.flush()


def _limit_self(cpu: int, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _netpolicy(name: str, text: str) -> int:
    from ccattler.engine.netpolicy.extensions import validate_extension

    try:
        validate_extension(name, text)
    except PolicyError as exc:
        print(str(exc).removeprefix(f"policy {name} is not valid:\n"))
        return 1
    return 0


def main() -> int:
    _limit_self(int(sys.argv[2]), int(sys.argv[3]))
    from ccattler.engine.admission.policies import static_errors

    name = sys.argv[1]
    raw = sys.stdin.buffer.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        print(f"{name}.lp:{line}:{column}: error: the policy is not valid UTF-8")
        return 1
    if sys.argv[5:] == ["netpolicy"]:
        return _netpolicy(name, text)
    try:
        budget = float(sys.argv[4])
        session = Session(program_from_text(f"lp/{name}", text, label=f"{name}.lp"),
                          SolveOptions(conflicts=PROBE_CONFLICTS, wall_seconds=budget, optimize=False))
        errors = static_errors(name, text)
        if errors:
            print("\n".join(errors))
            return 1
        facts = sample_facts()
        session.add_facts(facts.select(facts.by_signature))
        # The admission budget (a little grace lets solving stop itself and say so): past it the
        # default SIGALRM action ends this process even inside grounding.
        signal.setitimer(signal.ITIMER_REAL, budget + 0.5)
        _phase("grounding")
        session.ground()
        _phase("solving")
        result = session.solve()
        signal.setitimer(signal.ITIMER_REAL, 0)
        if result.satisfiable is None:
            limit = f"{budget:g} s" if result.timed_out else f"{PROBE_CONFLICTS} conflicts"
            print(f"{name}.lp: error: solving over a fixture of {FIXTURE_COUNT} of each fact did not finish "
                  f"within {limit}, the solving time budget every admission gives a policy (search that may "
                  "never end)")
            return 1
        if result.satisfiable is False:
            print(f"{name}.lp: error: the policy has no answer over a fixture of {FIXTURE_COUNT} of each fact"
                  " (an integrity constraint `:- …` holds): at admission an unsatisfiable policy refuses the "
                  "request; derive deny(Code, Args) instead")
            return 1
    except LogicError as exc:
        # The bridge labels parse messages only; grounding messages still say <block>.
        print(str(exc).replace("<block>", f"{name}.lp"))
        return 1
    except MemoryError:
        print(f"{name}.lp: error: grounding over a fixture of {FIXTURE_COUNT} of each fact needs more than "
              f"{int(sys.argv[3]) >> 20} MiB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
