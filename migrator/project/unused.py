"""Model classes of one file of the run, built in another, whose parameters get no gradient.

`model.py` defines `EntityModel` holding `self.bert = transformers.BertModel.from_pretrained(...)`
and reads only its hidden states; `train.py` builds `model.EntityModel(...)` and creates
the Accelerator. The training file is migrated with `Config.project_unused` naming that
call, so its Accelerator gets `find_unused_parameters=True` and AM221 says why at the
call (analysis/ddp_options.py does the reading, here and for one file alone).
"""

from __future__ import annotations

import os

from migrator.project.index import FileIndex

# Only a file that names transformers can hold one of its encoders.
_MARK = b"transformers"


def unused_models(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each file of the run that builds such a model: (the call as spelled there,
    `attribute family where`), as Config.project_unused takes them."""
    targets = {c.target for f in files.values() for c in f.calls if c.target[0] != f.path}
    found: dict[tuple[str, str], tuple[str, str]] = {}  # (file, class) -> (attribute, family)
    for path in sorted({t[0] for t in targets}):
        if _MARK in sources.get(path, b""):
            for owner, attribute, family in _poolers(sources[path]):
                found[(path, owner)] = (attribute, family)
    out = {}
    for path, f in files.items():
        calls = set()
        for c in f.calls:
            if c.target in found and c.target[0] != path:
                attribute, family = found[c.target]
                where = os.path.relpath(c.target[0], os.path.dirname(path) or os.curdir)
                calls.add((c.spelling, f"{attribute} {family} of `{c.target[1]}` in {where}"))
        if calls:
            out[path] = tuple(sorted(calls))
    return out


def _poolers(data: bytes) -> list[tuple[str, str, str]]:
    import libcst as cst

    from migrator.analysis.collect import collect, node_tables
    from migrator.analysis.ddp_options import unused_poolers

    try:
        module = cst.parse_module(data)
    except (cst.ParserSyntaxError, UnicodeDecodeError, LookupError, SyntaxError):
        return []
    parents = node_tables(module).parents
    return [(p.owner, p.attribute, p.family) for p in unused_poolers(collect(module), parents.get, built_elsewhere=True)]
