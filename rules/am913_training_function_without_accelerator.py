"""AM913: a function that trains or evaluates what its caller set up, with no Accelerator."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role
from migrator.analysis.unreached import unreached_functions
from migrator.rule import Example, Rule


# the class makes or replaces what it trains: the prepare belongs there
_MADE_HERE = (
    "hand it to the class, whose `{method}` makes or replaces what it trains ({made}): prepare the model and the "
    "optimizer there, once they are made (a caller's prepared model would be replaced), and hand "
    "`accelerator.unwrap_model(model)` to what saves or pickles it"
)


class TrainingFunctionWithoutAccelerator(Rule):
    """## What it does
    In a file that makes no Accelerator and builds no training set-up of its own (an
    `engine.py` beside `train.py`), reports each function that receives the model, the
    optimizer or the dataloader as parameters and calls `loss.backward()`,
    `clip_grad_norm_`/`clip_grad_value_` or `optimizer.step()`, or collects evaluation
    outputs (`fin_outputs.extend(outputs.cpu().numpy().tolist())`) from a loader it is
    given. Each finding names the call and what it becomes, and what the caller prepares
    and hands in; a scheduler it is handed is named apart (the caller's AM201 decides
    whether it is prepared: one sized per process or stepped per epoch is not), and a
    loader the callers build sharded by another file's builder is left out. Nothing is
    changed.

    ## Why is this bad?
    Once the caller prepares the model, the optimizer and the loaders, this code runs on
    every process with 1/N of the data. A plain `loss.backward()` skips the loss scaling
    of mixed precision and the division of gradient accumulation; a `clip_grad_norm_`
    clips fp16 gradients before they are unscaled; and the predictions an evaluation
    function returns are this process's share only, so the accuracy the caller computes
    from them differs between processes and is not the model's. Migrating the caller
    alone leaves all of this silently single-process.

    ## What to do by hand
    Give the function an `accelerator` parameter and pass the caller's Accelerator in
    (the caller is where `accelerator.prepare(...)` is): `accelerator.backward(loss)`,
    `accelerator.clip_grad_norm_(...)`, and in evaluation
    `outputs, targets = accelerator.gather_for_metrics((outputs, targets))` before the
    values are collected. Moves such as `ids.to(device, dtype=torch.long)` can stay when
    the caller passes `accelerator.device`.

    ## Example
    ```python
    def train_fn(data_loader, model, optimizer):
        for x, y in data_loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
    ```

    Use instead:
    ```python
    def train_fn(data_loader, model, optimizer, accelerator):
        for x, y in data_loader:
            loss = model(x, y)
            accelerator.backward(loss)
            optimizer.step()
    ```

    ## With its callers in the same run
    `accel-migrate train.py engine.py` (or the folder) migrates the two as one program:
    the function gets a keyword-only `accelerator` parameter and the rules of a single
    script, and every call in the run passes `accelerator=accelerator` (AM914). This
    finding is then not given. It stays, and nothing changes, when the function is run
    alone, or when some call of it in the run has no Accelerator to pass, it is used as a
    value, or a file beside the run that is not in it calls it (a caller that would not be
    updated).

    Where a method of the function's class makes or replaces the model or the optimizer
    itself (builds the optimizer when none is given, swaps in the model of a checkpoint it
    resumes from), the finding says to prepare them there, once they are made, rather than
    in a caller, whose prepared model would be replaced.

    ## Known limits
    Run alone, the migrator does not change the function's signature, because the
    callers in other files would not pass the new argument. In a run, a class is threaded
    only through its own `__init__` (no subclass, no `**kwargs`).

    ## See also
    - AM912 (optimizer-free-training): a script that trains with no optimizer at all.
    """

    code = "AM913"
    name = "training-function-without-accelerator"
    message = "`{function}` {what}: it needs the Accelerator ({instead}); {source}"
    examples = (
        Example(
            before=(
                "import torch\n\n\n"
                "def train_fn(data_loader, model, optimizer):\n"
                "    for x, y in data_loader:\n"
                "        loss = model(x, y)\n"
                "        loss.backward()\n"
                "        optimizer.step()\n"
            ),
            at=("7:9",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        sharded = set(self.ctx.config.project_sharded_params)  # handed a loader sharded already: not prepared
        roles = self.analysis.roles
        for unreached in unreached_functions(self.analysis):
            handed = [name for name in unreached.inputs if name not in sharded]
            # a parameter stepped beside the optimizer gets no role of its own: its name tells
            schedulers = [name for name in handed if roles.of(name) is Role.SCHEDULER or "sched" in name.lower()]
            inputs = ", ".join(f"`{name}`" for name in handed if name not in schedulers)
            if schedulers:  # prepared or not by how it is stepped and sized (lufficc/SSD's milestones // num_gpus: not)
                shown = ", ".join(f"`{name}`" for name in schedulers)
                inputs += f" (and hands it {shown}, prepared only where the caller's AM201 prepares it)"
            source = f"pass it in from the caller that prepares {inputs}"
            if unreached.made_in is not None:
                method, made = unreached.made_in
                shown = ", ".join(f"`{name}` L{line}" for name, line in made[:4])
                source = _MADE_HERE.format(owner=unreached.name.split(".")[0], method=method, made=shown)
            for need in unreached.needs:
                self.report(need.node, function=unreached.name, what=need.what, instead=need.instead, source=source)
