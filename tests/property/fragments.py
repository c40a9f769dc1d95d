"""Statement fragments of a training script, written for a `Plan` in one scope
(plain names, or `self.` members inside a Trainer class). Each returns source lines,
unindented; scriptgen.py nests and joins them."""

from __future__ import annotations

from tests.property.choices import Chooser, Plan

INDENT = "    "


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


def device_setup(p: Plan, c: Chooser, r: Refs) -> list[str]:
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


def args_setup(p: Plan, c: Chooser) -> list[str]:
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


def model_expr(p: Plan, c: Chooser, d_in: int, d_out: int) -> str:
    nn = p.sp.nn
    if p.model == "linear":
        return f"{nn}.Linear({d_in}, {d_out})"
    if p.model == "sequential":
        hidden = c.pick([16, 32, 64])
        return f"{nn}.Sequential({nn}.Linear({d_in}, {hidden}), {nn}.ReLU(), {nn}.Linear({hidden}, {d_out}))"
    return f"Net({d_in}, {d_out})"


def local_class(p: Plan) -> list[str]:
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


def data_setup(p: Plan, c: Chooser, r: Refs, d_in: int, classes: int) -> list[str]:
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
        fresh = f"{TensorDataset}(torch.randn(32, {d_in}), torch.randint(0, {classes}, (32,)))"
        source = "train_set" if p.batches == "dict" else fresh
        lines.append(f"{r['eval_loader']} = {DataLoader}({source}, batch_size={batch})")
    return lines


def optimizer_setup(p: Plan, c: Chooser, r: Refs) -> list[str]:
    lr = "args.lr" if p.uses_args else c.pick(["0.01", "1e-3", "3e-4"])
    cls = c.pick(["SGD", "Adam", "AdamW"])
    extra = ", momentum=0.9" if cls == "SGD" and c.flag() else ""
    lines = [f"{r['opt']} = {p.sp.optim(cls)}({r['model']}.parameters(), lr={lr}{extra})"]
    if "match" in p.syntax:  # the optimizer chosen by name, one `case` per kind
        other = f"{r['opt']} = {p.sp.optim('Adam')}({r['model']}.parameters(), lr={lr})"
        lines = [f'optimizer_kind = "{cls.lower()}"', "match optimizer_kind:", f'{INDENT}case "adam_fallback":',
                 f"{INDENT * 2}{other}", f"{INDENT}case _:", f"{INDENT * 2}{lines[0]}"]
    if p.optimizers == 2:
        lines.append(f"{r['opt2']} = {p.sp.optim('SGD')}({r['model']}.parameters(), lr=0.1)")
    return lines


def steps_expr(p: Plan, r: Refs) -> str:
    return f"{r['epochs']} * len({r['loader']})"


def scheduler_setup(p: Plan, c: Chooser, r: Refs) -> list[str]:
    s, o = r["sched"], r["opt"]
    if p.scheduler == "per_batch":
        return [f"{s} = {p.sp.sched('StepLR')}({o}, step_size={c.number(1, 50)}, gamma=0.5)"]
    if p.scheduler == "per_epoch":
        return [f"{s} = {p.sp.sched('ExponentialLR')}({o}, gamma=0.9)"]
    if p.scheduler == "sized":
        cls = c.pick(["OneCycleLR", "LinearLR"])
        if cls == "OneCycleLR":
            return [f"{s} = {p.sp.sched(cls)}({o}, max_lr=0.1, total_steps={steps_expr(p, r)})"]
        return [f"{s} = {p.sp.sched(cls)}({o}, total_iters={steps_expr(p, r)})"]
    if p.scheduler == "sized_steps_var":
        return [
            f"num_training_steps = {steps_expr(p, r)}",
            f"{s} = {p.sp.sched('OneCycleLR')}({o}, max_lr=0.1, total_steps=num_training_steps)",
        ]
    return []


def backward(p: Plan, c: Chooser, loss: str) -> str:
    k = c.pick(["2", "accum_steps", "len(x)"])
    return {
        "plain": f"{loss}.backward()",
        "div": f"({loss} / {k}).backward()",
        "div_retain": f"({loss} / {k}).backward(retain_graph=True)",
        "retain": f"{loss}.backward(retain_graph=True)",
        "chained": f"{loss}.mean().backward()",
        "sum": f"sum([{loss}]).backward()",
    }[p.backward]


def clip(p: Plan, c: Chooser, r: Refs) -> list[str]:
    params = f"{r['model']}.parameters()"
    if p.clip == "norm":
        return [c.pick([f"{p.sp.clip_norm}({params}, 1.0)", f"{p.sp.clip_norm}({params}, max_norm=1.0)"])]
    if p.clip == "value":
        return [f"{p.sp.clip_value}({params}, clip_value=0.5)"]
    return []


def batch_loop(p: Plan, c: Chooser, r: Refs, d_in: int) -> list[str]:
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
    if "star" in p.syntax and p.batches != "dict":  # `for x, *rest in loader:`
        head = head.replace("x, y", "x, *rest", 1)
        body.append("y = rest[0]")
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
    if "nested" in p.syntax:  # the loss computed by a function defined in the loop
        compute = "criterion" if p.criterion else f"{p.sp.F}.cross_entropy"
        body[-1:] = ["def compute_loss(out, target):", f"{INDENT}return {compute}(out, target)",
                     f"loss = compute_loss({out}, y)"]
    body.append(backward(p, c, "loss"))
    body += clip(p, c, r)
    body.append(f"{opt}.step()")
    if p.optimizers == 2:
        body.append(f"{r['opt2']}.step()")
    if p.scheduler in ("per_batch", "sized", "sized_steps_var"):
        body.append(f"{r['sched']}.step()")
    if not p.zero_grad_first:
        body.append(f"{opt}.zero_grad()")
        if p.optimizers == 2:
            body.append(f"{r['opt2']}.zero_grad(set_to_none=True)")
    shown = c.flag(0.3)
    if "walrus" in p.syntax:
        body += ["if (value := loss.item()) > 100:", f'{INDENT}print(f"loss {{value:.4f}}")']
    elif shown:
        body += ["if loss.item() > 100:", f'{INDENT}print(f"loss {{loss.item():.4f}}")']
    return [head] + [INDENT + line for line in body]


def eval_loop(p: Plan, c: Chooser, r: Refs, decorated: bool = False) -> list[str]:
    """The evaluation loop; `decorated`: its function is `@torch.no_grad()`, no `with`."""
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
    if decorated:
        lines = [f"{model}.eval()", "correct = 0"] + inner
    else:
        lines = [f"{model}.eval()", "correct = 0", "with torch.no_grad():"] + [INDENT + line for line in inner]
    lines.append(c.pick([
        f"print(correct / len({loader}.dataset))",
        f'print(f"accuracy {{correct / len({loader}.dataset):.3f}}")',
        "print(correct)",
    ]))
    return lines


def save(p: Plan, r: Refs) -> list[str]:
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


def indent(lines: list[str], levels: int = 1) -> list[str]:
    return [(INDENT * levels + line) if line else line for line in lines]
