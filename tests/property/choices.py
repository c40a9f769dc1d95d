"""The decisions behind one generated training script: how it spells its torch imports
and which fragment of each kind it uses (tests/property/scriptgen.py assembles them).

Stdlib only. Every decision goes through a `Chooser`, so hypothesis (shrinkable draws)
and `random.Random` (the seeded benchmark corpus) drive the same generator; options are
listed simplest first, because hypothesis shrinks towards the first one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, TypeVar

T = TypeVar("T")


class Chooser(Protocol):
    """Where the generator's decisions come from."""

    def pick(self, options: Sequence[T]) -> T: ...

    def flag(self, p: float = 0.5) -> bool: ...

    def number(self, lo: int, hi: int) -> int: ...


class RandomChooser:
    """Decisions from a seeded `random.Random` (deterministic for a given seed)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def flag(self, p: float = 0.5) -> bool:
        return self.rng.random() < p

    def number(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


# --------------------------------------------------------------------------- imports


@dataclass
class Spellings:
    """How this script spells the torch names it uses (decided by its imports)."""

    imports: list[str] = field(default_factory=list)
    nn: str = "torch.nn"
    F: str = "torch.nn.functional"
    optim: Callable[[str], str] = lambda cls: f"torch.optim.{cls}"
    sched: Callable[[str], str] = lambda cls: f"torch.optim.lr_scheduler.{cls}"
    data: Callable[[str], str] = lambda cls: f"torch.utils.data.{cls}"
    clip_norm: str = "torch.nn.utils.clip_grad_norm_"
    clip_value: str = "torch.nn.utils.clip_grad_value_"


def choose_imports(c: Chooser) -> Spellings:
    s = Spellings(imports=["import torch"])
    nn = c.pick(["none", "import torch.nn as nn", "from torch import nn"])
    if nn != "none":
        s.imports.append(nn)
        s.nn = "nn"
    fn = c.pick(["none", "import torch.nn.functional as F", "from torch.nn import functional as F"])
    if fn != "none":
        s.imports.append(fn)
        s.F = "F"
    opt = c.pick(
        ["none", "import torch.optim as optim", "from torch import optim", "from torch.optim import SGD, Adam, AdamW"]
    )
    if opt.startswith("from torch.optim import"):
        s.imports.append(opt)
        s.optim = lambda cls: cls
    elif opt != "none":
        s.imports.append(opt)
        s.optim = lambda cls: f"optim.{cls}"
    sched = c.pick(
        [
            "none",
            "from torch.optim import lr_scheduler",
            "from torch.optim.lr_scheduler import StepLR, ExponentialLR, OneCycleLR, LinearLR",
            "import torch.optim.lr_scheduler as sched",
        ]
    )
    if sched == "from torch.optim import lr_scheduler":
        s.imports.append(sched)
        s.sched = lambda cls: f"lr_scheduler.{cls}"
    elif sched.startswith("from"):
        s.imports.append(sched)
        s.sched = lambda cls: cls
    elif sched != "none":
        s.imports.append(sched)
        s.sched = lambda cls: f"sched.{cls}"
    elif opt != "none" and not opt.startswith("from torch.optim import"):
        s.sched = c.pick([s.sched, lambda cls: f"optim.lr_scheduler.{cls}"])
    data = c.pick(
        [
            "none",
            "from torch.utils.data import DataLoader, TensorDataset",
            "from torch.utils import data",
            "import torch.utils.data as data",
        ]
    )
    if data.startswith("from torch.utils.data"):
        s.imports.append(data)
        s.data = lambda cls: cls
    elif data != "none":
        s.imports.append(data)
        s.data = lambda cls: f"data.{cls}"
    clip = c.pick(
        [
            "none",
            "from torch.nn.utils import clip_grad_norm_",
            "from torch.nn.utils import clip_grad_norm_ as clip",
            "from torch.nn.utils import clip_grad_value_",
            "from torch.nn.utils import clip_grad_norm_, clip_grad_value_ as clip_value",
            "import torch.nn.utils as nn_utils",
            "from torch.nn.utils.clip_grad import clip_grad_norm_",
        ]
    )
    if clip != "none":
        s.imports.append(clip)
    if clip == "import torch.nn.utils as nn_utils":
        s.clip_norm, s.clip_value = "nn_utils.clip_grad_norm_", "nn_utils.clip_grad_value_"
    elif clip.endswith("as clip"):
        s.clip_norm = "clip"
    elif "as clip_value" in clip:
        s.clip_norm, s.clip_value = "clip_grad_norm_", "clip_value"
    elif clip.endswith("clip_grad_value_"):
        s.clip_value = "clip_grad_value_"
    elif clip.endswith("clip_grad_norm_"):
        s.clip_norm = "clip_grad_norm_"
    elif s.nn == "nn":
        s.clip_norm = c.pick([s.clip_norm, "nn.utils.clip_grad_norm_"])
    extra = c.pick(
        [[], ["import argparse"], ["import os"], ["import math", "import os"], ["import time", "import argparse"]]
    )
    s.imports = (extra + s.imports) if c.flag() else (s.imports + extra)
    return s


# --------------------------------------------------------------------------- the plan


@dataclass
class Plan:
    """Every decision about one script, made up front so fragments agree."""

    sp: Spellings
    scope: str  # module | main_guard | main | function | class_receives | class_builds
    device: str  # none | cond | cuda | string | string_cond | use_cuda | args | cuda_calls
    model: str  # linear | sequential | local_class
    placement: str  # none | chained | separate | reassign
    batches: str  # tuple | enumerate | dict
    move: str  # none | to | to_nb | to_both | dtype_keep
    optimizers: int
    scheduler: str  # none | per_batch | per_epoch | sized | sized_steps_var
    len_before: bool  # a steps count from len(train_loader) before the optimizer
    backward: str
    clip: str  # none | norm | value
    zero_grad_first: bool
    eval_loop: bool
    save: str  # none | plain | path
    criterion: bool
    device_tensor: bool  # torch.zeros(..., device=device) in the loop
    uses_args: bool
    names: dict[str, str]
    syntax: frozenset[str] = frozenset()  # of SHAPES: the less common syntax this script uses


# Syntax the crash sweep meets in real scripts (tests/property/shapes.py and fragments.py
# write each); a script uses any subset.
SHAPES = ("one_line", "semicolons", "walrus", "match", "decorator", "nested", "lambda", "star")


def make_plan(c: Chooser, shapes: bool = False) -> Plan:
    """Every decision; `shapes` also draws the less common syntax (off for the seeded
    benchmark corpus, whose scripts must stay the same from run to run)."""
    sp = choose_imports(c)
    scope = c.pick(["module", "main", "function", "main_guard", "class_receives", "class_builds"])
    device = c.pick(["none", "cond", "cuda", "string", "string_cond", "use_cuda", "args", "cuda_calls"])
    uses_args = device == "args" or c.flag(0.3)
    if uses_args and "import argparse" not in sp.imports:
        sp.imports.insert(0, "import argparse")
    opt_names = ["optimizer", "opt"]
    if "import torch.optim as optim" not in sp.imports:
        opt_names.append("optim_main")  # next to the `optim` module alias it reads badly
    names = {
        "model": c.pick(["model", "net", "classifier"]),
        "opt": c.pick(opt_names),
        "opt2": c.pick(["optimizer_head", "opt2"]),
        "sched": c.pick(["scheduler", "lr_scheduler", "sched_main"]),
        "loader": c.pick(["train_loader", "train_dl", "loader", "train_dataloader"]),
        "eval_loader": c.pick(["eval_loader", "val_loader", "test_dl"]),
        "device": c.pick(["device", "dev"]),
        "epochs": c.pick(["epochs", "num_epochs", "EPOCHS"]),
    }
    if names["sched"] == "sched_main" and "as sched" in " ".join(sp.imports):
        names["sched"] = "scheduler"
    if device == "none" and c.flag(0.3):
        names["device"] = "device"
    return Plan(
        sp=sp,
        scope=scope,
        device=device,
        model=c.pick(["linear", "sequential", "local_class"]),
        placement="none" if device == "none" else c.pick(["none", "chained", "separate", "reassign"]),
        batches=c.pick(["tuple", "enumerate", "dict"]),
        move="none" if device == "none" else c.pick(["none", "to", "to_nb", "to_both", "dtype_keep"]),
        optimizers=c.pick([1, 2]),
        scheduler=c.pick(["none", "per_batch", "per_epoch", "sized", "sized_steps_var"]),
        len_before=c.flag(0.3),
        backward=c.pick(["plain", "div", "div_retain", "retain", "chained", "sum"]),
        clip=c.pick(["none", "norm", "value"]),
        zero_grad_first=c.flag(),
        eval_loop=c.flag(),
        save=c.pick(["none", "plain", "path"]),
        criterion=c.flag(),
        device_tensor=device not in ("none", "cuda_calls") and c.flag(0.25),
        uses_args=uses_args,
        names=names,
        syntax=frozenset(shape for shape in SHAPES if c.flag(0.3)) if shapes else frozenset(),
    )
