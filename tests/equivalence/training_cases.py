r"""Which fixtures train, and how the harness runs them: the `[train]` table of case.toml.

A fixture declares that it trains, and how to set its batch size, in its case.toml::

    [train]
    batch_arg = "--batch-size"    # the script's option for the (per-process) batch size
    batch = 8                     # B: the original and 1-process runs use B; N processes use B each
    args = ["--epochs", "2"]      # more arguments for every run (optional)
    lr = "after-step"             # the printed lr is read after scheduler.step() (default "before-step")
    reference_args = ["--step-size", "2"]  # extra arguments for the original at batch N*B (optional)
    lr_tolerance = 0.1            # lr schedule matches in shape only, within this fraction of the peak
    why = "..."                   # the N-process run cannot equal the original at N*B: why (optional)
    accelerate = [1, 2]           # also run under Hugging Face Accelerate on these process counts
    pattern = 'Epoch: (?P<epoch>\d+).*Loss: (?P<loss>\S+)'  # the script's own step line (optional)
    known_bug = "..."             # the N-process comparison fails because of this open bug (strict xfail)
    unsharded = true              # no loader to shard: every process trains on all the data, so each
                                  # rank of the N-process run prints the original's losses at B
    metrics = 'val_loss (?P<val_loss>\S+) accuracy (?P<accuracy>\S+)'  # evaluation lines (optional): every
                                  # rank of the N-process run prints the original's values at N*B
    launch = "torchrun"           # the original is already distributed: run it under torchrun (1 process)
    global_batch = true           # the batch option is the whole run's, split between the processes
                                  # (`batch_size // world_size`): N processes at B train as the original at B

Its script prints one line per optimizer step with `step`, `loss` and `lr` in it (a plain
print such as `print(f"epoch {e} step {i} loss {loss.item():.6f} lr {lr}")`), or in its
own format described by `pattern` (named groups `loss`, and optionally `lr`, `epoch`, `step`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from migrator.config import Target
from tests.fixture_cases import FIXTURES, case_config

_KEYS = {
    "batch_arg", "batch", "args", "lr", "reference_args", "lr_tolerance", "why", "accelerate", "pattern", "known_bug",
    "metrics", "launch", "unsharded", "global_batch",
}


@dataclass(frozen=True)
class TrainSpec:
    """How to run one training fixture; see the module docstring for the fields."""

    case: Path
    batch_arg: str
    batch: int
    args: tuple[str, ...] = ()
    lr_after_step: bool = False
    reference_args: tuple[str, ...] = ()
    lr_tolerance: float | None = None
    why: str | None = None
    accelerate: tuple[int, ...] = ()
    pattern: str | None = None
    known_bug: str | None = None
    metrics: str | None = None
    unsharded: bool = False
    launch: str | None = None  # "torchrun": the original reads the launcher's environment
    global_batch: bool = False  # the batch option is split between the processes by the script

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def target(self) -> Target:
        """The runtime the fixture's own migration targets."""
        return case_config(self.case).target

    def argv(self, batch: int, reference: bool = False) -> list[str]:
        extra = self.reference_args if reference else ()
        return [*self.args, *extra, self.batch_arg, str(batch)]


def load(case: Path) -> TrainSpec | None:
    """The case's `[train]` table as a TrainSpec; None when the fixture does not train."""
    path = case / "case.toml"
    if not path.exists():
        return None
    table = tomllib.loads(path.read_text()).get("train")
    if table is None:
        return None
    unknown = set(table) - _KEYS
    if unknown:
        raise ValueError(f"{path}: unknown [train] keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    if table.get("launch", "torchrun") != "torchrun":
        raise ValueError(f"{path}: [train] launch must be 'torchrun' (or absent)")
    if table.get("lr", "before-step") not in ("before-step", "after-step"):
        raise ValueError(f"{path}: [train] lr must be 'before-step' or 'after-step'")
    return TrainSpec(
        case=case.resolve(),
        batch_arg=table["batch_arg"],
        batch=int(table["batch"]),
        args=tuple(table.get("args", ())),
        lr_after_step=table.get("lr", "before-step") == "after-step",
        reference_args=tuple(table.get("reference_args", ())),
        lr_tolerance=table.get("lr_tolerance"),
        why=table.get("why"),
        accelerate=tuple(int(n) for n in table.get("accelerate", ())),
        pattern=table.get("pattern"),
        known_bug=table.get("known_bug"),
        metrics=table.get("metrics"),
        unsharded=bool(table.get("unsharded", False)),
        launch=table.get("launch"),
        global_batch=bool(table.get("global_batch", False)),
    )


def training_cases() -> list[TrainSpec]:
    """Every fixture that declares `[train]`, sorted by name."""
    specs = (load(p.parent) for p in sorted(FIXTURES.glob("*/input.py")))
    return [spec for spec in specs if spec is not None]
