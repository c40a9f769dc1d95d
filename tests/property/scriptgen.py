"""Training scripts assembled from fragments, for property tests and the benchmark corpus.

Stdlib only: every choice goes through a `Chooser`, so hypothesis (shrinkable draws) and
`random.Random` (a seeded, deterministic corpus) drive the same generator. Options are
listed simplest first, because hypothesis shrinks towards the first one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, TypeVar

T = TypeVar("T")

INDENT = "    "


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


def _imports(c: Chooser) -> Spellings:
    s = Spellings(imports=["import torch"])
    nn = c.pick(["none", "import torch.nn as nn", "from torch import nn"])
    if nn != "none":
        s.imports.append(nn)
        s.nn = "nn"
    fn = c.pick(["none", "import torch.nn.functional as F", "from torch.nn import functional as F"])
    if fn != "none":
        s.imports.append(fn)
        s.F = "F"
    opt = c.pick(["none", "import torch.optim as optim", "from torch import optim", "from torch.optim import SGD, Adam, AdamW"])
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
    extra = c.pick([[], ["import argparse"], ["import os"], ["import math", "import os"], ["import time", "import argparse"]])
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


def _plan(c: Chooser) -> Plan:
    sp = _imports(c)
    scope = c.pick(["module", "main", "function", "main_guard", "class_receives", "class_builds"])
    device = c.pick(["none", "cond", "cuda", "string", "string_cond", "use_cuda", "args", "cuda_calls"])
    uses_args = device == "args" or c.flag(0.3)
    if uses_args and "import argparse" not in sp.imports:
        sp.imports.insert(0, "import argparse")
    names = {
        "model": c.pick(["model", "net", "classifier"]),
        "opt": c.pick(["optimizer", "opt", "optim_main"]) if "import torch.optim as optim" not in sp.imports else c.pick(["optimizer", "opt"]),
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
    )


# --------------------------------------------------------------------------- fragments


class Refs:
    """How the training code refers to each object in the scope it is written in
    (`model` or `self.model`), and how it moves things to the device."""

    def __init__(self, p: Plan, c: Chooser, prefix: str = "") -> None:
        self.p, self.c, self.prefix = p, c, prefix

    def __getitem__(self, role: str) -> str:
        return self.prefix + self.p.names[role]

    @property
    def dev(self) -> str | None:
        if self.p.device in ("none", "cuda_calls"):
            return None
        if self.p.device == "args" and not self.prefix:
            return "args.device"
        return self["device"]

    def move(self, expr: str, kind: str | None = None) -> str:
        """`expr` moved to the device the way this script does it."""
        kind = kind or self.p.move
        if self.p.device == "cuda_calls":
            return f"{expr}." + self.c.pick(["cuda()", "cuda(non_blocking=True)", "cuda(0)"])
        dev = self.dev
        if dev is None or kind == "none":
            return expr
        if kind == "to_nb":
            return f"{expr}.to({dev}, non_blocking=True)"
        if kind == "dtype_keep":
            return f"{expr}.to({dev}, torch.float32)" if self.c.flag() else f"{expr}.to(torch.float32).to({dev})"
        return f"{expr}.to({dev})"


def _device_setup(p: Plan, c: Chooser, r: Refs) -> list[str]:
    d = r["device"]
    if p.device == "cond":
        return [c.pick([
            f'{d} = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
            f'{d} = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")',
            f'{d} = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")',
        ])]
    if p.device == "cuda":
        return [f'{d} = torch.device("cuda")']
    if p.device == "string":
        return [c.pick([f'{d} = "cuda"', f'{d} = "cuda:0"'])]
    if p.device == "string_cond":
        return [f'{d} = "cuda" if torch.cuda.is_available() else "cpu"']
    if p.device == "use_cuda":
        flag = "not args.no_cuda and torch.cuda.is_available()" if p.uses_args else "torch.cuda.is_available()"
        return [f"use_cuda = {flag}", f'{d} = torch.device("cuda" if use_cuda else "cpu")']
    return []


def _args_setup(p: Plan, c: Chooser) -> list[str]:
    if not p.uses_args:
        return []
    lines = ['parser = argparse.ArgumentParser(description="generated training script")']
    lines.append(f'parser.add_argument("--epochs", type=int, default={c.number(1, 5)})')
    lines.append('parser.add_argument("--lr", type=float, default=0.01)')
    if p.device == "args":
        lines.append('parser.add_argument("--device", default="cuda")')
    if p.device == "use_cuda":
        lines.append('parser.add_argument("--no-cuda", action="store_true", default=False)')
    if p.save == "path":
        lines.append('parser.add_argument("--out", default=".")')
    lines.append("args = parser.parse_args()")
    return lines


def _model_expr(p: Plan, c: Chooser, d_in: int, d_out: int) -> str:
    nn = p.sp.nn
    if p.model == "linear":
        return f"{nn}.Linear({d_in}, {d_out})"
    if p.model == "sequential":
        hidden = c.pick([16, 32, 64])
        return f"{nn}.Sequential({nn}.Linear({d_in}, {hidden}), {nn}.ReLU(), {nn}.Linear({hidden}, {d_out}))"
    return f"Net({d_in}, {d_out})"


def _local_class(p: Plan) -> list[str]:
    nn, F = p.sp.nn, p.sp.F
    return [
        f"class Net({nn}.Module):",
        f"{INDENT}def __init__(self, d_in, d_out):",
        f"{INDENT * 2}super().__init__()",
        f"{INDENT * 2}self.fc1 = {nn}.Linear(d_in, 32)",
        f"{INDENT * 2}self.fc2 = {nn}.Linear(32, d_out)",
        "",
        f"{INDENT}def forward(self, x):",
        f"{INDENT * 2}return self.fc2({F}.relu(self.fc1(x)))",
    ]


def _data_setup(p: Plan, c: Chooser, r: Refs, d_in: int, classes: int) -> list[str]:
    DataLoader, TensorDataset = p.sp.data("DataLoader"), p.sp.data("TensorDataset")
    batch = c.pick([8, 16, 32])
    lines = []
    if p.batches == "dict":
        lines.append(f'train_set = [{{"x": torch.randn({d_in}), "y": torch.tensor(i % {classes})}} for i in range(64)]')
        dataset = "train_set"
    else:
        lines.append(f"x_train = torch.randn(128, {d_in})")
        lines.append(f"y_train = torch.randint(0, {classes}, (128,))")
        dataset = c.pick([f"{TensorDataset}(x_train, y_train)", "list(zip(x_train, y_train))"])
    shuffle = c.pick([", shuffle=True", "", ", shuffle=True, drop_last=True"])
    lines.append(f"{r['loader']} = {DataLoader}({dataset}, batch_size={batch}{shuffle})")
    if p.eval_loop:
        source = "train_set" if p.batches == "dict" else f"{TensorDataset}(torch.randn(32, {d_in}), torch.randint(0, {classes}, (32,)))"
        lines.append(f"{r['eval_loader']} = {DataLoader}({source}, batch_size={batch})")
    return lines


def _optimizer_setup(p: Plan, c: Chooser, r: Refs) -> list[str]:
    lr = "args.lr" if p.uses_args else c.pick(["0.01", "1e-3", "3e-4"])
    cls = c.pick(["SGD", "Adam", "AdamW"])
    extra = ", momentum=0.9" if cls == "SGD" and c.flag() else ""
    lines = [f"{r['opt']} = {p.sp.optim(cls)}({r['model']}.parameters(), lr={lr}{extra})"]
    if p.optimizers == 2:
        lines.append(f"{r['opt2']} = {p.sp.optim('SGD')}({r['model']}.parameters(), lr=0.1)")
    return lines


def _steps_expr(p: Plan, r: Refs) -> str:
    return f"{r['epochs']} * len({r['loader']})"


def _scheduler_setup(p: Plan, c: Chooser, r: Refs) -> list[str]:
    s, o = r["sched"], r["opt"]
    if p.scheduler == "per_batch":
        return [f"{s} = {p.sp.sched('StepLR')}({o}, step_size={c.number(1, 50)}, gamma=0.5)"]
    if p.scheduler == "per_epoch":
        return [f"{s} = {p.sp.sched('ExponentialLR')}({o}, gamma=0.9)"]
    if p.scheduler == "sized":
        cls = c.pick(["OneCycleLR", "LinearLR"])
        if cls == "OneCycleLR":
            return [f"{s} = {p.sp.sched(cls)}({o}, max_lr=0.1, total_steps={_steps_expr(p, r)})"]
        return [f"{s} = {p.sp.sched(cls)}({o}, total_iters={_steps_expr(p, r)})"]
    if p.scheduler == "sized_steps_var":
        return [
            f"num_training_steps = {_steps_expr(p, r)}",
            f"{s} = {p.sp.sched('OneCycleLR')}({o}, max_lr=0.1, total_steps=num_training_steps)",
        ]
    return []


def _backward(p: Plan, c: Chooser, loss: str) -> str:
    k = c.pick(["2", "accum_steps", "len(x)"])
    return {
        "plain": f"{loss}.backward()",
        "div": f"({loss} / {k}).backward()",
        "div_retain": f"({loss} / {k}).backward(retain_graph=True)",
        "retain": f"{loss}.backward(retain_graph=True)",
        "chained": f"{loss}.mean().backward()",
        "sum": f"sum([{loss}]).backward()",
    }[p.backward]


def _clip(p: Plan, c: Chooser, r: Refs) -> list[str]:
    params = f"{r['model']}.parameters()"
    if p.clip == "norm":
        return [c.pick([f"{p.sp.clip_norm}({params}, 1.0)", f"{p.sp.clip_norm}({params}, max_norm=1.0)"])]
    if p.clip == "value":
        return [f"{p.sp.clip_value}({params}, clip_value=0.5)"]
    return []


def _batch_loop(p: Plan, c: Chooser, r: Refs, d_in: int) -> list[str]:
    """The inner loop over the training dataloader (not indented)."""
    loader, model, opt = r["loader"], r["model"], r["opt"]
    body: list[str] = []
    if p.batches == "tuple":
        head = f"for x, y in {loader}:"
    elif p.batches == "enumerate":
        head = f"for {c.pick(['i', 'step', 'batch_idx'])}, (x, y) in enumerate({loader}):"
    else:
        head = f"for {c.pick(['batch', 'b'])} in {loader}:" if c.flag() else f"for step, batch in enumerate({loader}):"
        bname = head.split(" in ")[0].split()[-1]
        if p.move != "none" or p.device == "cuda_calls":
            body.append(f"{bname} = {{k: {r.move('v')} for k, v in {bname}.items()}}")
        body.append(f'x, y = {bname}["x"], {bname}["y"]')
    if p.batches != "dict" and (p.move != "none" or p.device == "cuda_calls"):
        if c.flag():
            body.append(f"x, y = {r.move('x')}, {r.move('y')}")
        else:
            body += [f"x = {r.move('x')}", f"y = {r.move('y')}"]
    if p.zero_grad_first:
        body.append(f"{opt}.zero_grad()")
    out = f"{model}(x)"
    if p.device_tensor:
        body.append(f"noise = torch.zeros(x.size(0), {d_in}, device={r.dev})")
        out = f"{model}(x + noise)"
    if p.criterion:
        body.append(f"loss = criterion({out}, y)")
    else:
        body.append(c.pick([f"loss = {p.sp.F}.cross_entropy({out}, y)", f"loss = {out}.pow(2).mean()"]))
    body.append(_backward(p, c, "loss"))
    body += _clip(p, c, r)
    body.append(f"{opt}.step()")
    if p.optimizers == 2:
        body.append(f"{r['opt2']}.step()")
    if p.scheduler in ("per_batch", "sized", "sized_steps_var"):
        body.append(f"{r['sched']}.step()")
    if not p.zero_grad_first:
        body.append(f"{opt}.zero_grad()")
        if p.optimizers == 2:
            body.append(f"{r['opt2']}.zero_grad(set_to_none=True)")
    if c.flag(0.3):
        body += ["if loss.item() > 100:", f'{INDENT}print(f"loss {{loss.item():.4f}}")']
    return [head] + [INDENT + line for line in body]


def _eval_loop(p: Plan, c: Chooser, r: Refs) -> list[str]:
    model, loader = r["model"], r["eval_loader"]
    inner = []
    if p.batches == "dict":
        inner.append(f"for batch in {loader}:")
        if p.move != "none" or p.device == "cuda_calls":
            inner.append(f"{INDENT}batch = {{k: {r.move('v')} for k, v in batch.items()}}")
        inner.append(f'{INDENT}x, y = batch["x"], batch["y"]')
    else:
        inner.append(f"for x, y in {loader}:")
        if p.move != "none" or p.device == "cuda_calls":
            inner.append(f"{INDENT}x, y = {r.move('x')}, {r.move('y')}")
    inner.append(f"{INDENT}pred = {model}(x).argmax(dim=1)")
    inner.append(f"{INDENT}correct += (pred == y).sum().item()")
    lines = [f"{model}.eval()", "correct = 0", "with torch.no_grad():"] + [INDENT + line for line in inner]
    lines.append(c.pick([
        f"print(correct / len({loader}.dataset))",
        f'print(f"accuracy {{correct / len({loader}.dataset):.3f}}")',
        "print(correct)",
    ]))
    return lines


def _save(p: Plan, r: Refs) -> list[str]:
    if p.save == "plain":
        return [f'torch.save({r["model"]}.state_dict(), "model.pt")']
    if p.save == "path":
        folder = "args.out" if p.uses_args else '"checkpoints"'
        if "import os" in p.sp.imports:
            return [f'torch.save({r["model"]}.state_dict(), os.path.join({folder}, "model.pt"))']
        if p.uses_args:
            return [f'torch.save({r["model"]}.state_dict(), f"{{args.out}}/model.pt")']
        return [f'torch.save({r["model"]}.state_dict(), "checkpoints/model.pt")']
    return []


def _indent(lines: list[str], levels: int = 1) -> list[str]:
    return [(INDENT * levels + line) if line else line for line in lines]


# --------------------------------------------------------------------------- scopes


def _setup_lines(p: Plan, c: Chooser, r: Refs, d_in: int, classes: int, with_args: bool = True) -> list[str]:
    """Arguments, device, data, model, optimizers, scheduler, criterion, in one of a few
    orders scripts use."""
    model = r["model"]
    model_expr = _model_expr(p, c, d_in, classes)
    model_lines = [f"{model} = {r.move(model_expr, 'to') if p.placement == 'chained' else model_expr}"]
    if p.placement == "separate":
        model_lines.append(r.move(model, "to"))
    elif p.placement == "reassign":
        model_lines.append(f"{model} = {r.move(model, 'to')}")
    data = _data_setup(p, c, r, d_in, classes)
    head = _args_setup(p, c) if with_args else []
    epochs = "args.epochs" if p.uses_args else str(c.number(1, 5))
    head.append(f"{r['epochs']} = {epochs}")
    if p.backward in ("div", "div_retain"):
        head.append("accum_steps = 2")
    if c.flag(0.3):
        head.append(f"torch.manual_seed({c.number(0, 9)})")
    device = _device_setup(p, c, r)
    lines = head + device if c.flag() else device + head
    steps = [f"steps_per_epoch = len({r['loader']})"] if p.len_before else []
    order = c.pick(["data_first", "model_first", "interleaved"])
    if order == "data_first":
        lines += data + steps + model_lines + _optimizer_setup(p, c, r)
    elif order == "model_first":
        lines += model_lines + _optimizer_setup(p, c, r) + data + steps
    else:
        lines += model_lines + data[:1] + steps + _optimizer_setup(p, c, r) + data[1:]
    lines += _scheduler_setup(p, c, r)
    if p.criterion:
        lines.append(f"criterion = {p.sp.nn}.CrossEntropyLoss()")
    return lines


def _epoch_loop(p: Plan, c: Chooser, r: Refs, inner: list[str], eval_call: list[str]) -> list[str]:
    body = [f"{r['model']}.train()"] if c.flag() else []
    body += inner
    if p.scheduler == "per_epoch":
        body.append(f"{r['sched']}.step()")
    body += eval_call
    return [f"for epoch in range({r['epochs']}):"] + _indent(body)


def _module_scope(p: Plan, c: Chooser, d_in: int, classes: int) -> list[str]:
    r = Refs(p, c)
    setup = _setup_lines(p, c, r, d_in, classes)
    evals = _eval_loop(p, c, r) if p.eval_loop else []
    per_epoch_eval = bool(evals) and c.flag()
    body = setup + [""] + _epoch_loop(p, c, r, _batch_loop(p, c, r, d_in), evals if per_epoch_eval else [])
    if evals and not per_epoch_eval:
        body += [""] + evals
    body += _save(p, r)
    if p.scope == "main_guard":
        return ['if __name__ == "__main__":'] + _indent(body)
    return body


def _function_scope(p: Plan, c: Chooser, d_in: int, classes: int) -> list[str]:
    """`def main()` builds everything; with scope "function", `train(...)` (and
    `evaluate(...)`) are separate functions main calls."""
    r = Refs(p, c)
    setup = _setup_lines(p, c, r, d_in, classes)
    defs: list[str] = []
    if p.scope == "main":
        evals = _eval_loop(p, c, r) if p.eval_loop else []
        main_body = setup + [""] + _epoch_loop(p, c, r, _batch_loop(p, c, r, d_in), evals) + _save(p, r)
    else:
        params = [r["model"], r["opt"], r["loader"]]
        if p.optimizers == 2:
            params.append(r["opt2"])
        if p.scheduler in ("per_batch", "sized", "sized_steps_var"):
            params.append(r["sched"])
        if p.criterion:
            params.append("criterion")
        if r.dev is not None and p.device != "args":
            params.append(r["device"])
        if p.uses_args:
            params.insert(0, "args")
        if p.backward in ("div", "div_retain"):
            params.append("accum_steps")
        train_body = [f"{r['model']}.train()"] + _batch_loop(p, c, r, d_in)
        defs += [f"def train({', '.join(params)}):"] + _indent(train_body) + ["", ""]
        call = [f"train({', '.join(params)})"]
        if p.eval_loop:
            eparams = [r["model"], r["eval_loader"]] + ([r["device"]] if r.dev is not None and p.device != "args" else [])
            if p.uses_args:
                eparams.insert(0, "args")
            defs += [f"def evaluate({', '.join(eparams)}):"] + _indent(_eval_loop(p, c, r)) + ["", ""]
            call.append(f"evaluate({', '.join(eparams)})")
        epoch = [f"for epoch in range({r['epochs']}):"] + _indent(call + ([f"{r['sched']}.step()"] if p.scheduler == "per_epoch" else []))
        main_body = setup + [""] + epoch + _save(p, r)
    return defs + ["def main():"] + _indent(main_body) + ["", "", 'if __name__ == "__main__":', f"{INDENT}main()"]


def _class_scope(p: Plan, c: Chooser, d_in: int, classes: int) -> list[str]:
    """A Trainer class: it either receives the objects or builds them in __init__."""
    r = Refs(p, c, prefix="self.")
    plain = Refs(p, c)
    members = ["model", "opt", "loader"] + (["opt2"] if p.optimizers == 2 else []) + (["eval_loader"] if p.eval_loop else [])
    if p.scheduler != "none":
        members.append("sched")
    if p.device not in ("none", "cuda_calls"):
        members.append("device")
    method_body = _batch_loop(p, c, r, d_in)
    if p.criterion:
        method_body = [line.replace("criterion(", "self.criterion(") for line in method_body]
    method_body = [line.replace("accum_steps", "self.accum_steps") for line in method_body]
    epoch_body = [f"self.train_epoch()"] + ([f"{r['sched']}.step()"] if p.scheduler == "per_epoch" else [])
    if p.eval_loop:
        epoch_body.append("self.evaluate()")
    methods = ["def train_epoch(self):"] + _indent([f"{r['model']}.train()"] + method_body)
    if p.eval_loop:
        methods += ["", "def evaluate(self):"] + _indent(_eval_loop(p, c, r))
    methods += ["", "def fit(self):"] + _indent([f"for epoch in range(self.{p.names['epochs']}):"] + _indent(epoch_body))
    if p.save != "none":
        methods += ["", "def save(self):"] + _indent(_save(p, r))
    extra = (["criterion"] if p.criterion else []) + (["accum_steps"] if p.backward in ("div", "div_retain") else [])
    if p.scope == "class_receives":
        setup = _setup_lines(p, c, plain, d_in, classes)
        ctor_params = [p.names[m] for m in members] + extra + [p.names["epochs"]]
        dev_value = {"device": "args.device"} if p.device == "args" else {}
        init = ["def __init__(self, " + ", ".join(ctor_params) + "):"] + _indent(
            [f"self.{n} = {n}" for n in ctor_params]
        )
        args = [dev_value.get(m, p.names[m]) for m in members] + extra + [p.names["epochs"]]
        main_body = setup + [f"trainer = Trainer({', '.join(args)})", "trainer.fit()"]
    else:
        setup = _setup_lines(p, c, r, d_in, classes, with_args=False)
        if p.device == "args":
            setup.insert(0, f"{r['device']} = args.device")
        setup = [line.replace("criterion = ", "self.criterion = ").replace("accum_steps = ", "self.accum_steps = ") for line in setup]
        init = ["def __init__(self" + (", args" if p.uses_args else "") + "):"] + _indent(setup)
        main_body = _args_setup(p, c) if p.uses_args else []
        main_body += [f"trainer = Trainer({'args' if p.uses_args else ''})", "trainer.fit()"]
    if p.save != "none":
        main_body.append("trainer.save()")
    cls = ["class Trainer:"] + _indent(init + [""] + methods)
    return cls + ["", "", "def main():"] + _indent(main_body) + ["", "", 'if __name__ == "__main__":', f"{INDENT}main()"]


# --------------------------------------------------------------------------- noise


_COMMENTS = [
    "# training",
    "# TODO: tune this",
    "#",
    "# move to the GPU",
    "# noqa",
    "# accel-migrate: ignore[AM104]",
]


def _noise(lines: list[str], c: Chooser, density: float) -> list[str]:
    """Blank lines and comment lines between lines, trailing comments at line ends."""
    out: list[str] = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if c.flag(density):
            out.append(c.pick(["", indent + c.pick(_COMMENTS)]))
        if stripped and c.flag(density / 2):
            line = f"{line}  {c.pick(_COMMENTS)}"
        out.append(line)
    return out


def _header(c: Chooser) -> list[str]:
    head = []
    if c.flag(0.2):
        head.append("#!/usr/bin/env python")
    if c.flag(0.1):
        head.append("# -*- coding: utf-8 -*-")
    if c.flag(0.5):
        head.append('"""A generated training script."""')
    if c.flag(0.2):
        head.append("from __future__ import annotations")
    return head


def training_script(c: Chooser, noise: float = 0.15) -> str:
    """One whole training script; `noise` is the chance of a blank or comment line."""
    p = _plan(c)
    d_in, classes = c.pick([4, 8, 20]), c.pick([2, 3, 10])
    if p.scope in ("module", "main_guard"):
        body = _module_scope(p, c, d_in, classes)
    elif p.scope in ("main", "function"):
        body = _function_scope(p, c, d_in, classes)
    else:
        body = _class_scope(p, c, d_in, classes)
    local = (_local_class(p) + ["", ""]) if p.model == "local_class" else []
    lines = _header(c) + p.sp.imports + ["", ""] + local + body
    return "\n".join(_noise(lines, c, noise)).rstrip() + "\n"


def random_training_script(seed: int, noise: float = 0.15) -> str:
    """The deterministic script for `seed` (the benchmark corpus uses these)."""
    return training_script(RandomChooser(random.Random(seed)), noise)
