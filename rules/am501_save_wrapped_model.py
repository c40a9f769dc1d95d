"""AM501: a prepared model's `state_dict()` saved without `accelerator.unwrap_model`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.prepared import accelerator_name_at, holds_prepared_model, prepared_models
from migrator.analysis.saving import state_dict_saved
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
    message = "`{name}.state_dict()` of the prepared model is saved with DDP's `module.` key prefix on N processes"
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
                self.report(fact.node, name=name)
                continue
            new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
            self.report(fact.node, edits=[replace(func.value, new)], unsafe=loads_into_prepared, name=name)
