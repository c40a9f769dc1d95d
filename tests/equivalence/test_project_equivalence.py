"""A set-up file and its engine module, migrated in one run (migrator/project/), train like
the original: the same losses on 1 process; on 2 processes at batch B the mean of the two
local losses is the original's at 2B, step by step; and the evaluation the engine returns
holds every sample on every process (gathered), so the accuracy the set-up computes from
it is the model's, the same on both ranks. The same for a trainer class of another module
that the set-up builds (the Accelerator passed to its `__init__`)."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import pytest

from migrator.api import migrate_paths
from migrator.config import Config
from tests.equivalence import runner

pytestmark = pytest.mark.timeout(900)

TRAIN = textwrap.dedent('''\
    import sys

    import torch

    import engine


    def main():
        batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        x = torch.randn(64, 4)
        y = (x.sum(dim=1, keepdim=True) > 0).float()
        data = torch.utils.data.TensorDataset(x, y)
        train_loader = torch.utils.data.DataLoader(data, batch_size=batch)
        valid_loader = torch.utils.data.DataLoader(data, batch_size=batch)
        model = torch.nn.Linear(4, 1)
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        for epoch in range(2):
            engine.train_one_epoch(train_loader, model, optimizer, device, epoch)
            outputs, targets = engine.evaluate(valid_loader, model, device)
            correct = sum(int((o[0] > 0) == (t[0] > 0.5)) for o, t in zip(outputs, targets))
            print(f"eval {epoch} count {len(outputs)} correct {correct}")


    if __name__ == "__main__":
        main()
''')

ENGINE = textwrap.dedent('''\
    import torch


    def train_one_epoch(loader, model, optimizer, device, epoch):
        model.train()
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {i} loss {loss.item():.6f}")


    def evaluate(loader, model, device):
        model.eval()
        outputs = []
        targets = []
        with torch.no_grad():
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                out = model(x)
                outputs.extend(out.cpu().numpy().tolist())
                targets.extend(y.cpu().numpy().tolist())
        return outputs, targets
''')

MAIN = textwrap.dedent('''\
    import sys

    import torch

    from trainer import Trainer


    def main():
        batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
        torch.manual_seed(0)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        x = torch.randn(64, 4)
        y = x @ torch.tensor([[0.5], [-1.0], [2.0], [0.0]])
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
        model = torch.nn.Linear(4, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        trainer = Trainer(model, optimizer, loader, device)
        for epoch in range(2):
            trainer.train_epoch(epoch)


    if __name__ == "__main__":
        main()
''')

TRAINER = textwrap.dedent('''\
    import torch


    class Trainer:
        def __init__(self, model, optimizer, loader, device):
            self.model = model
            self.optimizer = optimizer
            self.loader = loader
            self.device = device

        def train_epoch(self, epoch):
            self.model.train()
            for i, (x, y) in enumerate(self.loader):
                x, y = x.to(self.device), y.to(self.device)
                self.optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                print(f"epoch {epoch} step {i} loss {loss.item():.6f}")
''')

_EVAL = re.compile(r"eval (\d+) count (\d+) correct (\d+)")


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _evals(output: str) -> list[tuple[str, ...]]:
    return [m.groups() for m in _EVAL.finditer(output)]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("project")
    original = _write(base / "original", {"train.py": TRAIN, "engine.py": ENGINE})
    migrated = _write(base / "migrated", {"train.py": TRAIN, "engine.py": ENGINE})
    results = {Path(r.path).name: r for r in migrate_paths([str(migrated)], Config(), write=True)}
    assert "accelerator=accelerator" in results["train.py"].after
    assert "*, accelerator)" in results["engine.py"].after
    return original, migrated


def test_one_process_trains_like_the_original(project) -> None:
    original, migrated = project
    before = runner.run(runner.python_cmd(original / "train.py", ["8"]), original, 180).check()
    after = runner.run(runner.python_cmd(migrated / "train.py", ["8"]), migrated, 180).check()
    assert [s.loss for s in after.steps] == pytest.approx([s.loss for s in before.steps], abs=1e-6)
    assert _evals(after.output) == _evals(before.output)


@pytest.fixture(scope="module")
def trainer_project(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("trainer")
    original = _write(base / "original", {"main.py": MAIN, "trainer.py": TRAINER})
    migrated = _write(base / "migrated", {"main.py": MAIN, "trainer.py": TRAINER})
    results = {Path(r.path).name: r for r in migrate_paths([str(migrated)], Config(), write=True)}
    assert "Trainer(model, optimizer, loader, device, accelerator=accelerator)" in results["main.py"].after
    assert "self.accelerator.backward(loss)" in results["trainer.py"].after
    return original, migrated


def test_a_trainer_class_of_another_module_trains_like_the_original(trainer_project) -> None:
    """1 process: the same losses; 2 processes at B: the mean local loss is the original's at 2B."""
    original, migrated = trainer_project
    before = runner.run(runner.python_cmd(original / "main.py", ["8"]), original, 180).check()
    after = runner.run(runner.python_cmd(migrated / "main.py", ["8"]), migrated, 180).check()
    assert [s.loss for s in after.steps] == pytest.approx([s.loss for s in before.steps], abs=1e-6)
    path = migrated / "trainer.py"
    path.write_text(re.sub(r"\bself\.accelerator\.print\(", "print(", path.read_text()))
    reference = runner.run(runner.python_cmd(original / "main.py", ["16"]), original, 180).check()
    run = runner.run(runner.accel_launch_cmd(migrated / "main.py", ["8"], 2), migrated, 300, env=runner.TEE_ENV).check()
    means = [(a.loss + b.loss) / 2 for a, b in zip(run.ranks[0], run.ranks[1], strict=True)]
    assert means == pytest.approx([s.loss for s in reference.steps], abs=1e-5)


def test_two_processes_train_like_the_original_at_twice_the_batch(project) -> None:
    original, migrated = project
    for name in ("train.py", "engine.py"):  # every rank prints its local loss
        path = migrated / name
        path.write_text(re.sub(r"\baccelerator\.print\(", "print(", path.read_text()))
    reference = runner.run(runner.python_cmd(original / "train.py", ["16"]), original, 180).check()
    command = runner.accel_launch_cmd(migrated / "train.py", ["8"], 2)
    run = runner.run(command, migrated, 300, env=runner.TEE_ENV).check()
    assert sorted(run.ranks) == [0, 1]
    means = [(a.loss + b.loss) / 2 for a, b in zip(run.ranks[0], run.ranks[1], strict=True)]
    assert means == pytest.approx([s.loss for s in reference.steps], abs=1e-5)
    assert not any(math.isnan(m) for m in means)
    # gathered: each rank's evaluation covers all 64 samples and agrees with the other's
    lines = [line.split("]:", 1)[-1] for line in run.output.splitlines() if "eval " in line]
    evals = [m.groups() for line in lines for m in [_EVAL.search(line)] if m]
    assert sorted(set(evals)) == sorted(set(_evals(reference.output)))
    assert all(count == "64" for _, count, _ in evals) and len(evals) == 4


HELPERS = Path(__file__).resolve().parents[2] / "fixtures" / "project-distribution-helpers" / "input"
_ACCURACY = re.compile(r"eval (\d+) accuracy ([\d.]+)")


@pytest.fixture(scope="module")
def helpers_project(tmp_path_factory) -> tuple[Path, Path]:
    """A project distributed by its own `utils.init_distributed_mode(args)` and friends."""
    base = tmp_path_factory.mktemp("helpers")
    files = {p.name: p.read_text() for p in HELPERS.glob("*.py")}
    original = _write(base / "original", files)
    migrated = _write(base / "migrated", files)
    results = {Path(r.path).name: r for r in migrate_paths([str(migrated)], Config(), write=True)}
    assert "utils.init_distributed_mode(args)\n" not in results["main.py"].after
    assert "accelerator=accelerator" in results["main.py"].after
    return original, migrated


def test_helper_distributed_project_trains_like_the_original(helpers_project) -> None:
    """1 process (no launcher: the helpers' single-process path): the same losses and
    accuracies. 2 processes at B under accel-launch: rank 0 prints the loss the helper
    averages over both ranks, which is the original's at 2B, and the accuracy the helper
    sums over both ranks' shards, the original's."""
    original, migrated = helpers_project
    before = runner.run(runner.python_cmd(original / "main.py", ["--batch-size", "8"]), original, 180).check()
    after = runner.run(runner.python_cmd(migrated / "main.py", ["--batch-size", "8"]), migrated, 180).check()
    assert [s.loss for s in after.steps] == pytest.approx([s.loss for s in before.steps], abs=1e-6)
    assert _ACCURACY.findall(after.output) == _ACCURACY.findall(before.output)
    reference = runner.run(runner.python_cmd(original / "main.py", ["--batch-size", "16"]), original, 180).check()
    command = runner.accel_launch_cmd(migrated / "main.py", ["--batch-size", "8"], 2)
    run = runner.run(command, migrated, 300, env=runner.TEE_ENV).check()
    assert [s.loss for s in run.ranks[0]] == pytest.approx([s.loss for s in reference.steps], abs=1e-5)
    assert not run.ranks.get(1)  # the other process stays quiet, as the helpers made it
    assert _ACCURACY.findall(run.output) == _ACCURACY.findall(reference.output)


SHARDED = Path(__file__).resolve().parents[2] / "fixtures" / "project-loader-sharded-by-its-builder" / "input"


@pytest.fixture(scope="module")
def sharded_project(tmp_path_factory) -> tuple[Path, Path]:
    files = {p.name: p.read_text() for p in SHARDED.glob("*.py")}
    base = tmp_path_factory.mktemp("sharded")
    original, migrated = _write(base / "original", files), _write(base / "migrated", files)
    results = {Path(r.path).name: r for r in migrate_paths([str(migrated)], Config(), write=True)}
    assert "model, optimizer = accelerator.prepare(model, optimizer)" in results["train.py"].after
    return original, migrated


def test_a_loader_its_builder_shards_trains_like_the_original_at_twice_the_batch(sharded_project) -> None:
    """lufficc/SSD's shape: the loader comes sharded by a DistributedSampler from another
    file's builder and stays out of prepare(). 1 process: the same losses; 2 processes at B:
    the mean local loss is the original's at 2B, step by step (sharded once, not 1/N²)."""
    original, migrated = sharded_project
    before = runner.run(runner.python_cmd(original / "train.py", ["8"]), original, 180).check()
    after = runner.run(runner.python_cmd(migrated / "train.py", ["8"]), migrated, 180).check()
    assert [s.loss for s in after.steps] == pytest.approx([s.loss for s in before.steps], abs=1e-6)
    path = migrated / "engine.py"  # every rank prints its local loss
    path.write_text(re.sub(r"\baccelerator\.print\(", "print(", path.read_text()))
    reference = runner.run(runner.python_cmd(original / "train.py", ["16"]), original, 180).check()
    run = runner.run(runner.accel_launch_cmd(migrated / "train.py", ["8"], 2), migrated, 300, env=runner.TEE_ENV).check()
    means = [(a.loss + b.loss) / 2 for a, b in zip(run.ranks[0], run.ranks[1], strict=True)]
    assert means == pytest.approx([s.loss for s in reference.steps], abs=1e-5)
