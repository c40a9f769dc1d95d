"""AM106: a prepared model moved to the CPU (or another dtype) only to save it."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.analysis.save_moves import save_moves
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

    In a file that gets no Accelerator but whose code the run calls (a base class's
    `save_network(network, ...)` saving `network.cpu().state_dict()`), the move is
    reported and left as written, with the move back to a GPU given by hand.
    """

    code = "AM106"
    name = "model-moved-to-save"
    message = "`{move}` moves the prepared `{model}` only to save it; save a {what} copy of its state dict and leave the model in place{note}"
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
            self._in_code_the_run_calls()
            return
        for found in save_moves(self.analysis):
            edits = [_drop(found.off, found.off_line)]
            if found.back is not None and found.back_line is not None:
                edits.append(_drop(found.back, found.back_line))
            edits += [replace(state, _converted(state, found.convert)) for state in found.states]
            what = _KINDS.get(found.convert, found.convert)
            self.report(found.off, edits=edits, move=_EMPTY.code_for_node(found.off).strip(), model=found.model, what=what, note="")

    def _in_code_the_run_calls(self) -> None:
        """A save helper of a base class (pix2pixHD's and Attention-Gated-Networks'
        `BaseModel.save_network(network, ...)`: `torch.save(network.cpu().state_dict(), path)`,
        then `network.cuda(gpu_ids[0])`), in a file given no Accelerator whose code the run
        calls with the models it trains. Reported, left as written: the models the run
        hands it are prepared elsewhere."""
        analysis, names = self.analysis, self.ctx.config.run_callers
        for fact in analysis.facts.calls:
            if fact.qualified != "torch.save" or not fact.node.args or not run_by_other_files(analysis, fact.node, names, self.ctx.config.project_unpassed):
                continue
            function = analysis.branches.function_of(fact.node)
            params = {p.name.value for p in function.params.params} if function is not None else set()
            params |= _fetched_from_self(analysis, function)
            for off, model in _moved_states(analysis.nodes_under(fact.node.args[0].value, "Call"), params):
                if _on_the_cpu_path(analysis, off):
                    continue
                back = _moved_back(analysis, function, model, fact.node)
                note = _ELSEWHERE + (f", and `{back}` puts every process's copy on that one GPU" if back else "") + ")"
                self.report(off, move=_EMPTY.code_for_node(off).strip(), model=model, what="CPU", note=note)


_ELSEWHERE = (
    f" ({RUN_CALLS_IT}; a model they prepared would be "
    "moved off its device mid-training"
)


def _moved_states(calls: list[cst.Call], params: set[str]) -> list[tuple[cst.Call, str]]:
    """`network.cpu()` in `network.cpu().state_dict()` (or `network.module.cpu()`) among
    the calls of what is saved, for a parameter `network` of the helper or a model it
    fetches from its object by name."""
    out = []
    for state in calls:
        func = state.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "state_dict" and isinstance(func.value, cst.Call)):
            continue
        off = func.value
        moved = off.func
        if not (isinstance(moved, cst.Attribute) and moved.attr.value == "cpu"):
            continue
        receiver = moved.value
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "module":
            receiver = receiver.value  # the model a DataParallel wrap holds
        if isinstance(receiver, cst.Name) and receiver.value in params:
            out.append((off, receiver.value))
    return out


def _on_the_cpu_path(analysis, node: cst.CSTNode) -> bool:
    """In the `else:` of `if ... torch.cuda.is_available():` (CycleGAN's save_networks):
    there the model is on the CPU already, and `.cpu()` moves nothing."""
    child, parent = node, analysis.parent(node)
    while parent is not None and not isinstance(parent, cst.FunctionDef):
        if isinstance(parent, cst.If) and child is parent.orelse and "cuda.is_available" in _EMPTY.code_for_node(parent.test):
            return True
        child, parent = parent, analysis.parent(parent)
    return False


def _fetched_from_self(analysis, function: cst.FunctionDef | None) -> set[str]:
    """Names the function binds to one of its object's attributes picked by name
    (CycleGAN's `net = getattr(self, "net" + name)` in BaseModel.save_networks)."""
    if function is None:
        return set()
    scope = analysis.scope_of(function.body)
    return {
        b.name for b in analysis.facts.bindings
        if b.scope is scope and isinstance(b.value, cst.Call) and dotted_name(b.value.func) == "getattr"
        and b.value.args and dotted_name(b.value.args[0].value) == "self"
    }


def _moved_back(analysis, function: cst.FunctionDef | None, model: str, save: cst.Call) -> str | None:
    """`network.cuda(gpu_ids[0])` after the save: a move back to a GPU given by hand."""
    if function is None:
        return None
    for call in analysis.nodes_under(function, "Call"):
        func = call.func
        if (
            isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to") and dotted_name(func.value) == model
            and call.args and analysis.order(call) > analysis.order(save)
        ):
            return _EMPTY.code_for_node(call).strip()
    return None


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
