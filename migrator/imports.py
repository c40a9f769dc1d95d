"""Turn the import requests of accepted fixes into LibCST's add/remove-import passes."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from migrator.edits import Fix


def apply_imports(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    """Add requested imports once; drop requested ones only if nothing uses them now."""
    adds = {(i.module, i.name, i.alias) for f in fixes for i in f.add_imports}
    removes = {(i.module, i.name, i.alias) for f in fixes for i in f.remove_imports}
    if not adds and not removes:
        return module
    # Imported here, not at the top: libcst.codemod pulls in libcst.matchers, about half
    # of the migrator's start-up, and a --lint run (the pre-commit hook) never gets here.
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, ImportItem, RemoveImportsVisitor

    if adds:
        items = [ImportItem(m, obj_name=n, alias=a) for m, n, a in sorted(adds, key=str)]
        module = AddImportsVisitor(CodemodContext(), items).transform_module(module)
    if removes:
        module = RemoveImportsVisitor(CodemodContext(), sorted(removes, key=str)).transform_module(module)
    return module
