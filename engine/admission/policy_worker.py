"""A policy worker: the only process where operator `.lp` code runs at admission time.

Started by policy_pool.py as `python -m ccattler.engine.admission.policy_worker MEMORY_BYTES`, it
caps its own address space (RLIMIT_AS), dies with its parent (PR_SET_PDEATHSIG), then answers
framed requests (policy_wire.py) on stdin/stdout, one at a time:

- `{"op": "reads", "name", "text"}` → `{"reads": [[pred, arity], …]}`: what the policy reads, so
  the server builds only those facts without parsing operator text itself;
- `{"op": "eval", "name", "text", "facts", "seconds", "conflicts", "max_atoms"}` → first
  `{"phase": "grounded"}` once grounding is done, then `{"symbols": […]}` (its deny/warn/message/
  set_default atoms) or `{"error": kind, "message": …}`;
- `{"op": "netpolicy", "name", "extensions": [[label, text], …], "facts", "seconds", "conflicts",
  "max_atoms"}` → the same two replies for rules/netpolicy.lp loaded with operator netpolicy
  extensions (engine/netpolicy/isolated.py); the answer is `{"policy": …}`, decoded here and sent
  compact (`isolated.policy_to_wire`).

Grounding cannot be interrupted here, so the server's deadline kills this process when it hangs;
solving stops itself at `seconds` or `conflicts`. After a memory error the worker exits (its heap
is no longer trustworthy) and the pool starts another.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal
import sys
from typing import Any, BinaryIO

#: The largest request a worker accepts (facts of one request, plus the policy text).
MAX_REQUEST_BYTES = 256 * 1024 * 1024
_FORBIDDEN = re.compile(r"#include|#script")


def _limit_self(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:  # Linux: die with the server even while stuck in grounding (stdin EOF is never read then)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        sys.exit(0)


def _is_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "bad_alloc" in str(exc) or "std::bad" in str(exc)


def _evaluate(request: dict[str, Any], out: BinaryIO) -> dict[str, Any]:
    from ccattler.engine.admission.evaluate import POLICY_OUTPUTS, SHOW_OUTPUTS
    from ccattler.engine.admission.policy_wire import decode_symbol, encode_symbol, write_frame
    from ccattler.engine.solve import LogicError, Session, SolveOptions, load_program, program_from_text

    name = request["name"]
    netpolicy = request.get("op") == "netpolicy"
    texts = [(str(label), str(body)) for label, body in request["extensions"]] if netpolicy \
        else [(f"{name}.lp", request["text"])]
    for label, text in texts:
        if (found := _FORBIDDEN.search(text)) is not None:
            return {"error": "logic", "message": f"{label}: error: {found[0]} is not allowed in a policy"}
    options = SolveOptions(conflicts=request["conflicts"], wall_seconds=request["seconds"], optimize=False)
    try:
        if netpolicy:
            session = Session(load_program("netpolicy").with_texts(texts), options)
        else:
            program = program_from_text(f"lp/{name}", texts[0][1], label=f"{name}.lp")
            session = Session(program.with_texts([("admission outputs", SHOW_OUTPUTS)]), options)
        session.add_facts(decode_symbol(tree) for tree in request["facts"])
        session.ground()
        write_frame(out, {"phase": "grounded", "seconds": session.ground_seconds})
        result = session.solve()
    except LogicError as exc:
        if _is_memory(exc):
            return {"error": "memory", "exit": True}
        return {"error": "logic", "message": str(exc).replace("<block>", f"{name}.lp")}
    except (MemoryError, RuntimeError) as exc:
        if _is_memory(exc):
            return {"error": "memory", "exit": True}
        return {"error": "logic", "message": f"{name}.lp: error: {exc}"}
    if result.satisfiable is None:
        return {"error": "solving", "timed_out": result.timed_out}
    if result.satisfiable is False:
        return {"error": "unsatisfiable"}
    outputs = set(POLICY_OUTPUTS)
    symbols = list(result.symbols) if netpolicy else \
        [s for s in result.symbols if (s.name, len(s.arguments)) in outputs]
    if len(symbols) > request["max_atoms"]:
        return {"error": "output", "count": len(symbols)}
    if netpolicy:
        from ccattler.engine.netpolicy.evaluate import decode_policy
        from ccattler.engine.netpolicy.isolated import policy_to_wire

        return {"policy": policy_to_wire(decode_policy(symbols))}
    memo: dict[Any, Any] = {}
    return {"symbols": [encode_symbol(s, memo) for s in symbols],
            "ground_seconds": session.ground_seconds, "solve_seconds": result.solve_seconds}


def _reads(request: dict[str, Any]) -> dict[str, Any]:
    from ccattler.engine.admission.signatures import signatures

    try:
        return {"reads": sorted([list(s) for s in signatures(request["text"]).used])}
    except (RuntimeError, RecursionError, MemoryError):
        return {"reads": []}  # does not parse: evaluating it reports why


def main() -> int:
    _limit_self(int(sys.argv[1]))
    # The protocol gets its own descriptor; anything clingo or Python prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    import ccattler.engine.admission.evaluate  # noqa: F401 - pay the imports before "ready"
    from ccattler.engine.admission.policy_wire import WireError, read_frame, write_frame

    write_frame(out, {"ready": os.getpid()})
    stdin = sys.stdin.buffer
    while True:
        try:
            request = read_frame(stdin, MAX_REQUEST_BYTES)
        except WireError:
            return 0  # the server closed the pipe (or sent garbage): nothing more to do
        try:
            reply = _reads(request) if request.get("op") == "reads" else _evaluate(request, out)
        except (KeyError, TypeError, WireError) as exc:
            reply = {"error": "protocol", "message": f"bad request: {type(exc).__name__}"}
        except MemoryError:
            reply = {"error": "memory", "exit": True}
        write_frame(out, reply)
        if reply.get("exit"):
            return 3


if __name__ == "__main__":
    sys.exit(main())
