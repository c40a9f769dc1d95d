"""AM205: the user's methods and attributes read through the prepared model's wrapper."""

from __future__ import annotations

import os

import libcst as cst

from migrator.analysis import Role
from migrator.analysis.handed_models import HANDS_TO, handed_model
from migrator.analysis.saving import state_dict_saved
from migrator.analysis import dotted_name
from migrator.analysis.wrapped import MODULE_API, WrappedUse, forward_in_training_step, prepared_model_at, wrapped_uses
from migrator.edits import replace
from migrator.analysis.walk import descendants
from migrator.rule import Example, FixAvailability, Rule


_WHY = {
    "": "the DDP wrapper it is on N processes has none of the user model's attributes",
    # the runtime's wrapper answers for the module (runtime/prepared/ddp.py), Accelerate's does not
    "runtime": (
        "on N processes it is a DDP wrapper: Accelerate's has none of the user model's attributes (this runtime's "
        "forwards them), and a method called through it runs outside DDP's forward, without the gradient sync"
    ),
    "state_dict": "its keys gain DDP's `module.` prefix on N processes",
    "load_state_dict": "it expects keys with DDP's `module.` prefix on N processes",
    "no_sync": "only the DDP wrapper has it, and the model is not wrapped on one process",
}
# Calls that trace or inspect the model they are given, outside training.
_TRACERS = {"torch.jit.trace", "torch.jit.script", "torchinfo.summary", "torchsummary.summary", "thop.profile"}
_TRACED = "a tracer cannot trace the DDP wrapper it is on N processes; give it the model"
# BiDAF's `best_model = copy.deepcopy(model)` after prepare(), saved later (reader R4, 29th session)
_COPIED = (
    "a copy of the DDP wrapper it is on N processes is a wrapper: its state_dict keys gain `module.` and its "
    "forward waits for the other processes; copy the model"
)
# torch.nn.Module's API that tells the structure: on N processes the DDP wrapper's only child
# is `module`, and every name gains `module.` (`list(model.children())[-1]` is the whole model).
_STRUCTURE = {"children", "named_children", "named_modules", "named_parameters", "named_buffers"}
for _name in _STRUCTURE:
    _WHY[_name] = "on N processes the DDP wrapper's only child is `module` and every name gains `module.`"

# DDP's switches a script sets on the wrapper (`model.require_backward_grad_sync = last`
# during gradient accumulation): on N processes they act on the prepared DDP wrapper; on
# one process the prepared model is the user's and the attribute set does nothing, as no
# sync is needed there. Unwrapping would make them do nothing on N processes too.
DDP_SWITCHES = {"require_backward_grad_sync", "require_forward_param_sync"}


class PreparedModelAttribute(Rule):
    """## What it does
    Finds methods and attributes of the user's model read on the prepared model
    (`model.generate(...)`, `model.init_hidden(bsz)`, `model.decode(z)`,
    `model.linear.weight`, `D.output_shape`, `self.model.config`, and
    `model.state_dict()` / `model.load_state_dict(...)` used in memory) and rewrites them
    to go through `accelerator.unwrap_model(model)`; `with model.no_sync():` becomes
    `with accelerator.no_sync(model):`. torch.nn.Module's own API (`parameters()`,
    `train()`, `eval()`, `to()`, `zero_grad()`, `modules()`, hooks, calling the model)
    stays on the wrapper, but not what tells its structure (`children()`,
    `named_parameters()`, `named_modules()`: the wrapper's only child is `module`), and so do DDP's own switches set during gradient accumulation
    (`model.require_backward_grad_sync = ...`).

    A prepared model handed to a function of another file of the run that gets no
    Accelerator and reads the model's own attributes there (`report.describe(model)`
    reading `net.width`) is handed `accelerator.unwrap_model(model)` when that function
    does not train, and named otherwise. In a file left as written that hands its model to
    a trainer left as written too (AM001 asks for the Accelerator there), the model's own
    attributes read after the hand-off, here or by other files' functions, are named.

    ## Why is this bad?
    On N processes `prepare()` returns a DistributedDataParallel wrapper, which has only
    torch.nn.Module's API: `model.init_hidden` raises
    `AttributeError: 'DistributedDataParallel' object has no attribute 'init_hidden'`, and
    `state_dict()` keys gain `module.`, so copying them into a plain model
    (`target_net.load_state_dict(policy_net.state_dict())`) fails. On one process the
    model is not wrapped, so `model.no_sync()` fails there instead. The script works on
    one process count and breaks on the other; `unwrap_model` is right on both.

    ## Example
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    hidden = model.init_hidden(batch_size)
    ```

    Use instead:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    hidden = accelerator.unwrap_model(model).init_hidden(batch_size)
    ```

    ## Known limits
    A state dict that is saved is AM501's (save-wrapped-model) and `model.module`
    AM204's (prepared-model-module). A model reached through a container
    (`models["G"].sample()`) or a method's parameter is not followed; code that cannot
    reach the Accelerator is reported, not changed. A forward through the unwrapped
    model skips DDP's gradient hooks, so a method that runs the model's layers inside the
    training step (`z = model.encode(x)` before `backward()`, outside `torch.no_grad()`)
    is reported, not unwrapped: the loss must come from `model(...)`. A method defined in
    the file that only builds tensors (`init_hidden`) is unwrapped there too.
    """

    code = "AM205"
    name = "prepared-model-attribute"
    message = "`{use}` on the prepared model: {why}{note}"
    fix_title = "Use `accelerator.unwrap_model(model).attr`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\nweight = model.weight\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\n"
                "weight = accelerator.unwrap_model(model).weight\n"
            ),
            at=("7:10",),
        ),
    )

    @classmethod
    def fix_title_for(cls, message: str) -> str | None:
        """`use accelerator.unwrap_model(self.actor_critic).is_recurrent` for the finding on
        `self.actor_critic.is_recurrent`."""
        use = message.split("`")[1] if message.startswith("`") and message.count("`") >= 2 else ""
        model, _, attr = use.rpartition(".")
        if not model or not attr.isidentifier():
            return cls.fix_title
        return f"Use `accelerator.unwrap_model({model}).{attr}`"

    def _why(self, attr: str) -> str:
        """Why `model.attr` goes wrong once prepared; for any other attribute, as the
        target's wrapper behaves."""
        if attr in _WHY and attr not in ("", "runtime"):
            return _WHY[attr]
        return _WHY["runtime"] if self.ctx.target.value == "runtime" else _WHY[""]

    def visit_Module(self, node: cst.Module) -> None:
        for use in wrapped_uses(self.analysis):
            if use.attr in MODULE_API and use.attr not in _STRUCTURE or use.attr == "module":
                continue  # the wrapper answers alike; `.module` is AM204's
            if use.attr in DDP_SWITCHES and isinstance(self.analysis.parent(use.attribute), cst.AssignTarget):
                continue  # DDP's own switch, set on the wrapper: inert on the bare model of one process
            if use.attr == "state_dict" and self._saved(use):
                continue  # AM501 unwraps a saved state dict
            if use.attr.startswith("named_") and self._names_matched_by_their_end(use.attribute):
                continue
            self._check(use)
        self._traced()
        self._handed_model_uses()
        self._read_by_other_files()

    def _names_matched_by_their_end(self, attribute: cst.Attribute) -> bool:
        """`for name, param in model.named_parameters(): if 'fc1.weight' in name:`: each name
        is only searched for a part of it (`in`, `.endswith(...)`), which DDP's `module.`
        prefix leaves matching (reader R20: a false alarm in a max-norm constraint)."""
        call = self.analysis.parent(attribute)
        loop = self.analysis.parent(call) if isinstance(call, cst.Call) else None
        if not isinstance(loop, cst.For) or loop.iter is not call or not isinstance(loop.target, cst.Tuple):
            return False
        first = loop.target.elements[0].value if loop.target.elements else None
        if not isinstance(first, cst.Name):
            return False
        for node in descendants(loop.body):
            if not (isinstance(node, cst.Name) and node.value == first.value):
                continue
            up = self.analysis.parent(node)
            searched = isinstance(up, cst.ComparisonTarget) and isinstance(up.operator, (cst.In, cst.NotIn)) and up.comparator is node
            ends = isinstance(up, cst.Attribute) and up.attr.value == "endswith"
            if not (searched or ends):
                return False
        return True

    def _hands_a_loader(self, call: cst.Call) -> bool:
        """The call hands a DataLoader too (each process's share of the data)."""
        return any(self.analysis.roles.of(a.value) is Role.DATALOADER for a in call.args if isinstance(a.value, cst.Name))

    def _result_unused(self, call: cst.Call) -> bool:
        """The call is a statement of its own: what it returns is dropped."""
        return isinstance(self.analysis.parent(call), cst.Expr)

    def _read_by_other_files(self) -> None:
        """A prepared model handed to a function of another file of the run that gets no
        Accelerator (not threaded) and reads its own attributes there (`evaluate(model,
        ...)` calling `model.generate(...)`): on N processes that read fails. Named at the
        argument, left as written."""
        analysis, config = self.analysis, self.ctx.config
        if not config.project_model_readers or not analysis.migrating:
            return
        threaded = set(config.project_calls)
        for fact, arg, (spelling, _, param, attr, where, trains) in self._handed_to_readers():
            if spelling in threaded:
                continue
            name = prepared_model_at(analysis, arg)
            if name is None:
                continue
            fields = {"use": f"{param}.{attr}", "why": self._why(attr)}
            accelerator = analysis.accelerator_at(arg)
            if accelerator is not None and not trains:  # it reads, never trains: hand it the model itself
                new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
                self.report(arg, edits=[replace(arg, new)], note=f" (`{spelling}(...)` reads it, {where})", **fields)
                continue
            note = (
                f" (left as written: `{spelling}(...)` reads `{param}.{attr}` ({where}) of the `{name}` handed here;"
                f" hand it `accelerator.unwrap_model({name})` outside the training step)"
            )
            self.report(arg, note=note, **fields)

    def _handed_to_readers(self):
        """(call fact, argument, reader entry) for each argument this file hands a function
        of another file at a parameter whose own attributes it reads (Config.project_model_readers)."""
        readers: dict[str, list] = {}
        for entry in self.ctx.config.project_model_readers:
            readers.setdefault(entry[0], []).append(entry)
        for fact in self.analysis.facts.calls if readers else ():
            positional = [a.value for a in fact.node.args if a.keyword is None and not a.star]
            named = {a.keyword.value: a.value for a in fact.node.args if a.keyword is not None}
            for entry in readers.get(dotted_name(fact.node.func) or "", ()):
                _, position, param, *_ = entry
                arg = named.get(param) if param in named else positional[position] if 0 <= position < len(positional) else None
                if arg is not None:
                    yield fact, arg, entry

    def _handed_model_uses(self) -> None:
        """pytorch-a2c-ppo-acktr's main.py builds `actor_critic = Policy(...)` and hands it to
        `algo.PPO(actor_critic, ...)`, whose file gets no Accelerator: all is left as written,
        and AM001 asks for an Accelerator here and the model handed in prepared. Then the
        rollout's `actor_critic.act(...)` and `actor_critic.get_value(...)` here reach the
        DDP wrapper (reader R12, thirtieth session): named now, with what to write then."""
        analysis = self.analysis
        handed = handed_model(analysis, self.ctx.config) if not analysis.migrating else None
        if handed is None:
            return
        name = handed.binding.name
        # from the call that hands it over on: prepared by hand, it is prepared there (a load before is the plain model's)
        handing = [
            analysis.order(f.node) for f in analysis.facts.calls
            if f.func == handed.spelling and any(dotted_name(a.value) == name for a in f.node.args)
        ]
        if not handing:
            return
        at = min(handing)
        where = os.path.relpath(handed.where, os.path.dirname(self.ctx.path) or ".").replace(os.sep, "/")
        for load in analysis.facts.loads:
            up = analysis.parent(load.node)
            if load.name != name or analysis.order(load.node) < at or not (isinstance(up, cst.Attribute) and up.value is load.node):
                continue
            attr = up.attr.value
            if attr in MODULE_API and attr not in _STRUCTURE or attr in ("module", "to", "cuda", "cpu"):
                continue
            note = (
                f" (left as written: `{name}` is {HANDS_TO} `{handed.spelling}` ({where}), which"
                f" gets no Accelerator yet; once it is prepared by hand (AM001), use `accelerator.unwrap_model({name}).{attr}`"
                " outside the training step, and the model's forward inside it)"
            )
            self.report(up, use=f"{name}.{attr}", why=self._why(attr), note=note)
        for fact, arg, (spelling, _, param, attr, read, trains) in self._handed_to_readers():
            if dotted_name(arg) != name:
                continue
            alone = (
                ", on the main process only: it trains nothing, is handed no loader and hands nothing back, so every"
                " process would only repeat it (and what it writes and prints)"
                if not trains and attr != "load_state_dict" and not self._hands_a_loader(fact.node)
                and self._result_unused(fact.node) else ""  # a load changes the model: every process makes it
            )
            then = (
                f"read it there through `accelerator.unwrap_model({param})` (it trains `{name}`: hand it the prepared one)"
                if trains else f"hand `{spelling}` `accelerator.unwrap_model({name})`{alone}"
            )
            note = (
                f" (left as written: `{spelling}(...)` reads `{param}.{attr}` ({read}) of `{name}`, {HANDS_TO}"
                f" `{handed.spelling}` ({where}), which gets no Accelerator yet; once it is prepared by hand (AM001), {then})"
            )
            self.report(arg, use=f"{param}.{attr}", why=self._why(attr), note=note)

    def _traced(self) -> None:
        """`writer.add_graph(model, x)`, `torch.jit.trace(model, x)`, `summary(model, ...)`:
        a tracer runs the model it is given outside training; on N processes the DDP
        wrapper cannot be traced (and would wait for the other processes' all-reduce)."""
        analysis = self.analysis
        for fact in analysis.facts.calls:
            qualified = fact.qualified or dotted_name(fact.node.func) or ""
            if not (qualified.rsplit(".", 1)[-1] == "add_graph" or qualified in _TRACERS or qualified == "copy.deepcopy"):
                continue
            first = next((a for a in fact.node.args if a.keyword is None), None)
            name = prepared_model_at(analysis, first.value) if first is not None else None
            if name is None:
                continue
            accelerator = analysis.accelerator_at(fact.node)
            shown = f"{qualified.rsplit('.', 1)[-1]}({name}{', ...' if len(fact.node.args) > 1 else ''})"
            fields = {"use": shown, "why": _COPIED if qualified == "copy.deepcopy" else _TRACED}
            if accelerator is None:
                self.report(first.value, note=" (left as written: the Accelerator cannot be reached from here)", **fields)
                continue
            new = cst.parse_expression(f"{accelerator}.unwrap_model({name})")
            self.report(first.value, edits=[replace(first.value, new)], note="", **fields)

    def _saved(self, use: WrappedUse) -> bool:
        call = self.analysis.parent(use.attribute)
        return isinstance(call, cst.Call) and call.func is use.attribute and state_dict_saved(self.analysis, call)

    def _check(self, use: WrappedUse) -> None:
        accelerator = self.analysis.accelerator_at(use.attribute)
        fields = {"use": f"{use.name}.{use.attr}", "why": self._why(use.attr)}
        if accelerator is None:
            self.report(use.attribute, note=" (left as written: the Accelerator cannot be reached from here)", **fields)
            return
        if use.attr != "no_sync" and forward_in_training_step(self.analysis, use):
            note = (
                " (left as written: a forward through the unwrapped model in the training step would skip"
                " DDP's gradient all-reduce; compute the loss through the model's forward, `model(...)`)"
            )
            self.report(use.attribute, note=note, **fields)
            return
        call = self.analysis.parent(use.attribute)
        if use.attr == "no_sync" and isinstance(call, cst.Call) and call.func is use.attribute and not call.args:
            new = cst.parse_expression(f"{accelerator}.no_sync({use.name})")
            self.report(use.attribute, edits=[replace(call, new)], note="", **fields)
            return
        new = cst.parse_expression(f"{accelerator}.unwrap_model({use.name})")
        self.report(use.attribute, edits=[replace(use.holder, new)], note="", **fields)
