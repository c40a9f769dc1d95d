"""A batch iterator of the project's own (no DataLoader) is never passed to prepare()."""

from __future__ import annotations

import os
import textwrap

from migrator.api import migrate_paths, migrate_source
from migrator.config import Config

ITERATOR = '''\
class BatchIterator:
    def __init__(self, data, batch_size):
        self.data, self.batch_size = data, batch_size

    def __iter__(self):
        for i in range(0, len(self.data), self.batch_size):
            yield self.data[i:i + self.batch_size]
'''

ENGINE = '''\
import torch


def train(model, train_iter, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for batch in train_iter:
            optimizer.zero_grad()
            model(batch).pow(2).mean().backward()
            optimizer.step()
'''


def _prepared(after: str) -> str:
    return after.split("accelerator.prepare(")[1].split(")")[0]


def test_an_iterator_class_of_the_file_itself_is_not_prepared() -> None:
    """prepare() raises TypeError on it at start, one process too (reader R3's shape)."""
    source = "import torch\n\n\n" + ITERATOR + textwrap.dedent('''\


        def main():
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            train_iter = BatchIterator(torch.randn(32, 4), 8)
            for epoch in range(2):
                for batch in train_iter:
                    optimizer.zero_grad()
                    model(batch).pow(2).mean().backward()
                    optimizer.step()
    ''')
    result = migrate_source(source, "train.py", Config())
    assert _prepared(result.after) == "model, optimizer", result.after
    assert any(f.code == "AM218" for f in result.findings)


def test_an_iterator_built_in_the_call_by_a_class_of_the_caller_is_not_prepared(tmp_path) -> None:
    run = "import torch\nfrom engine import train\n\n\n" + ITERATOR + (
        '\n\nif __name__ == "__main__":\n    train(torch.nn.Linear(4, 1), BatchIterator(torch.randn(32, 4), 8), 2)\n'
    )
    (tmp_path / "run.py").write_text(run)
    (tmp_path / "engine.py").write_text(ENGINE)
    results = {os.path.basename(r.path): r for r in migrate_paths([str(tmp_path)], Config())}
    engine = results["engine.py"]
    assert _prepared(engine.after) == "model, optimizer", engine.after
    assert any(f.code == "AM218" for f in engine.findings)


def test_a_list_of_batches_a_method_of_the_file_builds_is_no_loader() -> None:
    """SimGNN's `batches = self.create_batches()` (slices of a shuffled list appended to
    `batches = []`, handed back) is iterated by the training loop: it is no DataLoader, so
    it is not named for prepare(), and AM218 says nothing splits the data."""
    source = textwrap.dedent('''\
        import random
        import torch


        class Trainer:
            def __init__(self, data):
                self.data = data
                self.model = torch.nn.Linear(4, 1)

            def create_batches(self):
                random.shuffle(self.data)
                batches = []
                for start in range(0, len(self.data), 8):
                    batches.append(self.data[start:start + 8])
                return batches

            def fit(self):
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                for epoch in range(2):
                    batches = self.create_batches()
                    for batch in batches:
                        self.optimizer.zero_grad()
                        self.model(torch.stack(batch)).pow(2).mean().backward()
                        self.optimizer.step()


        Trainer([torch.randn(4) for _ in range(32)]).fit()
    ''')
    result = migrate_source(source, "train.py", Config())
    assert not [f for f in result.findings if "batches" in f.message and f.code in ("AM201", "AM950")], result.findings
    assert any(f.code == "AM218" for f in result.findings), result.findings


def test_a_list_an_object_of_another_file_holds_is_named_as_unsplit_data(tmp_path) -> None:
    """ClusterGCN's trainer keeps the ClusteringMachine main.py hands it and trains in a
    loop over `self.clustering_machine.clusters`, which that class binds only to lists: no
    DataLoader, every process trains on all of it (reader R24)."""
    machine = textwrap.dedent('''\
        import torch


        class Machine:
            def __init__(self, count):
                self.clusters = [c for c in range(count)]
                self.features = {c: torch.randn(8, 4) for c in self.clusters}
    ''')
    trainer = textwrap.dedent('''\
        import random
        import torch


        class Trainer:
            def __init__(self, machine):
                self.machine = machine
                self.model = torch.nn.Linear(4, 1)

            def train(self):
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                for epoch in range(2):
                    random.shuffle(self.machine.clusters)
                    for cluster in self.machine.clusters:
                        self.optimizer.zero_grad()
                        self.model(self.machine.features[cluster]).pow(2).mean().backward()
                        self.optimizer.step()
    ''')
    main = "from machine import Machine\nfrom trainer import Trainer\n\nmachine = Machine(10)\nTrainer(machine).train()\n"
    for name, text in {"machine.py": machine, "trainer.py": trainer, "main.py": main}.items():
        (tmp_path / name).write_text(text)
    results = {os.path.basename(r.path): r for r in migrate_paths([str(tmp_path)], Config())}
    unsplit = [f for f in results["trainer.py"].findings if f.code == "AM218"]
    assert unsplit and "`self.machine.clusters` (line 14), a list an object of another file" in unsplit[0].message, results["trainer.py"].findings
