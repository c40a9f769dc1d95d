"""AM501: a prepared model's `state_dict()` saved without `accelerator.unwrap_model`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.prepared import accelerator_name_at, holds_prepared_model, prepared_models
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.analysis.roles import module_classes
from migrator.analysis.saving import is_save_call, state_dict_saved
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class SaveWrappedModel(Rule):
    """## What it does
    Finds `model.state_dict()` of a prepared model that is saved — passed to
    `torch.save`, `accelerator.save` or `safetensors.torch.save_file`, directly, inside a
    dict (`{"model": model.state_dict(), "epoch": epoch}`), or through a variable saved
    later in the same function — and rewrites it to
    `accelerator.unwrap_model(model).state_dict()`.

    ## Why is this bad?
    On N processes the prepared model is wrapped in DistributedDataParallel, whose state
    dict prefixes every key with `module.`; on one process it is not wrapped. A checkpoint
    written by an N-process run does not load into the plain model
    (`Unexpected key(s) in state_dict: "module.fc1.weight"...`), and one written by a
    one-process run does not load into a wrapped model: the failure shows up later, at
    evaluation or resume time.

    ## Example
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.save(model.state_dict(), "model.pt")
    ```

    Use instead:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.save(accelerator.unwrap_model(model).state_dict(), "model.pt")
    ```

    ## Fix safety
    Unwrapping gives the same tensors under the plain parameter names, on any number of
    processes. When the same file loads a checkpoint back into a *prepared* model
    (`model.load_state_dict(...)`), that load may rely on the old `module.` keys, so the
    fix is then marked unsafe: load into `accelerator.unwrap_model(model)` too.

    ## See also
    - huggingface/accelerate#438: `Unexpected key(s) in state_dict: "module.` after a
      multi-GPU run (https://github.com/huggingface/accelerate/issues/438)
    - skorch-dev/skorch#1008: parameter names depend on the wrapping state, fixed by
      always unwrapping before saving and loading
    """

    code = "AM501"
    name = "save-wrapped-model"
    message = "`{name}.state_dict()` of the prepared model is saved with DDP's `module.` key prefix on N processes{note}"
    fix_title = "Save `accelerator.unwrap_model(model).state_dict()`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\n"
                "accelerator.save({\"model\": model.state_dict()}, \"ckpt.pt\")\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\n"
                "accelerator.save({\"model\": accelerator.unwrap_model(model).state_dict()}, \"ckpt.pt\")\n"
            ),
            at=("7:28",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        if not analysis.migrating and config.run_callers and not analysis.accelerator_names:
            self._in_code_the_run_calls()
            return
        models = prepared_models(analysis)
        if not models:
            return
        loads_into_prepared = any(
            c.func and c.func.endswith(".load_state_dict")
            and holds_prepared_model(analysis, c.node, c.func.rsplit(".", 1)[0], models)
            for c in analysis.facts.calls
        )
        for fact in analysis.facts.calls:
            func = fact.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "state_dict"):
                continue
            name = dotted_name(func.value)
            if name is None or not holds_prepared_model(analysis, fact.node, name, models):
                continue
            if not state_dict_saved(analysis, fact.node):
                continue
            accelerator = accelerator_name_at(analysis, fact.node) or analysis.accelerator_at(fact.node)
            if accelerator is None:
                self.report(fact.node, name=name, note="")
                continue
            new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
            self.report(fact.node, edits=[replace(func.value, new)], unsafe=loads_into_prepared, name=name, note="")

    def _in_code_the_run_calls(self) -> None:
        """deep-person-reid's `Engine.save_model`: `self._models[name].state_dict()` of the
        models `register_model` keeps, handed to torchtools' `save_checkpoint`, in a file
        given no Accelerator whose code other files run: the model they hand in is the
        prepared one, so what is saved carries `module.` on N processes. Named, left as
        written; a layer of a model class (`self.backbone` in its own method) is not."""
        analysis, config = self.analysis, self.ctx.config
        writers = {spelling for spelling, _ in config.project_writers}
        for fact in analysis.facts.calls:
            func = fact.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "state_dict"):
                continue
            receiver = cst.Module([]).code_for_node(func.value)
            if any(word in receiver for word in ("module", "unwrap", "without_ddp")) or not self._a_model(receiver):
                continue
            if not self._handed_in(fact.node, func.value):
                continue
            if not (state_dict_saved(analysis, fact.node) or self._handed_to_a_save(fact.node, writers)):
                continue
            if self._inside_torch_save(fact.node):
                continue  # AM510's note on that save asks for the unwrapped model already
            if run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                note = (
                    f" ({RUN_CALLS_IT}, handing it the model they prepare; save the unwrapped "
                    f"model's state, `accelerator.unwrap_model({receiver}).state_dict()`, or that of "
                    f"`{receiver}.module` where it is wrapped: its keys then load into a plain model on any number of processes)"
                )
                self.report(fact.node, name=receiver, note=note)

    def _handed_in(self, call: cst.Call, receiver: cst.BaseExpression) -> bool:
        """The model comes from the callers: a parameter of the function, or what the
        object keeps of one (`self.model = model`, `self._models[name] = model`) in a class
        that is not itself a model."""
        analysis = self.analysis
        function = analysis.branches.function_of(call)
        if function is None:
            return False
        root = receiver
        while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
            root = root.func if isinstance(root, cst.Call) else root.value
        if not isinstance(root, cst.Name):
            return False
        if root.value != "self":
            return root.value in self._params_at(call)
        owner = analysis.facts.method_of.get(id(function))
        if owner is None or owner.name.value in module_classes(analysis.facts):
            return False
        held = receiver
        while isinstance(held, cst.Subscript):
            held = held.value
        kept = cst.Module([]).code_for_node(held)
        return any(
            b.name == kept and isinstance(b.value, cst.Name) and b.value.value in self._params_at(b.statement)
            for b in analysis.facts.bindings
        ) or self._kept_in_a_subscript(owner, kept)

    def _params_at(self, node: cst.CSTNode) -> set[str]:
        function = self.analysis.branches.function_of(node)
        return {p.name.value for p in function.params.params} if function is not None else set()

    def _kept_in_a_subscript(self, owner: cst.ClassDef, kept: str) -> bool:
        """`self._models[name] = model` in a method of `owner`, `model` a parameter of it."""
        analysis = self.analysis
        for assign in analysis.nodes_under(owner, "Assign"):
            for target in assign.targets:
                t = target.target
                if (
                    isinstance(t, cst.Subscript) and cst.Module([]).code_for_node(t.value) == kept
                    and isinstance(assign.value, cst.Name) and assign.value.value in self._params_at(assign)
                ):
                    return True
        return False

    def _inside_torch_save(self, call: cst.Call) -> bool:
        return any(is_save_call(self.analysis, outer) for outer in self._calls_around(call))

    def _calls_around(self, call: cst.Call):
        """The calls `call` is an argument of, innermost first, up to its statement."""
        current = self.analysis.parent(call)
        while current is not None and not isinstance(current, cst.BaseStatement):
            if isinstance(current, cst.Call):
                yield current
            current = self.analysis.parent(current)

    def _a_model(self, receiver: str) -> bool:
        """Not the optimizer, scheduler or scaler saved beside it, by role or by name."""
        role = self.analysis.roles.of(receiver)
        last = receiver.rpartition(".")[2].split("[")[0].lower()
        return role not in (Role.OPTIMIZER, Role.SCHEDULER, Role.DATALOADER) and not any(
            word in last for word in ("optim", "sched", "scaler", "ema")
        )

    def _handed_to_a_save(self, call: cst.Call, writers: set[str]) -> bool:
        """Inside the arguments of a call of another file's helper that only writes a
        file, or of a call named for saving (torchtools' `save_checkpoint({'state_dict':
        model.state_dict(), ...}, path)`)."""
        spellings = (dotted_name(outer.func) or "" for outer in self._calls_around(call))
        return any(s in writers or "save" in s.rpartition(".")[2].lower() for s in spellings)
