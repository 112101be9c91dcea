"""Check an operator policy in a child process with hard limits before it goes live.

Operator code never runs first in the server: clingo can abort the whole process (a message cut
inside a UTF-8 character raises in a nothrow logger callback), and grounding cannot be interrupted
(`p(X+1) :- p(X).` never finishes). So `probe(name, text)` runs
`python -m ccattler.engine.admission.probe NAME` with the policy on stdin; the child limits its own
CPU time and memory (`resource.setrlimit`), parses, runs the static checks, grounds over a
one-of-everything fixture and solves; the parent gives up after `PROBE_SECONDS` of wall clock.
A child that dies (abort, signal, limit) is reported as an error naming the policy, never raised.
"""

from __future__ import annotations

import resource
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
#: Hard limits of the child: CPU seconds and address space.
PROBE_CPU_SECONDS = 10
PROBE_MEMORY_BYTES = 1 << 30
#: Solving over the fixture must finish within this many conflicts.
PROBE_CONFLICTS = 10_000

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


def _first_non_ascii(name: str, text: str) -> str:
    """`<name>.lp:line:col` of the first non-ASCII character, the usual cause of a clingo abort."""
    for index, char in enumerate(text):
        if ord(char) > 127:
            line = text.count("\n", 0, index) + 1
            column = index - (text.rfind("\n", 0, index) + 1) + 1
            return f"{name}.lp:{line}:{column}: error: non-ASCII character {char!r} (U+{ord(char):04X})"
    return f"{name}.lp: error"


def probe(name: str, text: str) -> None:
    """Raise `PolicyError` unless `text` parses, passes the static checks, grounds and solves over
    the fixture in a child process within its limits."""
    command = [sys.executable, "-m", "ccattler.engine.admission.probe", name,
               str(PROBE_CPU_SECONDS), str(PROBE_MEMORY_BYTES)]
    try:
        done = subprocess.run(
            command, input=text.encode("utf-8", "surrogateescape"), capture_output=True,
            timeout=PROBE_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise PolicyError(
            f"policy {name} is not valid:\n{name}.lp: error: grounding over a one-service fixture did not "
            f"finish in {PROBE_SECONDS:g} s (unbounded recursion, e.g. `p(X+1) :- p(X).`?)"
        ) from None
    stdout = done.stdout.decode("utf-8", "replace").strip()
    if done.returncode == 0:
        return
    if done.returncode == 1 and stdout:
        raise PolicyError(f"policy {name} is not valid:\n{stdout}")
    # Killed by a signal (abort, CPU or memory limit) or crashed: the server itself is unharmed.
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
    raise PolicyError(
        f"policy {name} is not valid:\n{_first_non_ascii(name, text)}: the policy checker died ({how}; "
        f"limits {PROBE_CPU_SECONDS} s CPU, {PROBE_MEMORY_BYTES >> 20} MiB): clingo cannot handle this "
        "program (non-ASCII text, grounding or solving too large?)"
    )


def _limit_self(cpu: int, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


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
    try:
        session = Session(program_from_text(f"lp/{name}", text, label=f"{name}.lp"),
                          SolveOptions(conflicts=PROBE_CONFLICTS, wall_seconds=PROBE_SECONDS, optimize=False))
        errors = static_errors(name, text)
        if errors:
            print("\n".join(errors))
            return 1
        facts = sample_facts()
        session.add_facts(facts.select(facts.by_signature))
        session.ground()
        result = session.solve()
        if result.satisfiable is None:
            print(f"{name}.lp: error: solving over a one-service fixture did not finish within "
                  f"{PROBE_CONFLICTS} conflicts (search that may never end)")
            return 1
    except LogicError as exc:
        # The bridge labels parse messages only; grounding messages still say <block>.
        print(str(exc).replace("<block>", f"{name}.lp"))
        return 1
    except MemoryError:
        print(f"{name}.lp: error: grounding over a one-service fixture needs more than "
              f"{int(sys.argv[3]) >> 20} MiB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
