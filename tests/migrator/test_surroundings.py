"""The project around the files of a run (migrator/surroundings.py): read to decide, never
written. The pre-commit hook runs at the repository's root with the files a commit
changed; what it says of one file must be what the run of the whole project says."""

from __future__ import annotations

import subprocess
import sys

from migrator.surroundings import read_around
from tests.migrator.test_project import ENGINE, TRAIN


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_folders_up_to_the_working_directory_and_the_modules_they_import_are_read(tmp_path, monkeypatch) -> None:
    _write(tmp_path, {
        "train.py": "from lib.engine import fit\n",
        "lib/__init__.py": "",
        "lib/engine.py": "from lib import losses\n",
        "lib/losses.py": "X = 1\n",
        "lib/unused.py": "Y = 2\n",
        "tools/other.py": "Z = 3\n",
        "lib/data/loader.py": "W = 4\n",
    })
    monkeypatch.chdir(tmp_path)
    assert sorted(read_around(["lib/engine.py"])) == ["lib/__init__.py", "lib/losses.py", "lib/unused.py", "train.py"]
    # from the root: its own folder, and what its files import (not tools/ nor lib/data/)
    assert sorted(read_around(["train.py"])) == ["lib/__init__.py", "lib/engine.py", "lib/losses.py"]
    assert len(read_around(["lib/engine.py"], limit=2)) == 2
    outside = tmp_path / "lib"
    monkeypatch.chdir(outside)  # a file outside the working directory: its own folder only
    assert sorted(read_around([str(tmp_path / "train.py")])) == sorted(
        str(tmp_path / p) for p in ("lib/__init__.py", "lib/engine.py", "lib/losses.py")
    )


def test_relative_imports_and_star_imports_of_a_package_are_followed(tmp_path, monkeypatch) -> None:
    """pytorch-template's train.py does `from trainer import Trainer`, and
    trainer/__init__.py does `from .trainer import *`: the class that trains is in
    trainer/trainer.py. The star kept the import line from being read at all, so a run of
    base/base_trainer.py alone never saw the subclass it drives."""
    _write(tmp_path, {
        "train.py": "from trainer import Trainer\n",
        "trainer/__init__.py": "from .trainer import *\nfrom . import hooks\n",
        "trainer/trainer.py": "from ..base import losses\n",
        "trainer/hooks.py": "H = 1\n",
        "trainer/unrelated.py": "U = 1\n",
        "base/base_trainer.py": "B = 1\n",
    })
    monkeypatch.chdir(tmp_path)
    assert sorted(read_around(["base/base_trainer.py"])) == [
        "train.py", "trainer/__init__.py", "trainer/hooks.py", "trainer/trainer.py",
    ]


def _lint(cwd, *paths: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "migrator", "--lint", *paths, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
    )


def _fix(cwd) -> None:
    done = subprocess.run([sys.executable, "-m", "migrator", ".", "--write", "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1) and "Rewrote" in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_hook_on_one_migrated_engine_file_says_what_the_run_of_the_project_says(tmp_path) -> None:
    """The engine feeds a metric this process's batches (AM524, known only from the caller
    that prepares the loader): linted alone at the project's root, it is still said."""
    engine = ENGINE.replace(
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n",
        "        out = model(x)\n        loss = torch.nn.functional.mse_loss(out, y)\n",
    ).replace("        optimizer.step()\n", "        optimizer.step()\n        metric.add(out.detach(), y)\n")
    engine = engine.replace("def train_one_epoch(loader, model, optimizer, device):", "def train_one_epoch(loader, model, optimizer, device, metric):")
    engine += "\n\nclass Meter:\n    def add(self, out, y):\n        self.last = (out - y).abs().mean().item()\n"
    train = TRAIN.replace("engine.train_one_epoch(train_loader, model, optimizer, device)", "engine.train_one_epoch(train_loader, model, optimizer, device, metric)")
    train = train.replace("    model = torch.nn.Linear(4, 1)\n", "    model = torch.nn.Linear(4, 1)\n    metric = engine.Meter()\n")
    _write(tmp_path, {"pkg/train.py": train, "pkg/engine.py": engine})
    _fix(tmp_path)
    written = (tmp_path / "pkg" / "train.py").read_text()
    whole = _lint(tmp_path, "pkg")
    alone = _lint(tmp_path, "pkg/engine.py")
    assert "AM524" in whole.stdout and whole.returncode == 1
    told = [line for line in alone.stdout.splitlines() if "AM" in line]
    assert told == [line for line in whole.stdout.splitlines() if line.startswith("pkg/engine.py:")], alone.stdout
    assert "All checks passed" in _lint(tmp_path, "pkg/train.py").stderr
    subprocess.run([sys.executable, "-m", "migrator", "pkg/engine.py", "--write", "--no-cache"], cwd=tmp_path, capture_output=True, timeout=300)
    assert (tmp_path / "pkg" / "train.py").read_text() == written  # a file only read is never written


def test_a_caller_the_run_only_reads_is_never_changed_for_it(tmp_path) -> None:
    """`engine.py` alone, its caller beside it not migrated: nothing is threaded (the
    caller would have to pass the Accelerator), the engine is reported, and the caller is
    left as it was."""
    _write(tmp_path, {"train.py": TRAIN, "engine.py": ENGINE})
    alone = _lint(tmp_path, "engine.py")
    assert "AM913" in alone.stdout and "accelerator" not in (tmp_path / "train.py").read_text()


def test_a_script_that_only_starts_runs_is_not_part_of_the_launched_program() -> None:
    """`search.py` edits the settings and starts `train.py` as a subprocess: the helpers it
    calls do not run once per process for it, so its calls say nothing of who runs them.
    A file that trains, sets up, or passes the Accelerator is part of the program."""
    from migrator import project

    utils = "import json\n\n\nclass Params:\n    def save(self, path):\n        json.dump({}, open(path, 'w'))\n"
    search = "import subprocess\nimport utils\n\nutils.Params().save('p.json')\nsubprocess.run(['python', 'train.py'])\n"
    trains = "import torch\nimport utils\n\nutils.Params().save('p.json')\ntorch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)\n"
    passes = "import engine\nimport utils\n\nutils.Params().save('p.json')\nengine.fit(accelerator=accelerator)\n"
    sources = {"utils.py": utils, "search.py": search, "trains.py": trains, "passes.py": passes, "engine.py": "def fit(*, accelerator):\n    pass\n"}
    files = project.index(sources)
    data = {p: t.encode() for p, t in sources.items()}
    assert project.launched(data, files, frozenset({"search.py", "trains.py", "passes.py"})) == {"trains.py", "passes.py"}


def test_a_base_class_a_left_out_file_builds_on_runs_on_every_process(tmp_path) -> None:
    """train.py builds `TrainOptions()` (options/train_options.py), whose `parse()` is
    BaseOptions' and picks the GPU by hand. Linted with train.py but not the subclass's
    file, base_options.py is still code the launched program runs on every process."""
    _write(tmp_path, {
        "train.py": (
            "import torch\nfrom options.train_options import TrainOptions\n\n"
            "opt = TrainOptions().parse()\nmodel = torch.nn.Linear(4, 1)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=opt.lr)\n"
            "for step in range(3):\n    loss = model(torch.randn(8, 4)).sum()\n    loss.backward()\n    optimizer.step()\n"
        ),
        "options/__init__.py": "",
        "options/base_options.py": (
            "import argparse\n\nimport torch\n\n\nclass BaseOptions:\n    def parse(self):\n"
            "        parser = argparse.ArgumentParser()\n        parser.add_argument('--gpu', type=int, default=0)\n"
            "        parser.add_argument('--lr', type=float, default=0.1)\n        opt = parser.parse_args()\n"
            "        torch.cuda.set_device(opt.gpu)\n        return opt\n"
        ),
        "options/train_options.py": "from .base_options import BaseOptions\n\n\nclass TrainOptions(BaseOptions):\n    pass\n",
    })
    linted = _lint(tmp_path, "train.py", "options/base_options.py")
    assert "options/base_options.py:12:9: AM103" in linted.stdout, linted.stdout + linted.stderr
