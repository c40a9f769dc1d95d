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
