"""A metric adding up what a helper returns for each batch is not gathered in place."""

from __future__ import annotations

from migrator.api import migrate_source
from migrator.config import Config

SOURCE = '''\
import torch
from runtime import Accelerator
from evaluation import get_accuracy

accelerator = Accelerator()
model = torch.nn.Linear(2, 1)
loader = torch.utils.data.DataLoader(torch.zeros(4, 2), batch_size=2)
model, loader = accelerator.prepare(model, loader)
acc = 0.
length = 0
for images in loader:
    SR = torch.sigmoid(model(images))
    acc += get_accuracy(SR, images)
    length += COUNT
print(acc / length)
'''


def _findings(count: str):
    result = migrate_source(SOURCE.replace("COUNT", count), "valid.py", Config())
    return result, [f for f in result.findings if f.code in ("AM513", "AM514")]


def test_a_helper_value_per_batch_over_a_count_of_samples_is_left_to_a_human() -> None:
    """LeeJunHyun's Image_Segmentation: `acc += get_accuracy(SR, GT)` then `acc / length`,
    `length += images.size(0)`. Gathered, every batch is N times larger and there are N
    times fewer: a helper that averages its batch adds up to 1/N of the figure printed
    on one process. Whether it averages cannot be seen, so nothing is gathered."""
    for count in ("images.size(0)", "images.shape[0]", "len(images)"):
        result, found = _findings(count)
        assert "gather_for_metrics" not in result.after, count
        assert [f.code for f in found] == ["AM514"], (count, found)
        assert "adds up what a helper returns for each batch" in found[0].message


def test_a_helper_value_per_batch_over_a_step_count_is_still_gathered() -> None:
    result, found = _findings("1")
    assert "gather_for_metrics" in result.after
    assert [f.code for f in found] == ["AM513"]
