"""AM511: `print` in training code, run by every process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.loop import training_functions
from migrator.analysis.reach import DRIVEN_LATER, accelerator_home
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class PrintOnEveryProcess(Rule):
    """## What it does
    Rewrites `print(...)` to `accelerator.print(...)` in the code that trains and
    evaluates: in the scope that creates the Accelerator, from its creation on, and anywhere in
    functions (and methods of an Accelerator-owning class) that train, evaluate, or loop
    over a dataloader. With an Accelerator created at module level (in `__main__`), also
    in this file's functions that only such code calls, after the Accelerator exists
    (`load_dataset()` and `test(model, loader)` called from `__main__`). A `print` that only the main process runs (under
    `if accelerator.is_main_process:` or a rank test) stays, and so does one that names
    the process it runs on (`print(f"rank {rank} ready")`). A script that silences print
    off the main process itself (`setup_for_distributed`, `builtins.print = ...`, or a
    helper of another file of the run that does so, such as deit's, BLIP's and ConvNeXt's
    `init_distributed_mode`, even one the migration cannot convert) is left alone: its
    prints already run once. A launched script that drives a model object of another
    file of the run (`trainer.dis_update(...)` in its loop) gets no Accelerator of its own:
    the prints of the loops that drive it are reported and left as they are.

    ## Why is this bad?
    On N processes every line is printed N times, interleaved.
    `accelerator.print` prints once per machine.

    ## Example
    ```python
    for epoch in range(epochs):
        print(f"epoch {epoch} loss {loss.item():.4f}")
    ```

    Use instead:
    ```python
    for epoch in range(epochs):
        accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")
    ```

    ## Known limits
    Prints in helpers outside training that a function's Accelerator would have to be
    threaded into (argument parsing in `main()`), that run before the Accelerator exists,
    that other files call, or that are handed over as values (`atexit.register(f)`) stay.
    Prints that cannot reach the Accelerator are left as they are.
    """

    code = "AM511"
    name = "print-on-every-process"
    message = "`print` in training code prints once per process; use `accelerator.print`{note}"
    fix_title = "Use `accelerator.print`"
    fix = FixAvailability.ALWAYS
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "for epoch in range(2):\n    print(\"epoch\", epoch)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "for epoch in range(2):\n    accelerator.print(\"epoch\", epoch)\n"
            ),
            at=("6:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if "print" in analysis.imports.aliases or any(b.name == "print" for b in analysis.facts.bindings):
            return
        if not analysis.migrating:
            self._driving_loops()
            return
        facts = analysis.facts
        if _prints_silenced(analysis) or self._silenced_by_the_run():
            return
        working = self._working_functions()
        home = accelerator_home(analysis)
        home_scope = home.scope if home is not None else None
        for c in facts.calls:
            if not (isinstance(c.node.func, cst.Name) and c.node.func.value == "print"):
                continue
            scope = c.scope
            in_scope = id(scope) in working or scope is home_scope
            if not in_scope or analysis.branches.runs_only_on_main(c.node) or _per_process(c.node) or _to_a_file(c.node):
                continue
            accelerator = analysis.accelerator_at(c.node)
            if accelerator is None:
                continue
            new = cst.Attribute(value=cst.parse_expression(accelerator), attr=cst.Name("print"))
            self.report(c.node, edits=[replace(c.node.func, new)], note="")

    def _driving_loops(self) -> None:
        """A launched script that drives a model object of the run (MUNIT's
        `trainer.dis_update(...)` in its loop) prints on every process too: the prints of
        the loops that drive it are named; the script gets its Accelerator with that object."""
        analysis = self.analysis
        drives = {spelling for spelling, *_ in self.ctx.config.project_drives}
        if not drives or analysis.accelerator_names or _prints_silenced(analysis) or self._silenced_by_the_run():
            return
        loops: set[int] = set()
        for c in analysis.facts.calls:
            if dotted_name(c.node.func) in drives:
                loops |= {id(n) for n in _enclosing_loops(analysis, c.node)}
        note = f" (left as written: {DRIVEN_LATER})"
        for c in analysis.facts.calls:
            if not (isinstance(c.node.func, cst.Name) and c.node.func.value == "print"):
                continue
            if not loops & {id(n) for n in _enclosing_loops(analysis, c.node)}:
                continue
            if analysis.branches.runs_only_on_main(c.node) or _per_process(c.node) or _to_a_file(c.node):
                continue
            self.report(c.node, note=note)

    def _silenced_by_the_run(self) -> bool:
        """This file calls another file's function that silences print off the main
        process (project/print_silencers.py): ConvNeXt's `utils.init_distributed_mode(args)`
        even where the migration cannot convert it."""
        silencers = set(self.ctx.config.project_print_silencers)
        return bool(silencers) and any(c.func in silencers for c in self.analysis.facts.calls)

    def _working_functions(self) -> set[int]:
        """ids of functions that train, evaluate, iterate a dataloader or prepare the
        objects, and methods of the class that owns the Accelerator."""
        analysis = self.analysis
        facts = analysis.facts
        trainers = training_functions(facts)
        out = {id(f) for name in trainers for f in facts.functions.get(name, [])}
        for loop in facts.loops:
            if isinstance(loop.scope, cst.FunctionDef) and analysis.roles.of(loop.iter_name) is Role.DATALOADER:
                out.add(id(loop.scope))
        # the function that prepares the objects runs the training, here or through the
        # functions of other files it hands them to (`trainer.run_epoch()` in its epoch loop)
        if analysis.plan is not None and isinstance(analysis.plan.block.scope, cst.FunctionDef):
            out.add(id(analysis.plan.block.scope))
        out |= {id(s) for p in analysis.prepare_calls if isinstance(s := analysis.scope_of(p.call), cst.FunctionDef)}
        out |= self._called_only_from(out)
        name = analysis.accelerator
        if name.startswith("self."):
            for functions in facts.functions.values():
                for f in functions:
                    if id(f) in facts.method_of and analysis.accelerator_at(f.body) is not None:
                        out.add(id(f))
        return out


    def _called_only_from(self, working: set[int]) -> set[int]:
        """ids of this file's top-level functions every process runs because the working
        code calls them, where a module-level Accelerator reaches them (`load_dataset(...)` in the `__main__` that creates the Accelerator,
        `test(model, loader)` after training): called only there, after the Accelerator
        exists, never named otherwise (a worker handed to spawn) nor called by other files."""
        analysis = self.analysis
        facts = analysis.facts
        home = accelerator_home(analysis)
        if home is None or not isinstance(home.scope, cst.Module):
            return set()  # a function's Accelerator would be threaded into them for a print
        elsewhere = self.ctx.config.run_callers
        out: set[int] = set()
        grown = True
        while grown:
            grown = False
            for name, functions in facts.functions.items():
                if len(functions) != 1 or id(functions[0]) in working | out or name in elsewhere:
                    continue
                function = functions[0]
                if id(function) in facts.method_of or facts.scope_of_function.get(id(function)) is not analysis.module:
                    continue
                shadowed = {id(b.scope) for b in facts.bindings if b.name == name}  # `test = Test(...)` in `def test()`
                calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == name and id(c.scope) not in shadowed]
                loads = [l for l in facts.loads if l.name == name and id(l.scope) not in shadowed]
                if not calls or len(loads) != len(calls):
                    continue  # never called here, or named as a value too
                if all(_runs_there(analysis, c, working | out, home) for c in calls):
                    out.add(id(function))
                    grown = True
        return out


def _runs_there(analysis, call, working: set[int], home) -> bool:
    """`call` sits in a working function, or in the Accelerator's own scope after it exists."""
    if id(call.scope) in working:
        return True
    return call.scope is home.scope and analysis.accelerator_at(call.node) is not None


def _enclosing_loops(analysis, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The `for` and `while` statements around `node`, in its function (or module)."""
    out = []
    current = analysis.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, (cst.For, cst.While)):
            out.append(current)
        current = analysis.parent(current)
    return out


def _prints_silenced(analysis) -> bool:
    """The script silences print off the main process itself (`setup_for_distributed`,
    directly or in its set-up helper `init_distributed_mode`, which the migration keeps,
    or `builtins.print = ...` in this file): every print already runs once."""
    patterns = analysis.patterns
    helpers = patterns.distribution.helper_calls if patterns is not None else ()
    if any(h.prints for h in helpers):
        return True
    if any((c.func or "").split(".")[-1] == "setup_for_distributed" for c in analysis.facts.calls):
        return True
    return any(
        b.name in ("builtins.print", "__builtin__.print") and _tells_processes_apart(analysis, b.statement)
        for b in analysis.facts.bindings
    )


_PER_PROCESS_WORDS = ("rank", "gpu", "is_master", "is_main", "process_index")


def _tells_processes_apart(analysis, statement: cst.CSTNode) -> bool:
    """`builtins.print = ...` under a test of the process (`if args.gpu != 0:`), or in a
    function that tells them apart (`setup_for_distributed(is_master)`): a flag that
    silences every process or none (`if args.quiet:`) is not this."""
    current = analysis.parent(statement)
    while current is not None:
        if isinstance(current, cst.If):
            test = cst.Module([]).code_for_node(current.test).lower()
            if any(word in test for word in _PER_PROCESS_WORDS):
                return True
        if isinstance(current, cst.FunctionDef):
            return any(word in cst.Module([]).code_for_node(current).lower() for word in _PER_PROCESS_WORDS)
        current = analysis.parent(current)
    return False


def _per_process(call: cst.Call) -> bool:
    """A print that names this process (`print(f"rank {rank}: ...")`): each process's own line."""
    text = cst.Module([]).code_for_node(call).lower()
    return "rank" in text or "process_index" in text


def _to_a_file(call: cst.Call) -> bool:
    """`print(i, file=f)`: a write to a file, AM517's (which gates the `open`), not a
    console line; `file=sys.stderr` is still the console."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "file":
            return (dotted_name(arg.value) or "") not in ("sys.stdout", "sys.stderr")
    return False
