"""AM101: moving prepared models and batches by hand with `.to(device)` / `.cuda()`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import DeviceMove
from migrator.analysis.device_choice import AVAILABILITY
from migrator.analysis.names import dotted_name
from migrator.analysis.removal import removal_unit, shared_removals
from migrator.analysis.walk import contains
from migrator.cst import is_noop, removal_node
from migrator.edits import Fix, remove, replace
from migrator.rule import Example, FixAvailability, Rule

_EMPTY = cst.Module([])


def _reduced(move: DeviceMove, updated: cst.Call) -> cst.BaseExpression:
    """The call without its device: the receiver, or `.to(<dtype args>)`."""
    receiver = updated.func.value  # type: ignore[attr-defined]
    if not move.kept_args:
        return receiver.with_changes(lpar=[], rpar=[]) if _safe_unparen(receiver) else receiver
    kept_ids = {id(a) for a in move.kept_args}
    kept = [u for o, u in zip(move.call.args, updated.args) if id(o) in kept_ids]
    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=kept)


def _safe_unparen(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))


class _StripMoves(cst.CSTTransformer):
    def __init__(self, moves: dict[int, DeviceMove]) -> None:
        super().__init__()
        self.moves = moves

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        move = self.moves.get(id(original))
        return _reduced(move, updated) if move else updated


class TensorToDevice(Rule):
    """## What it does
    Removes `.to(device)`, `.to("cuda")`, `.to(torch.device(...))`,
    `.to(device=device)`, `.to(device, non_blocking=True)` and `.cuda()` from models that
    are prepared and from batches that come out of a prepared dataloader. A statement
    left doing nothing goes (`model.to(device)`, `x = x`,
    `batch = {k: v for k, v in batch.items()}`). Dtype casts stay: `.to(device,
    torch.float16)` becomes `.to(torch.float16)`.

    ## Why is this bad?
    `accelerator.prepare()` puts the model on this process's device and the prepared
    dataloader yields batches already there. A hard-coded `.cuda()` sends every process
    to GPU 0, and `.to(device)` repeats work the Accelerator does (or fights it).

    ## Example
    ```python
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    Use instead:
    ```python
    for x, y in loader:
        ...
    ```

    ## Known limits
    Tensors created inside the loop (`torch.randn(...).to(device)`) keep their move:
    nothing else would place them, so `device` becomes `accelerator.device`.
    """

    code = "AM101"
    name = "tensor-to-device"
    message = "`{move}` moves a prepared object by hand; the Accelerator places it"
    fix_title = "Remove the device move"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\nmodel.to(\"cuda\")\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
            ),
            at=("5:9", "8:1"),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        by_statement: dict[int, tuple[cst.CSTNode, list[DeviceMove]]] = {}
        for move in analysis.device_moves:
            if id(move.call) not in analysis.droppable_moves:
                continue
            statement = analysis.statement_of(move.call) or move.call
            by_statement.setdefault(id(statement), (statement, []))[1].append(move)
        noops = [s for s, moves in by_statement.values() if self._emptied(s, moves) and self._device_gated(s)]
        # statements emptied together share one Fix: `if args.gpu:` holding only moves goes whole
        removals = shared_removals(
            noops, analysis.parent, analysis.imports
        )
        for statement, moves in by_statement.values():
            fix = removals.get(id(statement)) or self._fix(statement, moves)
            for move in moves:
                self.report(move.call, edits=fix, move=self._describe(move))

    def _device_gated(self, statement: cst.CSTNode) -> bool:
        """In the body of an `if` that only asks whether to use the GPU: a switch the
        Accelerator's `cpu=` now carries, or an availability check. Under any other test
        (`if args.gpu is not None:`) a body left with `pass` is kept for the verifier to judge."""
        analysis = self.analysis
        line = analysis.parent(statement)
        block = analysis.parent(line) if line is not None else None
        owner = analysis.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(owner, cst.If):
            return False
        test = owner.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        switches = {c.name for c in (analysis.patterns.devices if analysis.patterns is not None else ()) if c.flag}
        if dotted_name(test) in switches:
            return True
        return isinstance(test, cst.Call) and analysis.imports.qualify(test.func) in AVAILABILITY

    @staticmethod
    def _emptied(statement: cst.CSTNode, moves: list[DeviceMove]) -> bool:
        """`x = x.cuda()` / `model.cuda()`: nothing is left once the moves go."""
        if not isinstance(statement, cst.BaseSmallStatement):
            return False
        new = statement.visit(_StripMoves({id(m.call): m for m in moves}))
        return isinstance(new, cst.BaseSmallStatement) and is_noop(new)

    def _fix(self, statement: cst.CSTNode, moves: list[DeviceMove]) -> Fix:
        strip = _StripMoves({id(m.call): m for m in moves})
        if isinstance(statement, cst.BaseSmallStatement):
            new = statement.visit(strip)
            if isinstance(new, cst.BaseSmallStatement) and is_noop(new):
                line = self.analysis.parent(statement)
                node = removal_unit(removal_node(line, statement), self.analysis.parent, self.analysis.imports)
                return Fix((remove(node),))  # with an `if args.cuda:` left empty
            return Fix((replace(statement, new),))
        outermost = [m for m in moves if not any(_contains(o.call, m.call) for o in moves if o is not m)]
        return Fix(tuple(replace(m.call, m.call.visit(strip)) for m in outermost))

    @staticmethod
    def _describe(move: DeviceMove) -> str:
        func = move.call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else "to"
        args = ", ".join(_EMPTY.code_for_node(a).rstrip(", ") for a in move.call.args)
        return f".{method}({args})"


def _contains(outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    return outer is not inner and contains(outer, inner)
