"""Helpers of the run that freeze or unfreeze a model's parameters.

deep-person-reid's `open_specified_layers(model, open_layers)` and `open_all_layers(model)`
(torchreid/utils/torchtools.py) set `p.requires_grad` over `module.parameters()`; the
engine calls them at the start of each epoch, long after the model was wrapped. AM230
names such a change where training runs it (`Config.project_freezers`). Read with `ast`
(analysis/freezing.py): a function counts when it freezes or opens a part of a model;
`open_all_layers`, which opens the whole model, does not.
"""

from __future__ import annotations

import ast

from migrator.analysis.freezing import changes_part_requires_grad
from migrator.project.index import FileIndex, trees_mentioning


def freezer_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run: its calls of another file's functions that change which
    parameters need a gradient, as spelled there."""
    freezers = {
        (path, node.name)
        for path, tree, _ in trees_mentioning(sources, files, (b"requires_grad",))
        for node in tree.body if isinstance(node, ast.FunctionDef) and changes_part_requires_grad(node)
    }
    out: dict[str, set[str]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target in freezers and call.target[0] != path:
                out.setdefault(path, set()).add(call.spelling)
    return {path: tuple(sorted(calls)) for path, calls in out.items()}
