"""A migrated script's processes are the launcher's (AM955).

A script that still starts workers itself (`mp.spawn`, `start_processes`) beside the
Accelerator runs N×N processes, each training with an Accelerator of its own; an address
or port picked by hand for the workers' rendezvous (`os.environ["MASTER_PORT"] = ...`)
points the launcher's processes at a store nobody serves. Reads only the text.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, dotted, last

CODE = "AM955"


_STARTS = {"spawn", "start_processes"}
_MASTER_ENV = {"MASTER_ADDR", "MASTER_PORT"}


def _multiprocessing_names(program: Program) -> set[str]:
    """How the migrated text spells torch.multiprocessing's process starters
    (`mp.spawn`, `torch.multiprocessing.spawn`, `spawn` imported from it)."""
    out = {f"torch.multiprocessing.{name}" for name in _STARTS}
    for node in program.nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.multiprocessing" and a.asname:
                    out |= {f"{a.asname}.{name}" for name in _STARTS}
        elif isinstance(node, ast.ImportFrom) and node.module in {"torch", "torch.multiprocessing"} and not node.level:
            for a in node.names:
                if node.module == "torch" and a.name == "multiprocessing":
                    out |= {f"{a.asname or a.name}.{name}" for name in _STARTS}
                elif node.module == "torch.multiprocessing" and a.name in _STARTS:
                    out.add(a.asname or a.name)
    return out


def _starts_processes(pair: Pair) -> Iterator[Problem]:
    """The Accelerator's processes are the launcher's: a script that still starts
    workers itself runs N×N of them, and an address or port picked by hand for their
    rendezvous points the launcher's processes at a store nobody serves."""
    after = pair.after
    starters = _multiprocessing_names(after)
    for call in after.calls:
        if call_name(call) in starters:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{call_name(call)}(...)` still starts processes beside the launcher's "
                "(each would run the training with an Accelerator of its own); every piece of the "
                "hand-made distribution must go or become the Accelerator's",
            )
    for node in after.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if (
                isinstance(target, ast.Subscript) and (dotted(target.value) or "").endswith("environ")
                and isinstance(target.slice, ast.Constant) and target.slice.value in _MASTER_ENV
                and not _default_only(after, node, target.slice.value)
            ):
                yield pair.at_after(
                    CODE, node,
                    f"left as written: the script still sets `{target.slice.value}` by hand; the launcher sets "
                    "the rendezvous for every process, and another one leaves them waiting for each other",
                )


def _default_only(program: Program, node: ast.AST, key: str) -> bool:
    """`if "MASTER_PORT" not in os.environ:` / `if not os.getenv("MASTER_PORT"):` above the
    assignment: a default for a run without a launcher, left alone under one."""
    return any(isinstance(a, ast.If) and repr(key)[1:-1] in ast.unparse(a.test) for a in program.ancestors(node))


def check(pair: Pair) -> list[Problem]:
    """Only where the migration creates an Accelerator (a script left alone keeps its own
    way of starting processes)."""
    made = lambda program: sum(last(call_name(c)) == "Accelerator" for c in program.calls)  # noqa: E731
    if made(pair.after) <= made(pair.before) and len(pair.after.prepares) <= len(pair.before.prepares):
        return []
    return list(_starts_processes(pair))
