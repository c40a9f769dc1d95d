"""AM227/AM958: a train/validation split drawn at random with no seed differs on every
process, so the migration is not written; a split seeded alike everywhere migrates."""

from __future__ import annotations

import textwrap

import pytest

from migrator.api import migrate_source
from migrator.config import Config

SCRIPT = textwrap.dedent('''\
    import numpy as np
    import torch
    from sklearn.model_selection import train_test_split
    from torch.utils.data import DataLoader, TensorDataset, random_split

    def main(rank=0):
        {seed}data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        {split}
        loader = DataLoader(train_set, batch_size=8, shuffle=True)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            optimizer.step()

    main()
''')
RANDOM_SPLIT = "train_set, val_set = random_split(data, [48, 16])"
SKLEARN = "train_set, val_set = train_test_split(data, test_size=0.25)"


def _codes(split: str, seed: str = "") -> list[str]:
    code = SCRIPT.format(seed=seed + "\n    " if seed else "", split=split)
    result = migrate_source(code.encode(), "train.py", Config())
    return sorted({f.code for f in result.findings if f.code in ("AM227", "AM958")})


@pytest.mark.parametrize("split", [RANDOM_SPLIT, SKLEARN])
def test_an_unseeded_split_is_not_migrated(split: str) -> None:
    assert _codes(split) == ["AM227", "AM958"]


@pytest.mark.parametrize(
    "split,seed",
    [
        ("train_set, val_set = random_split(data, [48, 16], generator=torch.Generator().manual_seed(0))", ""),
        ("train_set, val_set = random_split(data, [48, 16], torch.Generator().manual_seed(0))", ""),
        (RANDOM_SPLIT, "torch.manual_seed(0)"),
        (SKLEARN.replace(")", ", random_state=42)"), ""),
        (SKLEARN, "np.random.seed(0)"),
    ],
)
def test_a_split_seeded_alike_migrates(split: str, seed: str) -> None:
    assert _codes(split, seed) == []


@pytest.mark.parametrize(
    "split,seed",
    [
        (RANDOM_SPLIT, "torch.manual_seed(1234 + rank)"),  # a seed per process draws per process
        (RANDOM_SPLIT, "np.random.seed(0)"),  # random_split draws from torch's generator
        (RANDOM_SPLIT, "if rank is None:\n        torch.manual_seed(0)"),  # seeded on some paths only
        (SKLEARN.replace(")", ", random_state=None)"), ""),
    ],
)
def test_a_seed_that_does_not_reach_the_split_does_not_count(split: str, seed: str) -> None:
    assert _codes(split, seed) == ["AM227", "AM958"]


def test_a_file_left_as_written_keeps_the_note_on_its_data_parallel_batch() -> None:
    """HRNet (reader R3): a DataParallel batch grows N times under one process per GPU. The
    note (AM917) is true of the original whether or not the migration is written, so a file
    left as written for another reason keeps it for the hand migration."""
    code = SCRIPT.format(seed="", split=RANDOM_SPLIT).replace(
        "    model = torch.nn.Linear(4, 1)\n",
        "    model = torch.nn.DataParallel(torch.nn.Linear(4, 1)).cuda()\n",
    )
    assert "DataParallel" in code
    result = migrate_source(code.encode(), "train.py", Config())
    codes = {f.code for f in result.findings}
    assert {"AM958", "AM917"} <= codes, codes
    assert result.after == code
