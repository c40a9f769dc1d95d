"""AM912: a script that trains without a torch.optim optimizer."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.manual_update import hand_updated_models
from migrator.analysis.roles import optimizer_containers
from migrator.analysis.unreached import in_unreached_function, unreached_functions
from migrator.rule import Example, Rule

_CLIPS = {"clip_grad_norm_": "clip_grad_norm_", "clip_grad_norm": "clip_grad_norm_", "clip_grad_value_": "clip_grad_value_"}


class OptimizerFreeTraining(Rule):
    """## What it does
    A script that trains without a torch.optim optimizer, updating the parameters by hand
    (`for p in model.parameters(): p.data.add_(p.grad, alpha=-lr)`, as in pytorch/examples
    word_language_model), is migrated around the model that update walks: it is prepared
    alone and the update stays. When that model's data comes from no DataLoader
    (`get_batch(source, i)` over tensors), this rule says, at the first backward, that
    nothing splits the data between processes. When the migrator could not set the script
    up (no hand-written update it recognises), it reports the first backward and every
    `clip_grad_norm_`/`clip_grad_value_` instead, and the script stays as it is.
    A script whose torch.optim optimizers are all kept in a container
    (`self.optims[net] = torch.optim.Adam(...)`, a dict or list of them, stepped through
    `for optim in self.optims.values()`) is left as it is too, and the note names the
    container: the migration prepares objects bound to names, not the entries of a dict.
    It asks for the loaders the training draws from to be prepared too (built in the file
    or handed in), unless the file shards or splits its data itself.

    ## Why is this bad?
    The migration is built around the optimizer: where it is made is where training is
    set up and where `accelerator.prepare()` goes. Without one the migrator creates no
    Accelerator and leaves the script single-process: run on N processes, every process
    trains the whole data set on its own copy.

    ## What to do by hand (when the script is left as it is)
    Keep the hand-written update (and its learning-rate schedule): the Accelerator can
    prepare a model alone. Create `accelerator = Accelerator()`, prepare the model
    (`model = accelerator.prepare(model)`), and use `accelerator.backward(loss)` and
    `accelerator.clip_grad_norm_(model.parameters(), clip)`. The update
    `p.data.add_(p.grad, alpha=-lr)` over `model.parameters()` stays correct on N
    processes: DistributedDataParallel averages the gradients during the backward, so
    every process applies the same step. Methods of your own on the model
    (`model.init_hidden(...)`) then go through `accelerator.unwrap_model(model)`. Data
    held in tensors rather than a DataLoader (`get_batch(source, i)`) is not sharded
    across processes: every process trains on all of it unless you split it by
    `accelerator.process_index` or wrap it in a Dataset and a DataLoader.
    Do not replace the update by a torch.optim optimizer only to please the migrator:
    that changes the training (SGD's update is the same, but a hand-written annealing
    such as `lr /= 4.0` would no longer reach it).

    ## Example
    ```python
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    ```

    Use instead:
    ```python
    accelerator.backward(loss)  # with `model = accelerator.prepare(model)` where it is made
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    ```

    ## See also
    - AM913 (training-function-without-accelerator): functions that receive the model and
      optimizer from a caller in another file.
    """

    code = "AM912"
    name = "optimizer-free-training"
    message = "`{call}` trains {how}{rest}"
    examples = (
        Example(
            before=(
                "import torch\n\nmodel = torch.nn.Linear(2, 1)\nloss = model(torch.zeros(1, 2)).sum()\nloss.backward()\n"
                "for p in model.parameters():\n    p.data.add_(p.grad, alpha=-0.1)\n"
            ),
            at=("5:1",),
        ),
        Example(
            before=(
                "import torch\n\nnets = {'g': torch.nn.Linear(2, 2), 'd': torch.nn.Linear(2, 1)}\noptims = {}\n"
                "for name in nets:\n    optims[name] = torch.optim.Adam(nets[name].parameters())\n"
                "for step in range(3):\n    for optim in optims.values():\n        optim.zero_grad()\n"
                "    loss = nets['d'](nets['g'](torch.zeros(1, 2))).sum()\n    loss.backward()\n"
                "    for optim in optims.values():\n        optim.step()\n"
            ),
            at=("11:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.roles.names(Role.OPTIMIZER):
            return
        if analysis.migrating:
            self._note_unsplit_data()
            return
        reported_backward = False
        unreached = {id(u.function) for u in unreached_functions(analysis)}
        held = optimizer_containers(analysis.facts, analysis.parent)
        if held:
            return self._note_held_optimizers(held, unreached)
        model = _updated_model(analysis)
        data = "" if analysis.roles.names(Role.DATALOADER) else (
            "; with no DataLoader, every process trains on all the data unless you split it by `accelerator.process_index` (into shards of equal batch counts)"
        )
        for c in analysis.facts.calls:
            func = c.node.func
            if in_unreached_function(analysis, c.node, unreached):
                continue  # AM913's: the caller in another file holds the set-up
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and not c.node.args:
                receiver = cst.Module([]).code_for_node(func.value).strip()
                if reported_backward or (analysis.imports.qualify(func.value) or "").startswith("torch"):
                    continue
                loss = receiver if len(receiver) < 30 else "loss"
                self.report(c.node, call=f"{loss}.backward()", how=_NONE, rest=_by_hand(model, f"accelerator.backward({loss})", data))
                reported_backward = True
            elif (c.qualified or "").startswith("torch.nn.utils") and (c.qualified or "").rsplit(".", 1)[-1] in _CLIPS:
                clip = (c.qualified or "").rsplit(".", 1)[-1]
                self.report(c.node, call=f"{clip}(...)", how=_NONE, rest=_by_hand(model, f"accelerator.{_CLIPS[clip]}(...)", ""))

    def _note_held_optimizers(self, held: list[str], unreached: set[int]) -> None:
        """The optimizers are built, but kept in a container (`self.optims[net] = Adam(...)`):
        said once, at the first backward, with what to prepare by hand."""
        analysis = self.analysis
        for c in analysis.facts.calls:
            func = c.node.func
            if in_unreached_function(analysis, c.node, unreached):
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and not c.node.args:
                receiver = cst.Module([]).code_for_node(func.value).strip()
                if (analysis.imports.qualify(func.value) or "").startswith("torch"):
                    continue
                names = ", ".join(f"`{n}`" for n in held)
                self.report(
                    c.node, call=f"{receiver if len(receiver) < 30 else 'loss'}.backward()",
                    how=f"with optimizers kept in {names}",
                    rest=(
                        ", which the migration does not take apart, so the script is left single-process: prepare "
                        "each model with its optimizer (`net, opt = accelerator.prepare(net, opt)`) and put the "
                        f"prepared ones back, then use `accelerator.backward(...)`{self._loaders_too()}"
                    ),
                )
                return


    def _loaders_too(self) -> str:
        """The data half of the hand migration: nothing is prepared in a file left as
        written, so the loaders the training draws from (built here or handed in:
        stargan-v2's `loaders.src`/`loaders.ref`, reader R1: the same batches on every
        rank) need prepare() as much, unless the file shards or splits its data itself."""
        analysis = self.analysis
        qualified = [c.qualified or "" for c in analysis.facts.calls]
        if any(q.endswith("DistributedSampler") or q.startswith(_ENVIRONMENTS) for q in qualified):
            return ""
        if any(n.attr.value in _SPLITS for n in analysis.nodes("Attribute")):  # type: ignore[attr-defined]
            return ""
        return (
            "; prepare the loaders the training draws from too (built here or handed in), or each process reads "
            "all of the data, not its share"
        )

    def _note_unsplit_data(self) -> None:
        """Migrated with the model prepared alone: said once, at the first backward, when
        no DataLoader is prepared (nothing then splits the data between processes)."""
        analysis = self.analysis
        models = [m for m in hand_updated_models(analysis.facts) if m in analysis.prepared]
        if not models or any(analysis.roles.of(n) is Role.DATALOADER for n in analysis.prepared):
            return
        for c in analysis.facts.calls:
            func = c.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                receiver = cst.Module([]).code_for_node(c.node.args[0].value if c.node.args else func.value).strip()
                rest = (
                    f": `{models[0]}` is prepared alone and the hand-written update stays (it reads the gradients "
                    "DDP averaged); with no DataLoader nothing splits the data: where every process reads the same "
                    "data, each trains on all of it (correct, but no faster): split it by "
                    "`accelerator.process_index` (into shards of equal batch counts), or serve it from a DataLoader"
                )
                self.report(c.node, call=f"{receiver if len(receiver) < 30 else 'loss'}.backward()", how=_NONE, rest=rest)
                return


_NONE = "without a torch.optim optimizer"
# What shows a file splitting its data itself, or collecting it from environments of its own.
_SPLITS = {"process_index", "num_processes", "split_between_processes", "get_rank"}
_ENVIRONMENTS = ("gym.", "gymnasium.")


def _by_hand(model: str, instead: str, data: str) -> str:
    """What the user does when the migrator could not set the script up."""
    return (
        f", so the script is left single-process: prepare the model alone (`{model} = accelerator.prepare({model})`) "
        f"and use `{instead}`; the hand-written parameter update can stay{data}"
    )


def _updated_model(analysis) -> str:
    """The model whose parameters the hand-written update walks (`for p in fc.parameters()`)."""
    for loop in analysis.facts.loops:
        it = loop.node.iter
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "parameters":
            name = dotted_name(it.func.value)
            if name is not None:
                return name
    return "model"
