"""AM102: a device variable chosen by hand (`torch.device("cuda" if ... else "cpu")`)."""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis.device_choice import DeviceChoice, superseded
from migrator.analysis.device_strings import string_uses, string_valued
from migrator.analysis.options import option_status, with_option
from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.cst import removal_node
from migrator.analysis.handed_models import handed_model
from migrator.edits import Edit, remove, replace
from migrator.rule import Example, FixAvailability, Rule


_ELSEWHERE = (
    f" ({RUN_CALLS_IT}, and this file gets no "
    "Accelerator, so every process would take this one device; hand the Accelerator's device in)"
)


# a set-up that hands its model to another file's training, which gets no Accelerator either
_HANDED = (
    " (left as written: this file hands `{model}` to the training of `{spelling}`, which gets no Accelerator; "
    "with the one you create by hand, use `accelerator.device`, or every process takes this one GPU)"
)
_ONE_GPU = re.compile(r"cuda:(\d|\{)")


_STRING_NOTE = " (now a torch.device: where it was used as a string it reads `{name}.type` or `str({name})`)"


_RANKS = re.compile(r"rank|local|proc|worker|^i$|^gpu_?id$", re.IGNORECASE)


def _picked_by_an_option(analysis, statement: cst.CSTNode) -> str:
    """`f"cuda:{args.gpu}"`: an option named the GPU, which each launched process now takes
    for itself; said, so that a `--gpu 1` that no longer picks anything is no surprise. A
    worker's own number (`f"cuda:{rank}"`, `args.local_rank`, a bare `index` mp.spawn hands
    in) is what the Accelerator picks anyway."""
    for string in analysis.nodes_under(statement, "FormattedString"):
        first = string.parts[0] if string.parts else None
        if not (isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda:")):
            continue
        for part in string.parts[1:]:
            if isinstance(part, cst.FormattedStringExpression):
                shown = cst.Module([]).code_for_node(part.expression)
                # an option (`args.gpu`), not a worker's own number (`index`, `rank`, `gpu` handed by mp.spawn)
                if isinstance(part.expression, cst.Attribute) and not _RANKS.search(shown.rsplit(".", 1)[-1]):
                    return (
                        f" (`{shown}` no longer picks the GPU: each launched process takes its own; choose the GPUs "
                        "where the run is launched, `CUDA_VISIBLE_DEVICES=... accel-launch ...`)"
                    )
    return ""


class HardCodedDevice(Rule):
    """## What it does
    Finds `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` and its
    variants (plain strings, `"cuda:0"`, `args.device`, `torch.accelerator.current_accelerator()`,
    an if/elif/else cascade whose branches only pick the device). While the name is still
    used once device moves are gone (`torch.zeros(n, device=device)`, a model rebuilt for
    inference, or passed to a function that takes `device`), the choice becomes one line,
    `device = accelerator.device`; when nothing uses it any more, it goes.

    The user's own choice of the CPU is kept: `--no-cuda`, `--no-accel`, `--cpu`,
    `--device cpu` (read through flags such as `use_cuda = not args.no_cuda and
    torch.cuda.is_available()`) become `Accelerator(cpu=<when the user asked for the CPU>)`,
    e.g. `cpu=args.no_cuda`; availability checks are dropped because the Accelerator falls
    back to the CPU by itself. A device that was a string and is compared or searched as
    one (`device == "cuda"`, `"cuda" in device`, `autocast(device_type=device)`) reads
    `device.type` or `str(device)` in the same fix.

    ## Why is this bad?
    On N processes every process must use its own device; a hand-picked `"cuda"` puts
    all of them on GPU 0.

    ## Example
    ```python
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    noise = torch.randn(8, 100, device=device)
    ```

    Use instead:
    ```python
    accelerator = Accelerator(cpu=args.no_cuda)
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = accelerator.device
    noise = torch.randn(8, 100, device=device)
    ```

    ## Known limits
    A choice the migrator cannot read, different CPU conditions in several places, or a
    condition whose names do not exist where the Accelerator is created is left as
    written and reported with the `cpu=` to pass by hand. A function that neither trains
    nor loses a device move to prepare() (an inference helper) keeps its own choice. In
    code that already has an Accelerator, a device variable assigned before the
    Accelerator exists is reported, not rewritten. A file with no Accelerator that picks
    one GPU (`"cuda:0"`) and hands its model to the training of another file that gets
    none either (a trainer left as written) is reported, not rewritten.

    A GPU named by an option's index (`torch.device(f"cuda:{args.gpu}" if ... else "cpu")`)
    becomes the Accelerator's device like any other choice, and the finding says the
    option no longer picks the GPU (the launch does, with `CUDA_VISIBLE_DEVICES`).

    In a file that gets no Accelerator but whose code the run calls on every process (a
    base class whose subclass in another file trains), a GPU named by its index (`"cuda:0"`) is
    reported and left as written: the Accelerator's device has to be handed in.
    """

    code = "AM102"
    name = "hard-coded-device"
    message = "`{name}` is chosen by hand; use the Accelerator's device{note}"
    fix_title = "Use `accelerator.device` (or drop the unused variable)"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "device = torch.device(\"cuda\")\nx = torch.zeros(2, device=device)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "device = accelerator.device\nx = torch.zeros(2, device=device)\n"
            ),
            at=("5:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            self._in_code_the_run_calls()
            return
        choices = analysis.patterns.devices if analysis.patterns is not None else ()
        in_choice = {id(b) for c in choices if not c.flag for b in c.bindings}
        for choice in choices:
            if not choice.flag:
                self._choice(choice)
        for var in analysis.device_variables:
            if id(var.binding) not in in_choice:
                self._single(var)

    def _in_code_the_run_calls(self) -> None:
        """st-gcn's `IO.init_environment()` sets `self.dev = "cuda:0"` for the subclass
        in another file that trains: in a file given no Accelerator, a device picked in
        code the run calls on every process puts every process on that one GPU."""
        analysis, names = self.analysis, self.ctx.config.run_callers
        handed = handed_model(analysis, self.ctx.config)
        for var in analysis.device_variables:
            statement = analysis.statement_of(var.binding.target)
            # `"cuda:0"`, `"cuda:{}".format(args.gpu)`: one GPU for all (a bare `"cuda"` is the device the
            # Accelerator made current; an index from the rank is each process's own)
            text = cst.Module([]).code_for_node(statement.value) if isinstance(statement, cst.Assign) else ""
            if not _ONE_GPU.search(text) or "rank" in text:
                continue
            if run_by_other_files(analysis, statement, names, self.ctx.config.project_unpassed):
                self.report(statement, name=var.name, note=_ELSEWHERE)
            elif handed is not None:  # a2c-ppo's main.py: `device = torch.device("cuda:0" if args.cuda else "cpu")`
                self.report(statement, name=var.name, note=_HANDED.format(model=handed.binding.name, spelling=handed.spelling))

    def _choice(self, choice: DeviceChoice) -> None:
        """A device picked in one statement or one if/elif/else cascade: one line
        `device = accelerator.device` (the user's CPU choice goes to `cpu=`), or nothing
        when no use of it is left."""
        analysis = self.analysis
        statement = choice.statement
        if isinstance(statement, cst.Assign):
            value = statement.value
            if cst.Module([]).code_for_node(value).strip() == f"{analysis.accelerator}.device":
                return  # `self.device = self.accelerator.device`: already the Accelerator's
            if len(statement.targets) != 1:
                return
        if not self._acts_in(choice):
            return
        unused = "." not in choice.name and not analysis.surviving_device_uses.get(choice.name)
        asks_cpu = choice.cpu not in (None, "False")
        edits: list[Edit] = []
        note = ""
        if asks_cpu and not self._training_choice(choice):
            self.report(statement, name=choice.name, note=" (left as written: this function picks its own device apart from the one that trains; make it `accelerator.device` by hand)")
            return
        if asks_cpu:
            call, option, problem = option_status(analysis, "cpu")
            if problem is None and analysis.patterns is not None and analysis.patterns.cpu_problem is not None:
                problem = analysis.patterns.cpu_problem
            if problem is not None:
                self.report(statement, name=choice.name, note=f" (left as written: the user's choice of the CPU cannot become `Accelerator(cpu=...)`: {problem})")
                return
            if call is not None and option is not None:
                edits.append(replace(call, with_option(call, option)))
            note = f" (the CPU choice becomes `Accelerator(cpu={choice.cpu})`)"
        elif choice.cpu is None:
            why = choice.reason or "the device is computed in a way the migrator cannot read"
            self.report(statement, name=choice.name, note=f" (left as written: {why}; pass `cpu=` to the Accelerator by hand if the script can train on the CPU)")
            return
        note += _picked_by_an_option(self.analysis, statement)
        line = statement if isinstance(statement, cst.If) else analysis.parent(statement)
        if unused:
            edits.append(remove(statement if isinstance(statement, cst.If) else removal_node(line, statement)))
        else:
            accelerator = analysis.accelerator_at(statement)
            again = superseded(analysis, choice) if accelerator is None else None
            if again == "":
                target = statement if isinstance(statement, cst.If) else removal_node(line, statement)
                note = f" (removed: `{choice.name}` is chosen again after the Accelerator, before anything reads it)"
                self.report(statement, edits=[remove(target)], name=choice.name, note=note)
                return
            if again:
                self.report(statement, name=choice.name, note=f" (left as written: {again})")
                return
            if accelerator is None or not self._defined_after_accelerator(statement):
                self.report(statement, name=choice.name, note="")
                return
            new_value = cst.parse_expression(f"{accelerator}.device")
            if any(string_valued(b.value) for b in choice.bindings):
                strings = self._string_uses(choice.name, choice.scope)
                edits += strings
                note += _STRING_NOTE.format(name=choice.name) if strings else ""
            if isinstance(statement, cst.If):
                new = cst.SimpleStatementLine(
                    [cst.Assign([cst.AssignTarget(cst.parse_expression(choice.name))], new_value)],
                    leading_lines=statement.leading_lines,
                )
                edits.append(replace(statement, new))
            else:
                edits.append(replace(statement.value, new_value))
        self.report(statement, edits=edits, name=choice.name, note=note)

    def _string_uses(self, name: str, scope: cst.CSTNode) -> list[Edit]:
        """The variable becomes a torch.device: `device == "cuda"` reads `device.type`,
        `"cuda" in device` reads `str(device)`, `autocast(device_type=device)` the type."""
        edits = []
        for use in string_uses(self.analysis.facts, name, scope, self.analysis.parent):
            if use.kind == "type":
                new: cst.BaseExpression = cst.Attribute(use.node, cst.Name("type"))
            else:
                new = cst.Call(cst.Name("str"), [cst.Arg(use.node)])
            edits.append(replace(use.node, new))
        return edits

    def _training_choice(self, choice: DeviceChoice) -> bool:
        """Made where the script trains, where the Accelerator is created (a class's
        `__init__` choosing `self.device`), or at module level: its CPU choice is the
        Accelerator's."""
        analysis = self.analysis
        block = analysis.training_block
        home = analysis.setup.block.scope if analysis.setup is not None else None
        return isinstance(choice.scope, cst.Module) or (block is not None and choice.scope is block.scope) or choice.scope is home

    def _acts_in(self, choice: DeviceChoice) -> bool:
        """A choice in a function that neither trains nor loses a device move to prepare()
        (an inference helper such as `stylize(args)`) picks its own device for its own
        tensors: it is left alone."""
        if self._training_choice(choice):
            return True
        analysis = self.analysis
        scope = choice.scope
        for move in analysis.device_moves:
            if id(move.call) in analysis.droppable_moves and analysis.scope_of(move.call) is scope:
                return True
        prepared = analysis.prepared
        return any(load.scope is scope and load.name in prepared for load in analysis.facts.loads)

    def _single(self, var) -> None:
        analysis = self.analysis
        binding = var.binding
        small = analysis.statement_of(binding.target)
        if not isinstance(small, cst.Assign) or len(small.targets) != 1 or small.value is not binding.value:
            return
        if cst.Module([]).code_for_node(small.value).strip() == f"{analysis.accelerator}.device":
            return  # `self.device = self.accelerator.device`: already the Accelerator's
        unused = "." not in var.name and not analysis.surviving_device_uses.get(var.name)
        if unused:
            line = analysis.parent(small)
            self.report(small, edits=[remove(removal_node(line, small))], name=var.name, note="")
        elif self._defined_after_accelerator(small) and analysis.accelerator_at(small) is not None:
            new_value = cst.parse_expression(f"{analysis.accelerator_at(small)}.device")
            edits = [replace(small.value, new_value)]
            strings = self._string_uses(var.name, binding.scope) if string_valued(small.value) else []
            edits += strings
            self.report(small, edits=edits, name=var.name, note=_STRING_NOTE.format(name=var.name) if strings else "")
        else:
            self.report(small, name=var.name, note="")

    def _defined_after_accelerator(self, small: cst.CSTNode) -> bool:
        analysis = self.analysis
        if not analysis.has_accelerator:
            return True
        here = analysis.position(small).start.line
        firsts = [
            analysis.position(b.statement).start.line
            for b in analysis.facts.bindings
            if b.name in analysis.accelerator_names
        ]
        return bool(firsts) and min(firsts) < here
