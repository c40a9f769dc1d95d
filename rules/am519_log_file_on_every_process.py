"""AM519: a log file every process appends to."""

from __future__ import annotations

import libcst as cst

from migrator.rule import Example, FixAvailability, Rule

# qualified call → the keyword (or first positional argument) naming the file
_LOG_FILES = {
    "logging.basicConfig": "filename",
    "logging.FileHandler": "filename",
    "logging.handlers.RotatingFileHandler": "filename",
    "logging.handlers.TimedRotatingFileHandler": "filename",
}


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

    ## Known limits
    Reported, not fixed: the configuration often sits at module level, before the
    Accelerator exists, and records logged on the other processes then go to stderr
    instead; where to log them is the user's choice. A path built from the process's rank
    is not reported.
    """

    code = "AM519"
    name = "log-file-on-every-process"
    message = "`{call}` makes every process append to `{path}`: each record is written N times, interleaved; configure it on the main process only"
    fix_title = "Configure the log file under `if accelerator.is_main_process:`"
    fix = FixAvailability.NEVER
    examples = (
        Example(
            before=(
                "import logging\nimport torch\n\n"
                "logging.basicConfig(filename='train.log', level=logging.INFO)\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in torch.randn(4, 2):\n    model(x).sum().backward()\n    optimizer.step()\n"
            ),
            at=("4:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating:
            return
        branches = analysis.branches
        for fact in analysis.facts.calls:
            keyword = _LOG_FILES.get(fact.qualified or "")
            if keyword is None:
                continue
            call = fact.node
            path = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
            if path is None and keyword == "filename" and fact.qualified != "logging.basicConfig":
                path = next((a.value for a in call.args if a.keyword is None), None)
            if path is None:
                continue
            text = cst.Module([]).code_for_node(path).strip()
            if any(word in text for word in ("rank", "process_index")) or branches.branch_of(call) is not None:
                continue
            function = branches.function_of(call)
            if function is not None and branches.runs_only_on_main(call):
                continue
            self.report(call, call=f"{cst.Module([]).code_for_node(call.func)}(...)", path=text if len(text) <= 40 else "the file")
