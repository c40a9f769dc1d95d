"""Model classes of one file of the run, built in another, whose parameters get no gradient.

`model.py` defines `EntityModel` holding `self.bert = transformers.BertModel.from_pretrained(...)`
and reads only its hidden states (or `self.base = torchvision.models.resnet50(...)` and
calls only its layers); `train.py` builds `model.EntityModel(...)` and creates
the Accelerator. The training file is migrated with `Config.project_unused` naming that
call, so its Accelerator gets `find_unused_parameters=True` and AM221 says why at the
call (analysis/ddp_options.py does the reading, here and for one file alone).
"""

from __future__ import annotations

import os

from migrator.analysis.unused_layers import may_hold_one
from migrator.project.index import FileIndex

# Only a file that names transformers or torchvision can hold one of their models (a
# layer built and never used: unused_layers.may_hold_one looks first).
_MARKS = (b"transformers", b"torchvision")


def unused_models(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each file of the run that builds such a model: (the call as spelled there,
    what is unused, as ddp_options.describe writes it), as Config.project_unused takes them."""
    from migrator.analysis.ddp_options import describe

    targets = {c.target for f in files.values() for c in f.calls if c.target[0] != f.path}
    targets |= {m for t in list(targets) for m in _made_by(files, t)}
    found: dict[tuple[str, str], object] = {}  # (file, class) -> its first unused part
    for path in sorted({t[0] for t in targets}):
        data = sources.get(path, b"")
        if any(mark in data for mark in _MARKS) or may_hold_one(data):
            for unused in _unused_parts(sources[path]):
                found.setdefault((path, unused.owner), unused)
    out = {}
    for path, f in files.items():
        calls = set()
        for c in f.calls:
            built = [t for t in [c.target, *_made_by(files, c.target)] if t in found and t[0] != path]
            if built and c.target[0] != path:  # a class, or a factory of the run that makes one (`models.create(arch)`)
                where = os.path.relpath(built[0][0], os.path.dirname(path) or os.curdir)
                calls.add((c.spelling, describe(found[built[0]], where)))
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def _made_by(files: dict[str, FileIndex], target: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """The classes a factory of the run returns an instance of (Function.makes)."""
    owner = files.get(target[0])
    function = owner.functions.get(target[1]) if owner is not None else None
    return function.makes if function is not None and not function.is_class else ()


def _unused_parts(data: bytes) -> list:
    import libcst as cst

    from migrator.analysis.collect import collect, node_tables
    from migrator.analysis.ddp_options import unused_poolers
    from migrator.analysis.unused_heads import unused_heads
    from migrator.analysis.unused_layers import unused_layers

    try:
        module = cst.parse_module(data)
    except (cst.ParserSyntaxError, UnicodeDecodeError, LookupError, SyntaxError):
        return []
    parents = node_tables(module).parents
    facts = collect(module)
    return [
        *unused_poolers(facts, parents.get, built_elsewhere=True), *unused_heads(facts, parents.get, built_elsewhere=True),
        *unused_layers(facts, module, built_elsewhere=True),
    ]
