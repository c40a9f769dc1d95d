"""Calls that hand a model to code of another file reading its `.module`.

Conv-TasNet's train.py wraps the model in `nn.DataParallel` and hands it to `Solver(data,
model, optimizer, args)` of solver.py, which saves `self.model.module.serialize(...)`. A
migration of train.py alone removes the wrap and prepares the model: on N processes the
DDP wrapper has a `.module`, on one the plain model does not, and the solver fails there
(reader R1, seventeenth session). These calls let the verifier leave such a set-up as
written unless the other file is migrated with it (its call then passes the Accelerator).
"""

from __future__ import annotations

from migrator.project.index import FileIndex


def module_reader_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file: its calls of other files' functions and classes that read `.module`
    of a parameter the call hands something for; `spelling|flag` where the function reads
    it only when handed a true `flag` (`CheckpointIO|data_parallel`: a call that leaves
    `data_parallel=` out never reads it)."""
    out = {}
    for path, f in files.items():
        found = set()
        for call in f.calls:
            owner = files.get(call.target[0])
            function = owner.functions.get(call.target[1]) if owner else None
            if function is None or call.target[0] == path or not function.module_params:
                continue
            given = {param for param, name in zip(function.params, call.args) if name} | {k for k, name in call.keywords if name}
            if given & set(function.module_params) or call.has_star and any(p.startswith("**") for p in function.module_params):
                found.add("|".join((call.spelling, *function.module_flags)))
        if found:
            out[path] = tuple(sorted(found))
    return out
