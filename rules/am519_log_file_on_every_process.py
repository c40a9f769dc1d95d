"""AM519: a log file every process appends to."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import NO_ACCELERATOR_YET, ONE_PROCESS, run_by_other_files
from migrator.analysis.walk import descendants
from migrator.cst import wrap_statements
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

# qualified call → the keyword (or first positional argument) naming the file
_LOG_FILES = {
    "logging.basicConfig": "filename",
    "logging.FileHandler": "filename",
    "logging.handlers.RotatingFileHandler": "filename",
    "logging.handlers.TimedRotatingFileHandler": "filename",
}

_ELSEWHERE = f" ({NO_ACCELERATOR_YET}: open the file on one process only {ONE_PROCESS}, or give each process its own)"


class LogFileOnEveryProcess(Rule):
    """## What it does
    In a script being migrated, reports a log file configured on every process:
    `logging.basicConfig(filename=...)` and `logging.FileHandler(path)` (and the
    rotating handlers) outside a main-process branch.

    ## Why is this bad?
    Under `accel-launch` every process runs the set-up, so N processes append to the
    same file: each record is written N times, interleaved, and a rotating handler
    renames the file under the others' feet. The Accelerator does not change how the
    `logging` module writes.

    ## Example
    ```python
    logging.basicConfig(filename="train.log", level=logging.INFO)
    ```

    Use instead:
    ```python
    if accelerator.is_main_process:
        logging.basicConfig(filename="train.log", level=logging.INFO)
    ```

    ## Fix safety
    Only `logging.basicConfig(filename=...)` standing alone where the Accelerator is
    reached is put under `if accelerator.is_main_process:`: the root logger of the other
    processes then keeps its defaults (warnings and errors to stderr, INFO records
    dropped), which is what a user who logs to one file wants.

    ## Known limits
    A file handler (`logging.FileHandler(path)`, often in a helper that builds the logger)
    and a configuration that sits before the Accelerator exists (module level) are
    reported, not fixed: where the other processes' records go is the user's choice. A
    path built from the process's rank is not reported.

    In a file that gets no Accelerator but whose functions the run calls on every process
    (a `setup_logging()` of a config module), the handler is reported and left as written;
    where its path is built from the function's parameters, the finding holds only where
    the callers hand every process the same path, and says so (a caller drawing a run
    folder at random gives each process its own).
    """

    code = "AM519"
    name = "log-file-on-every-process"
    message = "`{call}` makes every process append to `{path}`{when}: each record is written N times, interleaved; configure it on the main process only{note}"
    fix_title = "Configure the log file under `if accelerator.is_main_process:`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import logging\nimport torch\n\n"
                "logging.getLogger('train').addHandler(logging.FileHandler('train.log'))\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in torch.randn(4, 2):\n    model(x).sum().backward()\n    optimizer.step()\n"
            ),
            at=("4:39",),
        ),
        Example(
            before=(
                "import logging\nimport torch\n\n\ndef main():\n"
                "    logging.basicConfig(filename='train.log', level=logging.INFO)\n"
                "    model = torch.nn.Linear(2, 2)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    for x in torch.randn(4, 2):\n        model(x).sum().backward()\n        optimizer.step()\n"
            ),
            after=(
                "import logging\nimport torch\nfrom runtime import Accelerator\n\n\ndef main():\n"
                "    accelerator = Accelerator(cpu=True)\n"
                "    if accelerator.is_main_process:\n"
                "        logging.basicConfig(filename='train.log', level=logging.INFO)\n"
                "    model = torch.nn.Linear(2, 2)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    model, optimizer = accelerator.prepare(model, optimizer)\n"
                "    for x in torch.randn(4, 2):\n        accelerator.backward(model(x).sum())\n        optimizer.step()\n"
            ),
            at=("6:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        # a file given no Accelerator whose functions the run calls on every process
        # (the Pytorch-Project-Template's `process_config()` adding RotatingFileHandlers)
        shared = not analysis.migrating
        if shared and not self.ctx.config.run_callers:
            return
        branches = analysis.branches
        helpers = {s: kind for s, kind, *_ in self.ctx.config.project_distribution if kind in ("log_file", "log_file_gated")}
        gated = {s for s, kind in helpers.items() if kind == "log_file_gated"}
        for fact in analysis.facts.calls:
            keyword = _LOG_FILES.get(fact.qualified or "")
            if helpers.get(dotted_name(fact.node.func) or "") == "log_file":
                keyword = ""  # another file's helper that opens the log file (`utils.set_logger(path)`)
            if keyword is None:
                continue
            function = branches.function_of(fact.node)
            if function is not None and function.name.value in gated:
                continue  # every caller in the run configures it on the main process only
            call = fact.node
            named = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
            first = next((a.value for a in call.args if a.keyword is None), None)
            path = named if fact.qualified == "logging.basicConfig" else named or first
            if path is None and keyword:
                continue
            text = cst.Module([]).code_for_node(path).strip() if path is not None else "the file it opens"
            if any(word in text for word in ("rank", "process_index")) or branches.branch_of(call) is not None:
                continue
            function = branches.function_of(call)
            if function is not None and branches.runs_only_on_main(call):
                continue
            if shared and not run_by_other_files(analysis, call, self.ctx.config.run_callers, self.ctx.config.project_unpassed):
                continue
            fields = {"call": f"{cst.Module([]).code_for_node(call.func)}(...)", "path": text if len(text) <= 40 else "the file", "when": ""}
            line = self._own_line(call)
            if shared:
                if path is not None and self._from_parameter(call, path):  # the callers choose the path: one per process is theirs to pick
                    fields["when"] = " where the callers hand every process the same path"
                self.report(call, note=_ELSEWHERE, **fields)
                continue
            accelerator = analysis.accelerator_at(call)
            if (fact.qualified == "logging.basicConfig" or keyword == "") and line is not None and accelerator is not None:
                wrapper = lambda body, acc=accelerator: cst.If(test=cst.parse_expression(f"{acc}.is_main_process"), body=body)  # noqa: E731
                edits = [replace(node, new) for node, new in wrap_statements([line], wrapper)]
                self.report(call, edits=edits, note="", **fields)
            else:
                self.report(call, note="", **fields)

    def _from_parameter(self, call: cst.Call, path: cst.BaseExpression) -> bool:
        """The path is built from a parameter of the function around the call
        (`get_logger(logdir)` → `FileHandler(file_path)`, `file_path = os.path.join(logdir, ...)`)."""
        function = self.analysis.branches.function_of(call)
        if function is None:
            return False
        params = {p.name.value for p in function.params.params if p.name.value != "self"}
        names = {n.value for n in descendants(path) if isinstance(n, cst.Name)}
        for _ in range(3):  # through the names the path is built from, in the function
            names |= {
                n.value for b in self.analysis.facts.bindings
                if b.name in names and b.value is not None and self.analysis.branches.function_of(b.statement) is function
                for n in descendants(b.value) if isinstance(n, cst.Name)
            }
        return bool(names & params)

    def _own_line(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        """The line when the call is its one statement, whose result nothing keeps."""
        expr = self.analysis.parent(call)
        line = self.analysis.parent(expr) if isinstance(expr, cst.Expr) else None
        return line if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
