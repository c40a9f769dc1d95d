"""migrator/imports.py: an import a fix no longer needs goes, with the `try:` that only
guarded it; anything still read, or guarded otherwise, stays."""

from __future__ import annotations

import libcst as cst

from migrator.edits import Fix, ImportChange
from migrator.imports import apply_imports

_DROP_AMP = Fix((), remove_imports=(ImportChange("apex", "amp", None),))


def _apply(code: str) -> str:
    return apply_imports(cst.parse_module(code), [_DROP_AMP]).code


def test_a_try_that_only_guarded_the_import_goes_whole() -> None:
    code = "import torch\ntry:\n    from apex import amp\nexcept ImportError:\n    amp = None\nx = 1\n"
    assert _apply(code) == "import torch\nx = 1\n"
    raising = "x = 1\ntry:\n    from apex import amp\nexcept (ImportError, ModuleNotFoundError):\n    raise ImportError('install apex')\n"
    assert _apply(raising) == "x = 1\n"


def test_the_import_stays_where_it_is_still_read() -> None:
    code = "try:\n    from apex import amp\nexcept ImportError:\n    amp = None\nif amp is not None:\n    pass\n"
    assert _apply(code) == code


def test_a_try_guarding_more_than_imports_stays() -> None:
    code = "try:\n    from apex import amp\n    HAVE_APEX = True\nexcept ImportError:\n    HAVE_APEX = False\n"
    assert _apply(code) == "try:\n    HAVE_APEX = True\nexcept ImportError:\n    HAVE_APEX = False\n"
    other = "try:\n    from apex import amp\nexcept Exception:\n    amp = None\n"
    assert _apply(other) == other  # `amp = None` under a broad except is read as a use: kept


def test_an_import_added_above_a_class_is_followed_by_two_blank_lines() -> None:
    add = Fix((), add_imports=(ImportChange("torch", None, None),))
    code = 'class Train:\n    """One epoch."""\n'
    assert apply_imports(cst.parse_module(code), [add]).code == 'import torch\n\n\nclass Train:\n    """One epoch."""\n'
    spaced = "import os\n\n\ndef main():\n    pass\n"
    assert apply_imports(cst.parse_module(spaced), [add]).code == "import os\nimport torch\n\n\ndef main():\n    pass\n"
