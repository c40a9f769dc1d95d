"""AM520: an experiment logger (TensorBoard, wandb) created and written by every process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import RUN_CALLS_IT, called_by_other_files, run_by_other_files
from migrator.cst import adjacent_runs, wrap_statements
from migrator.edits import Fix, replace
from migrator.rule import Example, FixAvailability, Rule

# Constructors of a logger object whose methods write the run's record.
_WRITERS = {
    "torch.utils.tensorboard.SummaryWriter",
    "torch.utils.tensorboard.writer.SummaryWriter",
    "tensorboardX.SummaryWriter",
    "tensorboard_logger.Logger",
    "tensorflow.summary.FileWriter",
    "tensorflow.compat.v1.summary.FileWriter",
}
# Calls that start a run of a hosted tracker: one per process.
_RUNS = {"wandb.init", "mlflow.start_run", "tensorboard_logger.configure"}


class ExperimentLoggerOnEveryProcess(Rule):
    """## What it does
    In a script being migrated, puts a TensorBoard writer (`SummaryWriter(...)` of
    torch.utils.tensorboard or tensorboardX, `tensorboard_logger.Logger(...)`,
    TensorFlow 1's `tf.summary.FileWriter(...)`) on the main
    process: its creation and each statement that calls one of its methods
    (`writer.add_scalar(...)`, `writer.close()`) go under `if accelerator.is_main_process:`
    (statements one after another share one `if`). A logger the fix cannot follow, and a
    hosted tracker's run (`wandb.init`, `mlflow.start_run`), are reported.

    ## Why is this bad?
    Under `accel-launch` every process runs the script: N writers each open an event file
    in the same folder, and TensorBoard draws N interleaved curves per tag (each process's
    own numbers); `wandb.init()` on every process starts N runs.

    ## Example
    ```python
    writer = SummaryWriter(log_dir)
    for epoch in range(epochs):
        loss = train(epoch)
        writer.add_scalar("train/loss", loss, epoch)
    ```

    Use instead:
    ```python
    if accelerator.is_main_process:
        writer = SummaryWriter(log_dir)
    for epoch in range(epochs):
        loss = train(epoch)
        if accelerator.is_main_process:
            writer.add_scalar("train/loss", loss, epoch)
    ```

    ## Fix safety
    The values logged stay what the main process computes (other rules gather the
    metrics that need it). The fix is written only when every use of the name in the file
    is such a statement and the Accelerator reaches each one: a writer handed to a
    function, stored and read elsewhere, or whose `log_dir` names a path, would be missing
    on the other processes; it is reported instead.

    A class of another file of the run that keeps such a writer (`self.writer =
    tf.summary.FileWriter(log_dir)` in its `__init__`, StarGAN's `Logger`) is one too. A
    writer another file makes and hands to a function here, alone or in a dict
    (`writer_dict['writer'].add_scalar(...)`), is named at its uses here: made on the main
    process only as AM520 asks there, they need the same guard.

    ## Known limits
    Only a writer bound by an assignment of its own line, to a plain name or to an
    attribute of `self` (each use then `self.writer.method(...)` on its own line in the
    same class, the attribute bound nowhere else), is fixed; wandb's module functions are
    reported. In code other files of the run call on every process, in a file given no
    Accelerator (a `Visualizer` class starting `wandb.init(...)`), the logger is reported,
    left as written.
    """

    code = "AM520"
    name = "experiment-logger-on-every-process"
    message = "`{call}` runs on every process: each one writes its own record of the run{note}"
    fix_title = "Create and write it under `if accelerator.is_main_process:`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom torch.utils.tensorboard import SummaryWriter\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nwriter = SummaryWriter('runs')\nwriter.add_scalar('loss', 1.0, 0)\n"
            ),
            after=(
                "import torch\nfrom torch.utils.tensorboard import SummaryWriter\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nif accelerator.is_main_process:\n    writer = SummaryWriter('runs')\n"
                "    writer.add_scalar('loss', 1.0, 0)\n"
            ),
            at=("6:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        # a launched script driving a model object of the run (`trainer.gen_update(...)`) runs on every process
        driving = bool(self.ctx.config.project_drives) and not analysis.accelerator_names
        self._handed_writers()
        if not analysis.migrating and not driving:
            self._in_code_the_run_calls()
            return
        project = set(self.ctx.config.project_loggers)  # another file's class keeping a writer
        for fact in analysis.facts.calls:
            qualified = fact.qualified or ""
            call = fact.node
            shown = f"{cst.Module([]).code_for_node(call.func)}(...)"
            if qualified in _RUNS:
                if not self._main_only(call):
                    self.report(call, call=shown, note=" (left as written: start it on the main process only and guard what logs to it)")
            elif (qualified in _WRITERS or dotted_name(call.func) in project) and not self._main_only(call):
                self._writer(call, shown)

    def _in_code_the_run_calls(self) -> None:
        """CycleGAN's `Visualizer.__init__` starts `wandb.init(...)` for train.py: in a file
        given no Accelerator, code other files of the run call runs on every process."""
        analysis, config = self.analysis, self.ctx.config
        if analysis.accelerator_names or not config.run_callers:
            return
        for fact in analysis.facts.calls:
            qualified = fact.qualified or ""
            if qualified not in _RUNS and qualified not in _WRITERS or self._main_only(fact.node):
                continue
            if run_by_other_files(analysis, fact.node, config.run_callers, config.project_unpassed):
                shown = f"{cst.Module([]).code_for_node(fact.node.func)}(...)"
                self.report(fact.node, call=shown, note=f" ({RUN_CALLS_IT}, and this file gets no Accelerator: create it on the main process only and guard what logs to it)")

    def _handed_writers(self) -> None:
        """human-pose-estimation's `validate(..., writer_dict)`: `writer =
        writer_dict['writer']`, then `writer.add_scalar(...)`, of the SummaryWriter train.py
        makes (project/handed_loggers.py). AM520 there asks for the writer to be made on the
        main process only and its uses guarded: these are its uses."""
        analysis = self.analysis
        for name, param, key, where in self.ctx.config.project_handed_loggers:
            function = next((f for f in analysis.facts.functions.get(name, ()) if id(f) not in analysis.facts.method_of), None)
            uses = [u for u in self._writer_uses(function, param, key) if not self._main_only(u)] if function else []
            if not uses:
                continue
            held = f"`{param}[{key!r}]`" if key else f"`{param}`"
            lines = sorted({analysis.position(u).start.line for u in uses})
            shown = ", ".join(str(n) for n in lines[:6]) + (", ..." if len(lines) > 6 else "")
            note = (
                f" ({RUN_CALLS_IT}: {held} is the writer {where} makes on every process (AM520 there); made on the main "
                f"process only, its uses here (line{'s' if len(lines) > 1 else ''} {shown}) need the same guard, or the "
                "other processes fail on them)"
            )
            self.report(uses[0], call=f"{cst.Module([]).code_for_node(uses[0].func)}(...)", note=note)

    def _writer_uses(self, function: cst.FunctionDef, param: str, key: str) -> list[cst.Call]:
        """Method calls in `function` on the writer `param` holds (itself, or its item
        `key`), directly or through a name bound to it."""
        analysis = self.analysis

        def holds(node: cst.BaseExpression) -> bool:
            if not key:
                return isinstance(node, cst.Name) and node.value == param
            return (
                isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == param
                and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                and isinstance(node.slice[0].slice.value, cst.SimpleString) and node.slice[0].slice.value.evaluated_value == key
            )

        aliases = {
            b.name for b in analysis.facts.bindings
            if b.value is not None and holds(b.value) and analysis.branches.function_of(b.target) is function
        }
        out = []
        for call in analysis.nodes_under(function, "Call"):
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if receiver is not None and (holds(receiver) or isinstance(receiver, cst.Name) and receiver.value in aliases):
                out.append(call)
        return out

    def _writer(self, call: cst.Call, shown: str) -> None:
        analysis = self.analysis
        binding = self._binding(call)
        if binding is None:
            self.report(call, call=shown, note=" (left as written: create it on the main process only and guard its uses)")
            return
        line, name = binding
        uses = self._use_lines(name, line)
        if uses is None or any(analysis.accelerator_at(u) is None for u in [line, *uses]):
            why = "it is used in a way the fix cannot follow" if uses is None else "the Accelerator does not reach every use"
            self.report(call, call=shown, note=f" (left as written: {why}; create it on the main process only and guard its uses)")
            return
        entries = [(None, s) for s in [line, *uses] if self.analysis.branches.branch_of(s) is None]
        edits = []
        for group in adjacent_runs(entries, analysis.parent):
            accelerator = analysis.accelerator_at(group[0][1])
            pairs = wrap_statements(
                [s for _, s in group], lambda body, acc=accelerator: cst.If(test=cst.parse_expression(f"{acc}.is_main_process"), body=body)
            )
            edits += [replace(n, r) for n, r in pairs]  # type: ignore[arg-type]
        self.report(call, edits=Fix(tuple(edits)), call=shown, note="")

    def _main_only(self, call: cst.Call) -> bool:
        branches = self.analysis.branches
        if branches.branch_of(call) is not None:
            return True
        function = branches.function_of(call)
        if function is None:
            return False
        reached = (
            branches.callers(function) or called_by_other_files(self.analysis, function, self.ctx.config.run_callers)
            or self._constructed_here(function)
        )
        return not reached or branches.runs_only_on_main(call)

    def _constructed_here(self, function: cst.FunctionDef) -> bool:
        """A method of a class this file builds (`Trainer("runs").fit(3)`): its methods
        run where the instance does, on every process."""
        cls = self._class_of(function)
        return cls is not None and any(
            isinstance(c.node.func, cst.Name) and c.node.func.value == cls.name.value for c in self.analysis.facts.calls
        )

    def _class_of(self, node: cst.CSTNode) -> cst.ClassDef | None:
        current = self.analysis.parent(node)
        while current is not None and not isinstance(current, (cst.ClassDef, cst.Module)):
            current = self.analysis.parent(current)
        return current if isinstance(current, cst.ClassDef) else None

    def _binding(self, call: cst.Call) -> tuple[cst.SimpleStatementLine, str] | None:
        """`writer = SummaryWriter(...)` alone on its line, or `self.writer = ...` alone on
        its line in a method, bound nowhere else in the file: (the line, the name)."""
        analysis = self.analysis
        assign = analysis.parent(call)
        line = analysis.parent(assign) if isinstance(assign, cst.Assign) else None
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if isinstance(target, cst.Name):
            name, blocks = target.value, (cst.IndentedBlock, cst.Module)
        else:
            name = dotted_name(target) if isinstance(target, cst.Attribute) else None
            if name is None or name.count(".") != 1 or not name.startswith("self.") or analysis.branches.function_of(call) is None:
                return None
            blocks = (cst.IndentedBlock,)
        if not isinstance(analysis.parent(line), blocks):
            return None
        if sum(1 for b in analysis.facts.bindings if b.name == name) != 1:
            return None  # bound again somewhere: which one a use reads is not clear
        return line, name

    def _use_lines(self, name: str, binding: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine] | None:
        """The statement lines using `name` (a plain name, or `self.<attr>` within the
        binding's class), each `name.method(...)` alone on its line; None when a use is
        anything else."""
        analysis = self.analysis
        if "." in name:
            cls = self._class_of(binding)
            if cls is None:
                return None
            attr = name.split(".", 1)[1]
            receivers = [
                n for n in analysis.nodes_under(cls, "Attribute")
                if n.attr.value == attr and isinstance(n.value, cst.Name) and n.value.value == "self"
                and not isinstance(analysis.parent(n), cst.AssignTarget)
            ]
        else:
            receivers = [load.node for load in analysis.facts.loads if load.name == name]
        out: list[cst.SimpleStatementLine] = []
        for receiver in receivers:
            line = self._method_call_line(receiver)
            if line is binding:
                continue
            if line is None:
                return None
            if not any(line is seen for seen in out):
                out.append(line)
        return out

    def _method_call_line(self, receiver: cst.CSTNode) -> cst.CSTNode | None:
        """The statement line that is only `receiver.method(...)`, in a block; else None."""
        analysis = self.analysis
        attribute = analysis.parent(receiver)
        call = analysis.parent(attribute) if isinstance(attribute, cst.Attribute) and attribute.value is receiver else None
        expr = analysis.parent(call) if isinstance(call, cst.Call) and call.func is attribute else None
        line = analysis.parent(expr) if isinstance(expr, cst.Expr) else None
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        return line if isinstance(analysis.parent(line), (cst.IndentedBlock, cst.Module)) else None
