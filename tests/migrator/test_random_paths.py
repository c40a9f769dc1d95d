"""AM517 on a path drawn at random on each process (analysis/random_draws.py): not one file
written N times but N copies in N places, unless the generator is seeded alike first."""

from __future__ import annotations

import textwrap

import pytest

from migrator.api import migrate_source
from migrator.config import Config

SCRIPT = textwrap.dedent('''\
    import os
    import random
    import shutil

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    {seed}run_id = random.randint(1, 100000)
    logdir = os.path.join("runs", str(run_id))
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.ones(8, 2)), batch_size=2)
    for (x,) in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    shutil.copy("config.yml", logdir)
''')


@pytest.mark.parametrize("seed, drawn", [("", True), ("random.seed(0)\n", False), ("random.seed(1234 + rank)\n", True)])
def test_a_path_drawn_at_random_is_said_to_be_one_per_process(seed: str, drawn: bool) -> None:
    result = migrate_source(SCRIPT.format(seed=seed).encode(), "train.py", Config())
    (told,) = [f.message for f in result.findings if f.code == "AM517"]
    assert ("`random.randint()`, a different draw on each process" in told) is drawn
    assert ("N processes write the same file at once" in told) is not drawn


def test_a_name_made_up_with_uuid_is_not_told_to_seed() -> None:
    script = SCRIPT.format(seed="import uuid\n").replace("random.randint(1, 100000)", "uuid.uuid4()")
    result = migrate_source(script.encode(), "train.py", Config())
    (told,) = [f.message for f in result.findings if f.code == "AM517"]
    assert "`uuid.uuid4()`, a different draw" in told and "seed" not in told


def test_pil_images_saved_in_a_loop_are_written_on_the_main_process() -> None:
    """DeepLab's validate(): `Image.fromarray(a).save(path)` beside `plt.savefig(...)`; with a
    per-process counter in the names, every process would write over the others' files."""
    script = SCRIPT.format(seed="from PIL import Image\n").replace(
        "shutil.copy(\"config.yml\", logdir)\n",
        "for k in range(2):\n    Image.fromarray(x.numpy()).save(\"results/%d_image.png\" % k)\n",
    )
    result = migrate_source(script.encode(), "train.py", Config())
    assert "    if accelerator.is_main_process:\n        Image.fromarray(x.numpy()).save(" in result.after, result.after
