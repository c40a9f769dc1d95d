"""AM106: a prepared model moved to the CPU (or another dtype) only to save it."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.save_moves import SaveMove, save_moves
from migrator.edits import Edit, remove, replace
from migrator.rule import Example, FixAvailability, Rule

_EMPTY = cst.Module([])
_KINDS = {"cpu": "CPU", "half": "float16", "double": "float64", "bfloat16": "bfloat16"}


class ModelMovedToSave(Rule):
    """## What it does
    Finds a prepared model moved off its device, or to another dtype, around a save of
    its state dict (`model.eval().cpu()`, `torch.save(model.state_dict(), path)`,
    `model.to(device).train()`), and saves a converted copy of the state dict instead,
    leaving the model where the Accelerator put it: the `.cpu()` and the move back go,
    `.eval()` and `.train()` stay, and the save writes
    `{name: tensor.cpu() for name, tensor in model.state_dict().items()}` (for a dtype,
    floating-point tensors only, as `Module.half()` does). The checkpoint holds the same
    tensors as before; AM510 then saves it once, unwrapped.

    ## Why is this bad?
    After prepare() the model is wrapped in DistributedDataParallel, which keeps hooks and
    gradient buckets on the parameters it wrapped. Moving them to the CPU and back (or to
    float16 and back) in the middle of training leaves the processes' gradients
    unsynchronised, with no error.

    ## Example
    ```python
    model.eval().cpu()
    torch.save(model.state_dict(), path)
    model.to(device).train()
    ```

    Use instead:
    ```python
    model.eval()
    torch.save({name: tensor.cpu() for name, tensor in model.state_dict().items()}, path)
    model.train()
    ```

    ## Known limits
    Only a move alone on its line, followed in the same block by the save (nothing else
    using the model between) and then by the move back, or by nothing at all when the
    model is not used again (a final save). Any other move of a prepared model is left
    as written and the file is refused (AM952).
    """

    code = "AM106"
    name = "model-moved-to-save"
    message = "`{move}` moves the prepared `{model}` only to save it; save a {what} copy of its state dict and leave the model in place"
    fix_title = "Save a converted copy of the state dict; drop the moves"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for step in range(2):\n    model(torch.ones(1, 2)).sum().backward()\n    opt.step()\n"
                "    model.eval().cpu()\n    torch.save(model.state_dict(), 'm.pt')\n    model.cuda().train()\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, opt = accelerator.prepare(model, opt)\n"
                "for step in range(2):\n    accelerator.backward(model(torch.ones(1, 2)).sum())\n    opt.step()\n"
                "    model.eval()\n    accelerator.wait_for_everyone()\n"
                "    accelerator.save({name: tensor.cpu() for name, tensor in accelerator.unwrap_model(model).state_dict().items()}, 'm.pt')\n"
                "    model.train()\n"
            ),
            at=("8:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        if not self.analysis.migrating:
            return
        for found in save_moves(self.analysis):
            edits = [_drop(found.off, found.off_line)]
            if found.back is not None and found.back_line is not None:
                edits.append(_drop(found.back, found.back_line))
            edits += [replace(state, _converted(state, found.convert)) for state in found.states]
            what = _KINDS.get(found.convert, found.convert)
            self.report(found.off, edits=edits, move=_EMPTY.code_for_node(found.off).strip(), model=found.model, what=what)


def _drop(call: cst.Call, line: cst.SimpleStatementLine) -> Edit:
    """`model.eval().cpu()` → `model.eval()`; a line left as the bare model goes."""
    receiver = call.func.value  # type: ignore[attr-defined]
    if line.body[0].value is call and not isinstance(receiver, cst.Call):  # type: ignore[attr-defined]
        return remove(line)
    return replace(call, receiver)


def _converted(state: cst.Call, convert: str) -> cst.BaseExpression:
    source = _EMPTY.code_for_node(state).strip()
    if convert == "cpu":
        return cst.parse_expression(f"{{name: tensor.cpu() for name, tensor in {source}.items()}}")
    return cst.parse_expression(
        f"{{name: tensor.{convert}() if tensor.is_floating_point() else tensor for name, tensor in {source}.items()}}"
    )
