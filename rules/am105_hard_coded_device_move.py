"""AM105: a move that prepare() does not make redundant names its device by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import DeviceMove
from migrator.analysis.device import literal_device
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_EMPTY = cst.Module([])


class HardCodedDeviceMove(Rule):
    """## What it does
    Rewrites `.cuda()`, `.cuda(0)`, `.to("cuda:0")`, `.to(0)`,
    `.to(torch.device("cuda"))` and `.to(config.DEVICE)` (a settings module's constant) on objects the Accelerator does not place (a tensor made
    in the loop, a model rebuilt for inference, a frozen network) to
    `.to(accelerator.device)`, keeping the other arguments (`non_blocking=True`, a dtype).
    Moves that prepare() makes redundant are AM101's.

    ## Why is this bad?
    Every process has its own device, `accelerator.device`. `"cuda:0"` puts every
    process's tensor on GPU 0, next to a model on GPU 1, 2, ...; `.cuda()` fails on a
    machine without a GPU, and ignores `Accelerator(cpu=True)`.

    ## Example
    ```python
    for x, y in loader:
        noise = torch.randn(x.shape).cuda()
    ```

    Use instead:
    ```python
    for x, y in loader:
        noise = torch.randn(x.shape).to(accelerator.device)
    ```

    ## Known limits
    Only in code that trains (or loses a move to prepare()): an inference helper that
    picks its own device is left alone. Devices held in variables (`device`,
    `args.device`) are AM102's.
    """

    code = "AM105"
    name = "hard-coded-device-move"
    message = "`{move}` names the device by hand; each process has its own: use `accelerator.device`"
    fix_title = "Move to `accelerator.device`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for step in range(2):\n    x = torch.zeros(1, 2).cuda()\n    model(x).sum().backward()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
                "for step in range(2):\n    x = torch.zeros(1, 2).to(accelerator.device)\n"
                "    accelerator.backward(model(x).sum())\n"
            ),
            at=("6:9",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        for move in analysis.device_moves:
            if id(move.call) in analysis.droppable_moves or not literal_device(move, analysis.imports):
                continue
            if not self._trains_here(move.call):
                continue
            accelerator = analysis.accelerator_at(move.call)
            if accelerator is None:
                continue
            self.report(move.call, edits=[replace(move.call, _retargeted(move, accelerator))], move=_describe(move))

    def _trains_here(self, node: cst.CSTNode) -> bool:
        """The scope trains, or other moves in it go to prepare(), or it uses prepared
        objects: the Accelerator's device is the one its tensors must meet."""
        analysis = self.analysis
        scope = analysis.scope_of(node)
        block = analysis.training_block
        if block is not None and scope is block.scope:
            return True
        if any(id(m.call) in analysis.droppable_moves and analysis.scope_of(m.call) is scope for m in analysis.device_moves):
            return True
        prepared = analysis.prepared
        return any(load.scope is scope and load.name in prepared for load in analysis.facts.loads)


def _retargeted(move: DeviceMove, accelerator: str) -> cst.Call:
    """`x.cuda(0, non_blocking=True)` -> `x.to(accelerator.device, non_blocking=True)`."""
    call = move.call
    others = [a for a in call.args if a.value is not move.device_arg]
    device = cst.Arg(cst.parse_expression(f"{accelerator}.device"))
    args = [device, *others]
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + args[-1:]
    func = call.func.with_changes(attr=cst.Name("to"))  # type: ignore[attr-defined]
    return call.with_changes(func=func, args=args)


def _describe(move: DeviceMove) -> str:
    func = move.call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else "to"
    args = ", ".join(_EMPTY.code_for_node(a).rstrip(", ") for a in move.call.args)
    return f".{method}({args})"
