"""AM518 on pathlib: `out.mkdir()` under `if not out.exists():` races like os.mkdir when
every process runs it; it gets exist_ok=True there, and is left alone elsewhere."""

from __future__ import annotations

import textwrap

import pytest

from migrator.api import migrate_source
from migrator.config import Config

SCRIPT = textwrap.dedent('''\
    from pathlib import Path

    import torch

    out = Path("runs")
    {made}
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        optimizer.zero_grad()
        model(torch.ones(4, 2)).sum().backward()
        optimizer.step()
''')


@pytest.mark.parametrize(
    "made,written,fixed",
    [
        ("if not out.exists():\n    out.mkdir()", "if not out.exists():\n    out.mkdir(exist_ok=True)", True),
        ("if not out.is_dir():\n    out.mkdir(parents=True)", "if not out.is_dir():\n    out.mkdir(parents=True, exist_ok=True)", True),
        ("out.mkdir()", "out.mkdir()", False),  # not under the test: may not be pathlib's, left alone
        ("if not out.exists():\n    out.mkdir(parents=True, exist_ok=True)", "out.mkdir(parents=True, exist_ok=True)", False),
    ],
)
def test_a_pathlib_directory_made_under_its_test(made: str, written: str, fixed: bool) -> None:
    result = migrate_source(SCRIPT.format(made=made).encode(), "train.py", Config())
    assert written in result.after, result.after
    assert ("AM518" in {f.code for f in result.findings}) is fixed


def test_a_tree_cleared_and_copied_again_is_the_main_process_s() -> None:
    """HRNet copies its model sources into the output folder at start, clearing it first:
    on N processes one removes what another is copying (reader R1 saw FileExistsError).
    Both go to the main process."""
    made = 'if out.exists():\n    shutil.rmtree(out)\nshutil.copytree("models", out)'
    code = SCRIPT.format(made=made).replace("import torch\n", "import shutil\n\nimport torch\n", 1)
    result = migrate_source(code.encode(), "train.py", Config())
    assert "    if accelerator.is_main_process:\n        shutil.rmtree(out)\n" in result.after, result.after
    assert 'if accelerator.is_main_process:\n    shutil.copytree("models", out)\n' in result.after


def test_a_folder_made_in_a_constructor_the_file_calls_is_named() -> None:
    """pointer_summarizer's `Train.__init__` makes `train_%d` with `os.mkdir` under an
    exists-check; `Train()` under `__main__` is its caller, so it runs on every process
    (reader R3, twentieth session: it was taken for a function nothing calls)."""
    source = textwrap.dedent('''\
        import os

        import torch


        class Train:
            def __init__(self, folder):
                if not os.path.exists(folder):
                    os.mkdir(folder)
                self.model = torch.nn.Linear(2, 1)
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def run(self):
                for step in range(3):
                    self.optimizer.zero_grad()
                    self.model(torch.ones(4, 2)).sum().backward()
                    self.optimizer.step()


        if __name__ == "__main__":
            Train("runs").run()
    ''')
    result = migrate_source(source, "train.py", Config())
    assert [f.start.line for f in result.findings if f.code == "AM518"] == [9], result.findings
