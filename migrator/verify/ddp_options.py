"""AM918: the options of a hand-made DDP wrap the migration removes reach the Accelerator.

`DistributedDataParallel(model, find_unused_parameters=True)` changes what training does;
prepare() wraps with DDP's defaults unless the Accelerator is given
`kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]`. An option
of the removed wrap that no `DistributedDataParallelKwargs(...)` of the result carries
with the same value is said beside the migration (a note: the script still runs, and the
reader decides whether training depended on it).
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, last

# What DistributedDataParallelKwargs takes, with DDP's defaults.
DDP_OPTIONS = {
    "dim": 0, "broadcast_buffers": True, "bucket_cap_mb": 25, "find_unused_parameters": False,
    "check_reduction": False, "gradient_as_bucket_view": False, "static_graph": False,
}
_WRAP = "DistributedDataParallel"
_HANDLER = "DistributedDataParallelKwargs"
_WHY = {
    "find_unused_parameters": " (a model with parameters that get no gradient stops with DDP's error on N processes)",
    "broadcast_buffers": " (with the default, rank 0's buffers, e.g. BatchNorm statistics, are copied to all at every forward)",
}


def ddp_options_dropped(pair: Pair) -> Iterator[Problem]:
    before_wraps = _named(pair.before, _WRAP)
    if _wraps(pair.after, _named(pair.after, _WRAP)):
        return
    carried = {
        (kw.arg, ast.unparse(kw.value))
        for call in pair.after.calls if last(call_name(call)) in _named(pair.after, _HANDLER)
        for kw in call.keywords
    }
    for call in _wraps(pair.before, before_wraps):
        for kw in call.keywords:
            if kw.arg is None:
                yield Problem(
                    "AM918", kw.value.lineno, kw.value.col_offset + 1,
                    f"the DDP wrap the migration removes took `**{ast.unparse(kw.value)}`, whose options the "
                    f"Accelerator is not given: pass those DDP takes as `kwargs_handlers=[{_HANDLER}(...)]`",
                    blocking=False,
                )
            if kw.arg not in DDP_OPTIONS:
                continue
            default = DDP_OPTIONS[kw.arg]
            if isinstance(kw.value, ast.Constant) and kw.value.value == default:
                continue
            value = ast.unparse(kw.value)
            if (kw.arg, value) in carried or (kw.arg == "find_unused_parameters" and (kw.arg, "True") in carried):
                continue
            yield Problem(
                "AM918", kw.value.lineno, kw.value.col_offset + 1,
                f"the DDP wrap the migration removes set `{kw.arg}={value}`, and the Accelerator is not given it "
                f"(`kwargs_handlers=[{_HANDLER}({kw.arg}=...)]`): prepare() wraps with DDP's default, so check "
                f"that training does not depend on it{_WHY.get(kw.arg, '')}",
                blocking=False,
            )


def _named(program: Program, name: str) -> set[str]:
    """How the program spells `name`: itself, and the aliases it is imported under."""
    out = {name}
    for node in program.nodes:
        if isinstance(node, ast.ImportFrom):
            out |= {a.asname for a in node.names if a.name == name and a.asname}
    return out


def _wraps(program: Program, names: set[str]) -> list[ast.Call]:
    return [c for c in program.calls if last(call_name(c)) in names]
