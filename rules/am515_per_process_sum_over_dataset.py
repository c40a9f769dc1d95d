"""AM515: a training loop's per-process running sum divided by the whole data set's size."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.metrics import sharded_loop
from migrator.analysis.walk import descendants
from migrator.edits import Fix, ImportChange, insert_after
from migrator.rule import Example, FixAvailability, Rule


_OVER_DATASET = (
    "but is divided by the whole data set's size: on N processes this is about 1/N of the average; "
    "sum it across processes first (`accelerator.reduce`)"
)
_OVER_BATCHES = (
    "and is divided by its number of batches: on N processes that is this process's average, "
    "not the epoch's; average it across processes first (`accelerator.reduce`)"
)


_MEAN_OF_LIST = (
    "batch by batch, and its mean is taken after the loop: on N processes that is this "
    "process's average, not the epoch's; average it across processes first (`accelerator.reduce`)"
)


class PerProcessSumOverDataset(Rule):
    """## What it does
    Finds `train_loss / len(train_loader.dataset)` (or `train_loss /= ...`) where
    `train_loss` is summed in a training loop (`train_loss += loss.item()`) over a
    prepared dataloader, and sums it across processes right after the loop:
    `train_loss = accelerator.reduce(torch.tensor(train_loss, dtype=torch.float64, device=accelerator.device), reduction="sum").item()`
    for a Python number (`loss.item()`, `float(...)`, the pre-0.4 `loss.data[0]`, products
    of those with sizes), `train_loss = accelerator.reduce(train_loss, reduction="sum")`
    for a tensor (`+= loss`, `+= loss.detach()`, `+= loss.data`).

    A list the loop appends one number to per batch (`losses.append(loss.item())`) whose
    mean is taken after it (`sum(losses) / len(losses)`, `np.mean(losses)`) becomes the
    per-batch mean over the processes first (`losses = accelerator.reduce(torch.tensor(
    losses, ...), reduction="mean").tolist()`): every process has as many batches of the
    prepared loader, so its mean is the epoch's.

    ## Why is this bad?
    On N processes each process sums the losses of its 1/N of the batches, while
    `len(train_loader.dataset)` is the size of the whole data set: the printed average is
    about 1/N of the real one, and differs between processes. Training itself is not
    affected, which is why nothing fails and the number is simply wrong.

    ## Example
    ```python
    for data, target in train_loader:
        loss = criterion(model(data), target)
        accelerator.backward(loss)
        optimizer.step()
        train_loss += loss.item()
    print(train_loss / len(train_loader.dataset))
    ```

    Use instead:
    ```python
    for data, target in train_loader:
        ...
        train_loss += loss.item()
    train_loss = accelerator.reduce(torch.tensor(train_loss, dtype=torch.float64, device=accelerator.device), reduction="sum").item()
    print(train_loss / len(train_loader.dataset))
    ```

    ## Fix safety
    The sum is reduced where every process has finished the loop: right after it, at the
    loop's own level (never inside a branch some processes skip). A number travels as a
    float64 tensor, so on one process the printed value is exactly the original's
    (Accelerate's `reduce` takes tensors only, ours too).

    ## Known limits
    A sum divided by the loader's number of batches (`train_loss / len(train_loader)`, an
    average per batch) is averaged across processes instead (`reduction="mean"`): every
    process draws as many batches, so the mean of the processes' averages is the epoch's.

    Left as a finding, with nothing changed: a sum read after the loop other than divided
    by the data set's size or the number of batches, a sum whose type cannot be told (a number or a
    tensor, a tensor moved to the CPU, which NCCL cannot reduce), an attribute
    (`self.loss_sum`), and a loop with a `return` inside. The float64 tensor is not
    available on Apple's MPS devices (Accelerate target). When the data set does not
    divide evenly, the prepared loader repeats a few samples in the last batch to even
    out the processes, and the sum counts them (as AM513's reduced losses do).

    ## See also
    - AM513 (ungathered-metrics): the same question in evaluation loops, where the
      migration gathers the values instead.
    """

    code = "AM515"
    name = "per-process-sum-over-dataset"
    message = "`{total}` {collects} this process's share of `{loader}` {problem}{note}"
    fix_title = "Sum it across processes with `accelerator.reduce` after the loop"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "total = 0.0\nfor x in loader:\n    loss = model(x).sum()\n    accelerator.backward(loss)\n"
                "    optimizer.step()\n    total += loss.item()\nprint(total / len(loader.dataset))\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=2)\n"
                "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
                "total = 0.0\nfor x in loader:\n    loss = model(x).sum()\n    accelerator.backward(loss)\n"
                "    optimizer.step()\n    total += loss.item()\n"
                'total = accelerator.reduce(torch.tensor(total, dtype=torch.float64, device=accelerator.device), reduction="sum").item()\n'
                "accelerator.print(total / len(loader.dataset))\n"
            ),
            at=("15:7",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        facts = analysis.facts
        backwards = [c.node for c in facts.calls if _is_backward(c.node)]
        training = {id(loop) for c in facts.calls if _is_backward(c.node) for loop in c.loops}
        prepared = analysis.prepared
        for loop in facts.loops:
            name = loop.iter_name
            if id(loop.node) not in training or name is None:
                continue
            if not sharded_loop(loop, facts, analysis.roles, frozenset(prepared)):
                continue
            sums = _running_sums(loop.node)
            lists = _appended(loop.node)
            if sums or lists:
                losses = _backward_names(backwards, loop.node, analysis)
                self._check_divisions(loop, name, sums, losses)
                self._check_means(loop, name, lists, losses)

    def _check_divisions(self, loop, loader: str, sums: dict[str, list[cst.BaseExpression]], losses: set[str]) -> None:
        analysis = self.analysis
        found: dict[str, list[tuple[cst.CSTNode, cst.CSTNode]]] = {}
        for division in analysis.nodes("BinaryOperation") + analysis.nodes("AugAssign"):
            if analysis.scope_of(division) is not loop.scope or analysis.order(division) < analysis.order(loop.node):
                continue
            if loop.node in _ancestors(analysis, division):
                continue  # a progress line inside the loop divides something else
            if isinstance(division, cst.BinaryOperation) and isinstance(division.operator, cst.Divide):
                left, right = division.left, division.right
            elif isinstance(division, cst.AugAssign) and isinstance(division.operator, cst.DivideAssign):
                left, right = division.target, division.value
            else:
                continue
            total = dotted_name(left)
            if total not in sums or self._reduced_before(loop, total, division) or self._adds_reduced(sums[total]):
                continue
            if _dataset_size_of(right) == loader:
                found.setdefault(total, []).append((division, left, "sum"))
            elif _batch_count_of(right) == loader:
                found.setdefault(total, []).append((division, left, "mean"))
        first = {name: min(analysis.order(v) for v in values if v is not None) for name, values in sums.items() if any(values)}
        planned = []
        for total, divisions in sorted(found.items(), key=lambda item: first.get(item[0], 0)):
            reductions = {r for _, _, r in divisions}
            if len(reductions) > 1:
                statement, why = None, f"`{total}` is divided both by the data set's size and by the number of batches"
            else:
                statement, why = self._reduction(loop, total, sums[total], losses, [left for _, left, _ in divisions], reductions.pop())
            planned.append((total, divisions, statement, why))
        statements = [s for _, _, s, _ in planned if s is not None]
        # One fix for the loop: the sums are reduced in the order the loop adds to them.
        fix = Fix((insert_after(loop.node, *(s for s, _ in statements)),), tuple(i for _, imports in statements for i in imports))
        for total, divisions, statement, why in planned:
            for division, _, reduction in divisions:
                problem = _OVER_DATASET if reduction == "sum" else _OVER_BATCHES
                if statement is None:
                    self.report(division, total=total, collects="sums", loader=loader, problem=problem, note=f" (left as written: {why})" if why else "")
                else:
                    self.report(division, edits=fix, total=total, collects="sums", loader=loader, problem=problem, note="")

    def _check_means(self, loop, loader: str, lists: dict[str, list[cst.BaseExpression]], losses: set[str]) -> None:
        """`losses.append(loss.item())` in the loop, `sum(losses) / len(losses)` (or
        `np.mean(losses)`) after it: this process's batches only. The list becomes the
        per-batch mean over the processes (the prepared loader gives each as many batches),
        whose mean is the epoch's."""
        analysis = self.analysis
        for name, values in lists.items():
            means = [m for m in self._means_of(loop, name) if not self._reduced_before(loop, name, m)]
            if not means:
                continue
            lefts = [n for m in means for n in descendants(m) if isinstance(n, cst.Name) and n.value == name]
            statement, why = self._reduction(loop, name, values, losses, lefts, "mean", whole=".tolist()")
            if statement is not None and {_kind(v, losses) for v in values} != {"number"}:
                statement, why = None, f"`{name}` holds tensors, not numbers"
            for mean in means:
                if statement is None:
                    self.report(mean, total=name, collects="collects", loader=loader, problem=_MEAN_OF_LIST, note=f" (left as written: {why})" if why else "")
                else:
                    self.report(mean, edits=Fix((insert_after(loop.node, statement[0]),), tuple(statement[1])),
                                total=name, collects="collects", loader=loader, problem=_MEAN_OF_LIST, note="")

    def _means_of(self, loop, name: str) -> list[cst.CSTNode]:
        """`sum(name) / len(name)` and `np.mean(name)` after `loop`, in its scope."""
        analysis = self.analysis
        out = []
        for node in analysis.nodes("BinaryOperation") + analysis.nodes("Call"):
            if analysis.scope_of(node) is not loop.scope or analysis.order(node) < analysis.order(loop.node):
                continue
            if loop.node in _ancestors(analysis, node):
                continue
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
                if _call_of(node.left, "sum") == name and _call_of(node.right, "len") == name:
                    out.append(node)
            elif isinstance(node, cst.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] == "mean":
                if len(node.args) == 1 and dotted_name(node.args[0].value) == name and dotted_name(node.func) != "mean":
                    out.append(node)
        return out

    def _reduction(self, loop, total: str, addends, losses: set[str], lefts: list[cst.CSTNode], reduction: str, whole: str = ".item()"):
        """The edit that sums (or averages) `total` across processes after `loop` (and
        imports), or None with the reason it cannot be written. `whole`: how a reduced
        tensor made from numbers becomes one again (`.tolist()` for a list)."""
        analysis = self.analysis
        if "." in total:
            return None, ""
        if analysis.branches.branch_of(loop.node) is not None or _has_return(loop.node.body):
            return None, "not every process reaches the end of this loop"
        other = self._other_read(loop, total, lefts)
        if other is not None:
            return None, f"`{total}` is also read on line {analysis.position(other).start.line}"
        kinds = {_kind(a, losses) for a in addends}
        accelerator = analysis.accelerator_at(loop.node)
        if accelerator is None:
            return None, "the Accelerator cannot be reached here"
        if len(kinds) != 1 or None in kinds:
            return None, f"cannot tell whether `{total}` holds a number or a tensor"
        imports: list[ImportChange] = []
        if kinds == {"tensor"}:
            code = f'{total} = {accelerator}.reduce({total}, reduction="{reduction}")\n'
        else:
            torch = analysis.top_level_name("torch")
            if torch is None:
                torch = "torch"
                imports.append(ImportChange("torch"))
            code = (
                f"{total} = {accelerator}.reduce({torch}.tensor({total}, dtype={torch}.float64, "
                f'device={accelerator}.device), reduction="{reduction}"){whole}\n'
            )
        return (cst.parse_statement(code), imports), ""

    def _adds_reduced(self, addends: list[cst.BaseExpression]) -> bool:
        """`total += utils.reduce_mean(loss.detach()).item()`: each addend is already the
        value over every process (another file's helper all-reduces it: project/dist_helpers.py)."""
        reduced = {spelling for spelling, kind, *_ in self.ctx.config.project_distribution if kind == "reduced"}
        if not reduced:
            return False
        calls = [n for a in addends if a is not None for n in descendants(a) if isinstance(n, cst.Call)]
        return any(dotted_name(c.func) in reduced for c in calls)

    def _reduced_before(self, loop, total: str, division: cst.CSTNode) -> bool:
        """`total = accelerator.reduce(...)` (or a gather) between the loop and `division`:
        what is divided is already the sum over every process."""
        analysis = self.analysis
        start, at = analysis.order(loop.node), analysis.order(division)
        for b in analysis.facts.bindings:
            if b.name != total or b.scope is not loop.scope or b.value is None:
                continue
            if not start < analysis.order(b.statement) < at or loop.node in _ancestors(analysis, b.statement):
                continue
            text = cst.Module([]).code_for_node(b.value)
            if any(word in text for word in ("reduce(", "gather(", "gather_for_metrics(")):
                return True
        return False

    def _other_read(self, loop, total: str, lefts: list[cst.CSTNode]) -> cst.CSTNode | None:
        """A read of `total` after the loop, in its scope and before it is bound again,
        other than the divisions by the data set's size."""
        analysis = self.analysis
        start = analysis.order(loop.node)
        rebinds = [
            analysis.order(b.statement) for b in analysis.facts.bindings
            if b.name == total and b.scope is loop.scope and analysis.order(b.statement) > start
            and loop.node not in _ancestors(analysis, b.statement)
        ]
        rebinds += [
            analysis.order(a) for a in analysis.nodes("AugAssign")
            if dotted_name(a.target) == total and analysis.scope_of(a) is loop.scope  # type: ignore[attr-defined]
            and analysis.order(a) > start and loop.node not in _ancestors(analysis, a)
        ]
        end = min(rebinds, default=None)
        allowed = {id(n) for n in lefts}
        for load in analysis.facts.loads:
            if load.name != total or load.scope is not loop.scope:
                continue
            at = analysis.order(load.node)
            if at <= start or loop.node in _ancestors(analysis, load.node) or id(load.node) in allowed:
                continue
            if end is not None and at > end:
                continue
            return load.node
        return None


def _is_backward(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"


def _backward_names(backwards: list[cst.Call], loop: cst.For, analysis) -> set[str]:
    """Names whose backward the loop takes (`loss` of `loss.backward()` or
    `accelerator.backward(loss)`): tensors."""
    names: set[str] = set()
    for call in backwards:
        if loop not in _ancestors(analysis, call):
            continue
        positional = [a for a in call.args if a.keyword is None]
        target = positional[0].value if positional else call.func.value  # type: ignore[attr-defined]
        name = dotted_name(target)
        if name is not None:
            names.add(name)
    return names


def _call_of(expr: cst.BaseExpression, function: str) -> str | None:
    """`name` for `function(name)`."""
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == function and len(expr.args) == 1:
        return dotted_name(expr.args[0].value)
    return None


def _appended(loop: cst.For) -> dict[str, list[cst.BaseExpression]]:
    """Plain names the loop appends one value to per batch (`losses.append(loss.item())`)."""
    found: dict[str, list] = {}

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name):
                if len(node.args) == 1 and node.args[0].keyword is None:
                    found.setdefault(func.value.value, []).append(node.args[0].value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    loop.body.visit(_Find())
    return found


def _running_sums(loop: cst.For) -> dict[str, list[cst.BaseExpression]]:
    """Names the loop adds a value to (`train_loss += loss.item()`), not counters (`+= 1`),
    with the values added; a name the loop also assigns otherwise is not a running sum we
    can type (its values list holds None)."""
    sums: dict[str, list] = {}
    assigned: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            name = dotted_name(node.target)
            if isinstance(node.operator, cst.AddAssign) and not isinstance(node.value, (cst.Integer, cst.Float)):
                if name is not None:
                    sums.setdefault(name, []).append(node.value)
            elif name is not None:
                assigned.add(name)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            name = dotted_name(node.target)
            if name is not None:
                assigned.add(name)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    loop.body.visit(_Find())
    for name in assigned & set(sums):
        sums[name].append(None)
    return sums


_NUMBER_CALLS = {"float", "int", "len"}


def _kind(expr: cst.BaseExpression | None, losses: set[str]) -> str | None:
    """"number" for a Python number (`loss.item()`, `float(x)`, `loss.data[0]`, sizes and
    products of those), "tensor" for a loss tensor on the device (`loss`, `loss.detach()`,
    `loss.data`), None when we cannot tell."""
    if expr is None:
        return None
    if isinstance(expr, (cst.Integer, cst.Float)):
        return "number"
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in _NUMBER_CALLS:
            return "number"
        if isinstance(func, cst.Attribute) and func.attr.value == "item" and not expr.args:
            return "number"
        if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(expr.args) == 1:
            return "number"
        if isinstance(func, cst.Attribute) and func.attr.value == "detach" and not expr.args:
            return "tensor" if _kind(func.value, losses) == "tensor" else None
        return None
    if isinstance(expr, cst.Subscript):
        value = expr.value
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0":
            if isinstance(value, cst.Attribute) and value.attr.value == "data":
                return "number"  # pre-0.4 `loss.data[0]`: a Python number
            if isinstance(value, cst.Attribute) and value.attr.value == "shape":
                return "number"
        return None
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return "tensor" if dotted_name(expr.value) in losses else None
    if isinstance(expr, cst.Name):
        return "tensor" if expr.value in losses else None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide, cst.Add, cst.Subtract, cst.Power)):
        kinds = {_kind(expr.left, losses), _kind(expr.right, losses)}
        if None in kinds:
            return None
        return "tensor" if "tensor" in kinds else "number"
    if isinstance(expr, cst.UnaryOperation):
        return _kind(expr.expression, losses)
    return None


def _has_return(body: cst.CSTNode) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    body.visit(_Find())
    return bool(found)


def _dataset_size_of(expr: cst.BaseExpression) -> str | None:
    """`train_loader` for `len(train_loader.dataset)`."""
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "len" and len(expr.args) == 1:
        inner = expr.args[0].value
        if isinstance(inner, cst.Attribute) and inner.attr.value == "dataset":
            return dotted_name(inner.value)
    return None


def _batch_count_of(expr: cst.BaseExpression) -> str | None:
    """`train_loader` for `len(train_loader)`: the number of batches this process draws."""
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "len" and len(expr.args) == 1:
        return dotted_name(expr.args[0].value)
    return None


def _ancestors(analysis, node: cst.CSTNode):
    current = analysis.parent(node)
    while current is not None:
        yield current
        current = analysis.parent(current)
