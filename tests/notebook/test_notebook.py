"""migrator/notebook.py: JSON kept byte for byte, magics masked and restored, code cells
as one program, findings placed in cells, errors as results."""

from __future__ import annotations

import json

import nbformat
import pytest

from migrator.config import Config
from migrator.findings import FileStatus
from migrator.notebook import Notebook, Program, migrate_notebook
from tests.notebook.helpers import NB_CASES, code_sources, make_notebook

TRAIN_CELLS = [
    "import torch",
    "model = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
    "for x in [torch.ones(2)]:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()",
]


def migrated(cells, **kwargs):
    text = make_notebook(cells, **kwargs)
    return text, migrate_notebook(text.encode("utf-8"), "nb.ipynb", Config())


# --- the JSON text: nothing moves that did not change --------------------------------------


FORMATS = {
    "nbformat": {},
    "colab-indent-2-no-final-newline": {"indent": 2, "sort_keys": False, "final_newline": False},
    "one-line": {"indent": None},
    "ascii-escapes": {"ensure_ascii": True},
    "crlf": {"newline": "\r\n"},
}


@pytest.mark.parametrize("style", FORMATS.values(), ids=FORMATS.keys())
def test_an_unchanged_notebook_comes_back_byte_for_byte(style):
    cells = ["# é ✓ — a comment\nimport torch", "x = torch.ones(2)\nprint(x)", "%matplotlib inline"]
    text = make_notebook(cells, **style)
    result = migrate_notebook(text.encode("utf-8"), "nb.ipynb", Config())
    assert result.status is FileStatus.UNCHANGED, result.error
    assert result.after.encode(result.encoding) == text.encode("utf-8")


@pytest.mark.parametrize("style", FORMATS.values(), ids=FORMATS.keys())
def test_only_the_changed_cells_source_is_rewritten(style):
    text, result = migrated(TRAIN_CELLS + ["# untouched ✓"], **style)
    assert result.status is FileStatus.CHANGED
    old, new = json.loads(text), json.loads(result.after)
    for cell in (old, new):
        for c in cell["cells"]:
            c.pop("source")
    assert old == new, "outputs, metadata, ids and key order are kept"
    assert list(json.loads(text)["cells"][3]) == list(json.loads(result.after)["cells"][3])
    nbformat.validate(nbformat.reads(result.after, as_version=4))
    changed = [i for i, (a, b) in enumerate(zip(code_sources(text), code_sources(result.after))) if a != b]
    assert changed == [0, 1, 2], "imports + Accelerator, prepare, backward; the comment cell is untouched"
    _assert_same_text_outside_sources(text, result.after)


def _assert_same_text_outside_sources(before: str, after: str) -> None:
    """Blank out every "source" value: what is left must be identical text."""
    from migrator.notebook import _source_spans

    def outside(text):
        spans = sorted(_source_spans(text).values(), reverse=True)
        for start, end in spans:
            text = text[:start] + "…" + text[end:]
        return text

    assert outside(before) == outside(after)


@pytest.mark.parametrize("case", NB_CASES, ids=[c.name for c in NB_CASES])
def test_each_cell_written_back_unchanged_gives_the_same_bytes(case):
    """The writer lays a source out exactly as the file did (list or string, indentation)."""
    text = (case / "input.ipynb").read_text(encoding="utf-8")
    notebook = Notebook.parse(text)
    for cell in notebook.cells:
        assert notebook.with_sources({cell.index: cell.text}) == text, f"cell {cell.number}"


def test_list_and_string_sources_keep_their_form():
    text = make_notebook(TRAIN_CELLS, string_sources={2})
    result = migrate_notebook(text, "nb.ipynb", Config())
    cells = json.loads(result.after)["cells"]
    assert isinstance(cells[1]["source"], list) and isinstance(cells[2]["source"], str)
    assert cells[2]["source"].endswith("optimizer.step()"), "no newline added at the end of a cell"


def test_a_byte_order_mark_is_kept():
    text = make_notebook(TRAIN_CELLS)
    result = migrate_notebook(b"\xef\xbb\xbf" + text.encode(), "nb.ipynb", Config())
    assert result.changed and result.after.encode(result.encoding).startswith(b"\xef\xbb\xbf{")


# --- one program: names cross cells -----------------------------------------------------


def test_a_name_defined_in_one_cell_is_known_in_a_later_one():
    _, result = migrated(TRAIN_CELLS)
    cells = code_sources(result.after)
    # no device anywhere, no loader: the tensors the cells build stay on the CPU, so does the model
    assert cells[0] == "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator(cpu=True)"
    assert cells[1].endswith("model, optimizer = accelerator.prepare(model, optimizer)")
    assert "accelerator.backward(loss)" in cells[2]


def test_imports_added_after_the_notebooks_imports_not_above_pip_install():
    _, result = migrated(["!pip install torch", "import torch\nimport os", *TRAIN_CELLS[1:]])
    cells = code_sources(result.after)
    assert cells[0] == "!pip install torch"
    assert cells[1].startswith("import torch\nimport os\nfrom runtime import Accelerator")


def test_the_migration_is_idempotent_on_notebooks():
    _, first = migrated(TRAIN_CELLS)
    second = migrate_notebook(first.after, "nb.ipynb", Config())
    assert second.status is FileStatus.UNCHANGED
    assert not [f for f in second.findings if f.fixable]


# --- IPython syntax: masked while migrating, restored exactly ------------------------------

MAGICS = [
    "%matplotlib inline",
    "!pip install -q torch",
    "!!ls",
    "files = !ls -la",
    "t = %timeit -o sum(range(3))",
    "%env CUDA_VISIBLE_DEVICES=0",
    "torch.optim.SGD?",
    "?torch.optim.SGD",
    "model??",
    "%load_ext autoreload  # trailing words",
    "!echo a \\\n  b",
]


def test_magics_and_shell_lines_survive_a_migration_exactly():
    cells = [TRAIN_CELLS[0], "\n".join(MAGICS), TRAIN_CELLS[1], TRAIN_CELLS[2] + "\n%time 1"]
    _, result = migrated(cells)
    assert result.status is FileStatus.CHANGED, result.error
    sources = code_sources(result.after)
    assert sources[1] == "\n".join(MAGICS)
    assert sources[3].endswith("    optimizer.step()\n%time 1")


def test_magics_inside_blocks_and_strings():
    body = (
        'doc = """\n!not a shell line: inside a string\n%neither\n"""\n'
        "for i in range(2):\n    !echo $i\n"
        "if True:\n    %time x = 1\n"
        "y = (1 +\n     2)  # a continuation line is no statement start\n"
    )
    program = Program(Notebook.parse(make_notebook([body])))
    lines = program.text.splitlines()
    assert "!not a shell line: inside a string" in lines and "%neither" in lines
    assert lines[5].strip().startswith("__accel_migrate_magic_") and lines[5].startswith("    ")
    compile(program.text, "program", "exec")
    assert program.split(program.text) == ({}, program.where)


def test_a_cell_magic_that_is_not_python_is_left_out():
    bash = "%%bash\nloss.backward()\necho done"
    _, result = migrated([*TRAIN_CELLS, bash])
    assert code_sources(result.after)[3] == bash


def test_a_time_cell_magic_is_migrated_below_its_first_line():
    _, result = migrated([*TRAIN_CELLS[:2], "%%time\n" + TRAIN_CELLS[2]])
    source = code_sources(result.after)[2]
    assert source.startswith("%%time\nfor x in") and "accelerator.backward(loss)" in source


def test_placeholder_names_never_clash_with_the_users_code():
    cells = ["__accel_migrate_magic_0__ = 1\n%matplotlib inline", *TRAIN_CELLS]
    _, result = migrated(cells)
    assert result.changed
    assert code_sources(result.after)[0].endswith(cells[0]), "the user's own name is no placeholder"


# --- findings and errors: cell and line ---------------------------------------------------


def test_findings_point_at_the_cell_and_the_line_in_it():
    cells = ["# notes", *TRAIN_CELLS]
    text = make_notebook(cells, markdown_first=True)
    lint = migrate_notebook(text, "nb.ipynb", Config(fix=False))
    backward = next(f for f in lint.findings if f.code == "AM301")
    assert (backward.cell, backward.start.line, backward.start.col) == (4, 3, 5)
    assert str(backward).startswith("nb.ipynb:cell 4:3:5: AM301 ")
    top = next(f for f in lint.findings if f.code == "AM930")
    assert top.place == "cell 4:1:1"


def test_remaining_findings_point_into_the_migrated_cells():
    cells = [*TRAIN_CELLS, "torch.save(model.state_dict(), 'm.pt')"]
    _, result = migrated(cells)
    for finding in result.findings:
        sources = code_sources(result.after if not finding.fixed else make_notebook(cells))
        line = sources[finding.cell - 1].split("\n")[finding.start.line - 1]
        assert line.strip(), f"{finding} points at an empty line"


def test_a_syntax_error_is_reported_in_its_cell():
    result = migrate_notebook(make_notebook(["import torch", "x = 1", "def f(:\n    pass"]), "nb.ipynb", Config())
    assert result.status is FileStatus.FAILED
    assert result.error.code == "E001" and result.error.place.startswith("cell 3:1:")


@pytest.mark.parametrize("data, words", [
    (b"{not json", "invalid JSON"),
    (b'{"cells": 3}', "no list of cells"),
    (b'{"worksheets": [], "nbformat": 3}', "nbformat 3"),
    (b"\xff\xfe", "cannot decode"),
])
def test_a_file_that_is_no_notebook_is_a_failed_result(data, words):
    result = migrate_notebook(data, "nb.ipynb", Config())
    assert result.status is FileStatus.FAILED and result.error.code == "E008"
    assert words in result.error.message


def test_a_notebook_in_another_language_is_left_alone():
    text = make_notebook(TRAIN_CELLS, language="julia")
    result = migrate_notebook(text, "nb.ipynb", Config())
    assert result.status is FileStatus.UNCHANGED and not result.findings
