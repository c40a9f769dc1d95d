"""AM406: the forwards a mixed-precision migration reaches beyond the script's autocast regions."""

from __future__ import annotations

from migrator.api import migrate_source
from migrator.config import Config

SCRIPT = '''\
import torch


def main():
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=4)
    for (x,) in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16{flag}):
            loss = model(x).sum()
        loss.backward()
        optimizer.step()
    print(evaluate_model(model))


if __name__ == "__main__":
    main()
'''


def _told(source: str, fix: bool) -> list[str]:
    result = migrate_source(source, "train.py", Config(fix=fix))
    return [f.message for f in result.findings if f.code == "AM406"]


def test_an_evaluation_outside_the_regions_is_named_before_and_after_the_migration() -> None:
    """The findings of a written migration come from its last pass, which reads the
    Accelerator's constant `mixed_precision` and its `accelerator.autocast()` regions."""
    source = SCRIPT.format(flag="")
    for fix in (False, True):
        (told,) = _told(source, fix)
        assert told.startswith("`evaluate_model(...)` ran `model` in full precision")


def test_a_precision_behind_a_flag_is_not_named() -> None:
    """`enabled=args.amp`: the full-precision path runs without mixed precision."""
    assert _told(SCRIPT.format(flag=", enabled=args.amp"), True) == []
