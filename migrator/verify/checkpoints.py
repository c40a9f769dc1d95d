"""Checkpoints written before the migration still load after it, or a finding says why not.

A model wrapped in DataParallel or DistributedDataParallel by hand saves and loads state
dicts whose keys start with `module.`. After the migration the load goes into the plain
model (prepare() wraps it afterwards), so the user's existing checkpoints, and any the
script downloads, no longer match. The migration is kept; the finding says what to do.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import call_name, dotted, last

CODE = "AM920"
_WRAPS = {"DataParallel", "DistributedDataParallel"}


def check(pair: Pair) -> list[Problem]:
    if any(last(call_name(c)) in _WRAPS for c in pair.after.calls):
        return []
    return list(_loads_into_unwrapped(pair))


def _loads_into_unwrapped(pair: Pair) -> Iterator[Problem]:
    before = pair.before
    wrapped = {a.target for a in before.assigns if isinstance(a.value, ast.Call) and last(call_name(a.value)) in _WRAPS}
    for call in before.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "load_state_dict" and dotted(func.value) in wrapped:
            yield Problem(
                CODE, call.lineno, call.col_offset + 1,
                f"checkpoints saved by the wrapped `{dotted(func.value)}` have keys starting with `module.`; "
                "after the migration this load goes into the plain model, so old checkpoints no longer "
                "match: strip the prefix (`{k.removeprefix('module.'): v for k, v in state.items()}`)",
                blocking=False,
            )
            return
