"""AM521: a checkpoint loaded for its state dicts onto the device it was saved from."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role
from migrator.analysis.names import dotted_name
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.analysis.handed_models import HandedModel, handed_model
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_LOADS = {"torch.load"}
# in code other files run on every process, with no Accelerator to name
_ELSEWHERE = (
    f" ({RUN_CALLS_IT}, and this file gets no Accelerator: pass `map_location=\"cpu\"` there;"
    " `load_state_dict` copies each tensor to where the model is)"
)


# ... handing back what it loads, which may be a whole pickled model (seq2seq's Checkpoint.load):
# on the CPU it would stay there, so each process's own GPU is the place
_ELSEWHERE_WHOLE = (
    f" ({RUN_CALLS_IT}, and this file gets no Accelerator: load onto this process's device, "
    "`map_location=f\"cuda:{int(os.environ.get('LOCAL_RANK', 0))}\"` on a GPU machine (a whole pickled model stays "
    "where it is loaded), or `map_location=\"cpu\"` where its callers only copy it into a model with `load_state_dict`)"
)


# in code other files run on every process that the file's Accelerator does not reach (MUNIT's
# trainer.py: the Accelerator goes into MUNIT_Trainer, UNIT_Trainer.resume loads too)
_UNREACHED = " (left as written: no Accelerator reaches {where}; pass `map_location=\"cpu\"` there; `load_state_dict` copies each tensor to where the model is)"


# in a set-up that hands its model to another file's training and creates no Accelerator
_HANDED = (
    " (left as written: this file hands `{model}` to the training of `{spelling}`, which gets no Accelerator; "
    "with the one you create by hand, load onto `accelerator.device`, or pass `map_location=\"cpu\"`: "
    "`load_state_dict` copies each tensor to where the model is)"
)


class CheckpointLoadedOntoSavingDevice(Rule):
    """## What it does
    In a script being migrated, gives `torch.load(path)` without `map_location` the
    argument `map_location=accelerator.device` when what it loads goes into
    `load_state_dict(...)` (`model.load_state_dict(torch.load(path))`, or a checkpoint
    bound to a name whose entries are handed to `load_state_dict`), or when its entries
    are the model and optimizer objects pickled whole (`model = checkpoint['model']`).

    ## Why is this bad?
    torch.load puts every tensor back on the device it was saved from, usually `cuda:0`.
    On N processes each one first loads the whole checkpoint onto GPU 0: N copies there,
    memory GPU 0 keeps for the rest of the run, and an out-of-memory error with a large
    model or many processes. Mapped, each process loads onto its own device.

    ## Example
    ```python
    model.load_state_dict(torch.load(args.resume))
    ```

    Use instead:
    ```python
    model.load_state_dict(torch.load(args.resume, map_location=accelerator.device))
    ```

    ## Fix safety
    `load_state_dict` copies into the tensors the model (or optimizer) already has, on
    their device, so where the loaded tensors sit first changes nothing the script sees;
    on one process `accelerator.device` is the GPU the checkpoint was saved from.

    ## Known limits
    A load whose tensors are used otherwise (data, embeddings) keeps its device, and so
    does one that already says where (`map_location=`). In code other files of the run
    call on every process, in a file given no Accelerator or where its Accelerator does not
    reach (a second trainer class beside the one it goes into), the load is named and left
    as written, with `map_location="cpu"` as the remedy; so is a load into a model that a
    file with no Accelerator builds and hands to the training of another file that gets
    none (the hand migration's to place).
    """

    code = "AM521"
    name = "checkpoint-loaded-onto-saving-device"
    message = (
        "`torch.load(...)` puts the checkpoint on the device it was saved from (GPU 0) on every process; load it onto "
        "`accelerator.device`{note}"
    )
    fix_title = "Pass `map_location=accelerator.device`"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel.load_state_dict(torch.load(\"last.pth\"))\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel.load_state_dict(torch.load(\"last.pth\", map_location=accelerator.device))\n"
            ),
            at=("6:23",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        shared = not analysis.migrating and bool(config.run_callers) and not analysis.accelerator_names
        handed = None if analysis.migrating else handed_model(analysis, config)
        if handed is not None:
            self._loads_into_models(handed)
            return
        if not analysis.migrating and not shared:
            return
        states = _state_dict_sources(analysis)
        for fact in analysis.facts.calls:
            if (fact.qualified or "") not in _LOADS or _has_location(analysis, fact.node):
                continue
            if not (_feeds_load_state_dict(analysis, fact.node, states) or shared and _handed_back(analysis, fact.node)):
                continue
            if shared:
                if run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                    into_a_model = _feeds_load_state_dict(analysis, fact.node, states)
                    self.report(fact.node, note=_ELSEWHERE if into_a_model else _ELSEWHERE_WHOLE)
                continue
            accelerator = analysis.accelerator_at(fact.node)
            if accelerator is None:
                if run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                    scope = analysis.scope_of(fact.node)
                    where = f"`{scope.name.value}`" if isinstance(scope, cst.FunctionDef) else "this code"
                    self.report(fact.node, note=_UNREACHED.format(where=where))
                continue
            self.report(fact.node, edits=[replace(fact.node, _mapped(fact.node, accelerator))], note="")

    def _loads_into_models(self, handed: HandedModel) -> None:
        """A set-up whose model another file's unmigrated training gets (cnn-text-
        classification's main.py, `cnn.load_state_dict(torch.load(args.snapshot))`)."""
        analysis = self.analysis
        states = _state_dict_sources(analysis)
        note = _HANDED.format(model=handed.binding.name, spelling=handed.spelling)
        for fact in analysis.facts.calls:
            if (fact.qualified or "") in _LOADS and not _has_location(analysis, fact.node):
                if _feeds_load_state_dict(analysis, fact.node, states):
                    self.report(fact.node, note=note)


def _has_location(analysis, call: cst.Call) -> bool:
    """A `map_location` that says where, always: not None, nor a name the function binds
    to None on a GPU machine (deep-person-reid's `map_location = None if
    torch.cuda.is_available() else 'cpu'`)."""
    given = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "map_location"]
    given += [a.value for a in call.args[1:2] if a.keyword is None]
    return bool(given) and not any(_may_be_none(analysis, call, value) for value in given)


def _may_be_none(analysis, call: cst.Call, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name) and value.value == "None":
        return True
    if not isinstance(value, cst.Name):
        return False
    function = analysis.branches.function_of(call)
    for b in analysis.facts.bindings:
        if b.name == value.value and b.value is not None and analysis.branches.function_of(b.value) is function:
            if isinstance(b.value, cst.IfExp) and any(
                isinstance(v, cst.Name) and v.value == "None" for v in (b.value.body, b.value.orelse)
            ):
                return True
    return False


def _handed_back(analysis, call: cst.Call) -> bool:
    """`return torch.load(p)`, or `checkpoint = torch.load(p)` and then `return checkpoint`:
    a load helper whose callers (in other files) load what it returns into their models."""
    parent = analysis.parent(call)
    if isinstance(parent, cst.Return):
        return True
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return False
    name = parent.targets[0].target.value
    function = analysis.branches.function_of(call)
    return function is not None and any(
        r.value is not None and any(isinstance(n, cst.Name) and n.value == name for n in analysis.nodes_under(r.value, "Name"))
        for r in analysis.nodes_under(function, "Return")
    )  # `return checkpoint`, or handed on in what it returns (seq2seq's `return Checkpoint(model=model, ...)`)


def _state_dict_sources(analysis) -> set[str]:
    """Names whose value, or an entry of it, is handed to `load_state_dict(...)`, or whose
    entries are the model or optimizer themselves (`model = checkpoint['model']`: the SSD
    tutorial pickles the objects whole; loaded onto GPU 0 on every process, the model's
    plain tensor attributes stay there after prepare() moves its parameters)."""
    out = set()
    roles = analysis.roles
    for b in analysis.facts.bindings:
        value = b.element if b.element is not None else b.value
        if isinstance(value, cst.Subscript) and roles.of(b.name) in (Role.MODEL, Role.OPTIMIZER):
            name = dotted_name(value.value)
            if name is not None:
                out.add(name)
    for fact in analysis.facts.calls:
        func = fact.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict" and fact.node.args:
            value = fact.node.args[0].value
            while isinstance(value, cst.Subscript):
                value = value.value
            name = dotted_name(value)
            if name is not None:
                out.add(name)
    return out


def _feeds_load_state_dict(analysis, call: cst.Call, states: set[str]) -> bool:
    """`x.load_state_dict(torch.load(p))`, or `ckpt = torch.load(p)` with `ckpt` (or
    `ckpt[...]`) handed to one."""
    arg = analysis.parent(call)
    outer = analysis.parent(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(outer, cst.Call) and isinstance(outer.func, cst.Attribute) and outer.func.attr.value == "load_state_dict":
        return True
    assign = analysis.parent(call)
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        name = dotted_name(assign.targets[0].target)
        return name is not None and name in states
    return False


def _mapped(call: cst.Call, accelerator: str) -> cst.Call:
    args = list(call.args)
    if args and args[-1].comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    mapped = cst.Arg(
        cst.parse_expression(f"{accelerator}.device"), keyword=cst.Name("map_location"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return call.with_changes(args=[*args, mapped])
