"""Training scripts assembled from fragments, for the property tests and the benchmark
corpus: module, `main()`, `train()`-called-from-`main()` and Trainer-class scopes, with
blank-line and comment noise (the decisions are in choices.py, the statements in
fragments.py).
"""

from __future__ import annotations

import random

from tests.property.choices import Chooser, Plan, RandomChooser, make_plan
from tests.property.shapes import join_semicolons, one_line_bodies
from tests.property.fragments import (
    INDENT,
    Refs,
    args_setup,
    batch_loop,
    data_setup,
    device_setup,
    eval_loop,
    indent,
    local_class,
    model_expr,
    optimizer_setup,
    save,
    scheduler_setup,
)


def _setup_lines(p: Plan, c: Chooser, r: Refs, d_in: int, classes: int, with_args: bool = True) -> list[str]:
    """Arguments, device, data, model, optimizers, scheduler, criterion, in one of a few
    orders scripts use."""
    model = r["model"]
    built = model_expr(p, c, d_in, classes)
    model_lines = [f"{model} = {r.move(built, 'to') if p.placement == 'chained' else built}"]
    if p.placement == "separate":
        model_lines.append(r.move(model, "to"))
    elif p.placement == "reassign":
        model_lines.append(f"{model} = {r.move(model, 'to')}")
    data = data_setup(p, c, r, d_in, classes)
    head = args_setup(p, c) if with_args else []
    epochs = "args.epochs" if p.uses_args else str(c.number(1, 5))
    head.append(f"{r['epochs']} = {epochs}")
    if p.backward in ("div", "div_retain"):
        head.append("accum_steps = 2")
    if c.flag(0.3):
        head.append(f"torch.manual_seed({c.number(0, 9)})")
    device = device_setup(p, c, r)
    lines = head + device if c.flag() else device + head
    steps = [f"steps_per_epoch = len({r['loader']})"] if p.len_before else []
    order = c.pick(["data_first", "model_first", "interleaved"])
    if order == "data_first":
        lines += data + steps + model_lines + optimizer_setup(p, c, r)
    elif order == "model_first":
        lines += model_lines + optimizer_setup(p, c, r) + data + steps
    else:
        lines += model_lines + data[:1] + steps + optimizer_setup(p, c, r) + data[1:]
    lines += scheduler_setup(p, c, r)
    if p.criterion and "lambda" in p.syntax:
        lines.append(f"criterion = lambda out, target, weight=1.0: weight * {p.sp.F}.cross_entropy(out, target)")
    elif p.criterion:
        lines.append(f"criterion = {p.sp.nn}.CrossEntropyLoss()")
    return lines


def _epoch_loop(p: Plan, c: Chooser, r: Refs, inner: list[str], eval_call: list[str]) -> list[str]:
    body = [f"{r['model']}.train()"] if c.flag() else []
    body += inner
    if p.scheduler == "per_epoch":
        body.append(f"{r['sched']}.step()")
    body += eval_call
    return [f"for epoch in range({r['epochs']}):"] + indent(body)


def _module_scope(p: Plan, c: Chooser, d_in: int, classes: int) -> list[str]:
    r = Refs(p, c)
    setup = _setup_lines(p, c, r, d_in, classes)
    evals = eval_loop(p, c, r) if p.eval_loop else []
    per_epoch_eval = bool(evals) and c.flag()
    body = setup + [""] + _epoch_loop(p, c, r, batch_loop(p, c, r, d_in), evals if per_epoch_eval else [])
    if evals and not per_epoch_eval:
        body += [""] + evals
    body += save(p, r)
    if p.scope == "main_guard":
        return ['if __name__ == "__main__":'] + indent(body)
    return body


def _function_scope(p: Plan, c: Chooser, d_in: int, classes: int) -> list[str]:
    """`def main()` builds everything; with scope "function", `train(...)` (and
    `evaluate(...)`) are separate functions main calls."""
    r = Refs(p, c)
    setup = _setup_lines(p, c, r, d_in, classes)
    defs: list[str] = []
    if p.scope == "main":
        evals = eval_loop(p, c, r) if p.eval_loop else []
        main_body = setup + [""] + _epoch_loop(p, c, r, batch_loop(p, c, r, d_in), evals) + save(p, r)
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
        train_body = [f"{r['model']}.train()"] + batch_loop(p, c, r, d_in)
        defs += [f"def train({', '.join(params)}):"] + indent(train_body) + ["", ""]
        call = [f"train({', '.join(params)})"]
        if p.eval_loop:
            eparams = [r["model"], r["eval_loader"]]
            if r.dev is not None and p.device != "args":
                eparams.append(r["device"])
            if p.uses_args:
                eparams.insert(0, "args")
            deco = "decorator" in p.syntax
            defs += ["@torch.no_grad()"] if deco else []
            defs += [f"def evaluate({', '.join(eparams)}):"] + indent(eval_loop(p, c, r, deco)) + ["", ""]
            call.append(f"evaluate({', '.join(eparams)})")
        if p.scheduler == "per_epoch":
            call.append(f"{r['sched']}.step()")
        epoch = [f"for epoch in range({r['epochs']}):"] + indent(call)
        main_body = setup + [""] + epoch + save(p, r)
    return defs + ["def main():"] + indent(main_body) + ["", "", 'if __name__ == "__main__":', f"{INDENT}main()"]


def _class_scope(p: Plan, c: Chooser, d_in: int, classes: int) -> list[str]:
    """A Trainer class: it either receives the objects or builds them in __init__."""
    r = Refs(p, c, prefix="self.")
    plain = Refs(p, c)
    members = ["model", "opt", "loader"] + (["opt2"] if p.optimizers == 2 else [])
    members += ["eval_loader"] if p.eval_loop else []
    if p.scheduler != "none":
        members.append("sched")
    if p.device not in ("none", "cuda_calls"):
        members.append("device")
    method_body = batch_loop(p, c, r, d_in)
    if p.criterion:
        method_body = [line.replace("criterion(", "self.criterion(") for line in method_body]
    method_body = [line.replace("accum_steps", "self.accum_steps") for line in method_body]
    epoch_body = [f"self.train_epoch()"] + ([f"{r['sched']}.step()"] if p.scheduler == "per_epoch" else [])
    if p.eval_loop:
        epoch_body.append("self.evaluate()")
    methods = ["def train_epoch(self):"] + indent([f"{r['model']}.train()"] + method_body)
    if p.eval_loop:
        deco = "decorator" in p.syntax
        methods += ["", *(["@torch.no_grad()"] if deco else []), "def evaluate(self):"]
        methods += indent(eval_loop(p, c, r, deco))
    methods += ["", "def fit(self):"] + indent([f"for epoch in range(self.{p.names['epochs']}):"] + indent(epoch_body))
    if p.save != "none":
        methods += ["", "def save(self):"] + indent(save(p, r))
    extra = (["criterion"] if p.criterion else []) + (["accum_steps"] if p.backward in ("div", "div_retain") else [])
    if p.scope == "class_receives":
        setup = _setup_lines(p, c, plain, d_in, classes)
        ctor_params = [p.names[m] for m in members] + extra + [p.names["epochs"]]
        dev_value = {"device": "args.device"} if p.device == "args" else {}
        init = ["def __init__(self, " + ", ".join(ctor_params) + "):"] + indent(
            [f"self.{n} = {n}" for n in ctor_params]
        )
        args = [dev_value.get(m, p.names[m]) for m in members] + extra + [p.names["epochs"]]
        main_body = setup + [f"trainer = Trainer({', '.join(args)})", "trainer.fit()"]
    else:
        setup = _setup_lines(p, c, r, d_in, classes, with_args=False)
        if p.device == "args":
            setup.insert(0, f"{r['device']} = args.device")
        setup = [
            line.replace("criterion = ", "self.criterion = ").replace("accum_steps = ", "self.accum_steps = ")
            for line in setup
        ]
        init = ["def __init__(self" + (", args" if p.uses_args else "") + "):"] + indent(setup)
        main_body = args_setup(p, c) if p.uses_args else []
        main_body += [f"trainer = Trainer({'args' if p.uses_args else ''})", "trainer.fit()"]
    if p.save != "none":
        main_body.append("trainer.save()")
    cls = ["class Trainer:"] + indent(init + [""] + methods)
    return cls + ["", "", "def main():"] + indent(main_body) + ["", "", 'if __name__ == "__main__":', f"{INDENT}main()"]


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
        lead = line[: len(line) - len(stripped)]
        if c.flag(density):
            out.append(c.pick(["", lead + c.pick(_COMMENTS)]))
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


def training_script(c: Chooser, noise: float = 0.15, shapes: bool = False) -> str:
    """One whole training script; `noise` is the chance of a blank or comment line;
    `shapes` lets it use the less common syntax of choices.SHAPES."""
    p = make_plan(c, shapes)
    d_in, classes = c.pick([4, 8, 20]), c.pick([2, 3, 10])
    if p.scope in ("module", "main_guard"):
        body = _module_scope(p, c, d_in, classes)
    elif p.scope in ("main", "function"):
        body = _function_scope(p, c, d_in, classes)
    else:
        body = _class_scope(p, c, d_in, classes)
    local = (local_class(p) + ["", ""]) if p.model == "local_class" else []
    lines = _header(c) + p.sp.imports + ["", ""] + local + body
    if "semicolons" in p.syntax:  # before one_line: `if c: a; b` keeps both in the body
        lines = join_semicolons(lines, c)
    if "one_line" in p.syntax:
        lines = one_line_bodies(lines, c)
    return "\n".join(_noise(lines, c, noise)).rstrip() + "\n"


def random_training_script(seed: int, noise: float = 0.15) -> str:
    """The deterministic script for `seed` (the benchmark corpus uses these)."""
    return training_script(RandomChooser(random.Random(seed)), noise)
