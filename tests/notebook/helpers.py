"""Building notebooks for tests in the layouts editors write, and reading cells back."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixture_cases import FIXTURES

NB_CASES = sorted(p.parent for p in FIXTURES.glob("nb-*/input.ipynb"))


def make_notebook(
    cells: list[str],
    *,
    indent: int | None = 1,
    sort_keys: bool = True,
    ensure_ascii: bool = False,
    final_newline: bool = True,
    newline: str = "\n",
    string_sources: set[int] = frozenset(),
    markdown_first: bool = False,
    language: str = "python",
) -> str:
    """A valid nbformat 4.5 notebook whose code cells hold `cells` (the first one a
    markdown cell when `markdown_first`), serialised as Jupyter (default), Colab
    (indent=2, unsorted, no final newline) or other editors would."""
    out = []
    for i, text in enumerate(cells):
        source = text if i in string_sources else _lines(text)
        if markdown_first and i == 0:
            out.append({"cell_type": "markdown", "id": f"cell-{i}", "metadata": {}, "source": source})
            continue
        out.append({
            "cell_type": "code", "execution_count": None, "id": f"cell-{i}",
            "metadata": {"tags": ["t"]}, "outputs": [], "source": source,
        })
    notebook = {
        "cells": out,
        "metadata": {"kernelspec": {"display_name": language, "language": language, "name": language},
                     "language_info": {"name": language}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(notebook, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    text += "\n" if final_newline else ""
    return text.replace("\n", newline)


def code_sources(text: str) -> list[str]:
    """Each code cell's source as one string."""
    cells = json.loads(text)["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells if c["cell_type"] == "code"]


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def fixture_text(case: Path) -> str:
    return (case / "input.ipynb").read_text(encoding="utf-8")
