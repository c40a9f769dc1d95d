"""AM518: a directory created by every process, where a process that loses the race fails."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.reach import ONE_PROCESS, called_by_other_files, run_by_other_files
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_CHECKS = {"os.path.exists", "os.path.isdir", "os.path.lexists"}
_TOLERATED = {"OSError", "FileExistsError", "Exception", "IOError"}
_CLOCKS = {"datetime.datetime.now", "datetime.now", "time.strftime", "time.time", "datetime.datetime.today"}


_CLEARED = (
    " (left as written: the `shutil.rmtree` above clears it first, so one process can also delete the folder "
    "another has just made; clear and create it on the main process only, `if accelerator.is_main_process:`, "
    "then `accelerator.wait_for_everyone()`)"
)


# ... in a file with no Accelerator at that line (ddim's main.py, whose runner class makes it)
_CLEARED_NO_ACCELERATOR = (
    " (left as written: the `shutil.rmtree` above clears it first, so one process can also delete the folder "
    "another has just made; clear and create it on the main process only, then let the others wait for it: no "
    "Accelerator exists here yet to ask or wait with, so create it before this line (and hand it to the code that "
    "made its own), then `if accelerator.is_main_process:` and `accelerator.wait_for_everyone()`)"
)


class DirectoryCreatedOnEveryProcess(Rule):
    """## What it does
    In a script being migrated (or a file of the run whose code runs on every process: a
    helper other files call, a script that starts a class creating the Accelerator
    itself, a launched script driving a model object of the run), adds `exist_ok=True` to `os.makedirs(path)` under
    `if not os.path.exists(path):` (or `os.path.isdir`, also as one of the terms of an
    `and`), turns `os.mkdir(path)` under such a test into
    `os.makedirs(path, exist_ok=True)`, and reports an `os.makedirs` or `os.mkdir` that
    would fail when the directory exists. A call of a helper of a file the run only reads
    (the pre-commit hook's neighbours, a package left out of the run) that creates a folder
    that way (`create_dirs([...])`, a class whose `__init__` calls one) is reported where
    this file calls it, with where the creation is; where that helper clears the folder
    with `shutil.rmtree` first, the call is told to run on the main process, then wait.
    A call in a `try` whose `except OSError:` does more than pass (removes the last run's
    files from the folder) is reported for what that block does: every process that finds
    the folder there runs it, on files the others may have opened.

    ## Why is this bad?
    Under `accel-launch` every process runs the script. All of them can find the
    directory missing, and then any that tries to create it after another did fails with
    `FileExistsError`: a crash that depends on timing, mostly on the first run.
    `exist_ok=True` lets every process go on; where the `if` already ruled out an
    existing directory, it changes nothing on one process.

    ## Example
    ```python
    if not os.path.exists(sample_dir):
        os.makedirs(sample_dir)
    ```

    Use instead:
    ```python
    if not os.path.exists(sample_dir):
        os.makedirs(sample_dir, exist_ok=True)
    ```

    ## Fix safety
    Under the test the directory is missing, so `exist_ok=True` changes nothing on one
    process. `os.mkdir` has no `exist_ok`; its replacement `os.makedirs` also creates a
    missing parent folder, where `os.mkdir` would stop with FileNotFoundError: the one
    difference, on a run that failed before.

    ## Known limits
    A creation that is not under such a test (`os.makedirs(out)` alone, `os.mkdir(out)`) is
    reported and left as it is: with `exist_ok=True` a run that finds the directory
    would go on where the original stops. pathlib's `path.mkdir()` is fixed the same way
    under `if not path.exists():` (or `is_dir()`), and left alone elsewhere (a `.mkdir()`
    method may belong to something else). An `exist_ok` given as an expression
    (`mkdir(parents=True, exist_ok=run_id == '')`) is reported, left as written, with the
    clock named where the function reads it (a run folder named by the second differs
    between processes). Creations inside a `try` that catches the
    error and ignores it (`except OSError: pass`, or re-raises all but `errno.EEXIST`), under a main-process test, in a function this file never calls, or with a
    path made from the rank are left alone.
    """

    code = "AM518"
    name = "directory-created-on-every-process"
    message = "`{call}` runs on every process: {outcome}{note}"
    fix_title = "Pass `exist_ok=True`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import os\nimport torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "if not os.path.exists(\"samples\"):\n    os.makedirs(\"samples\")\n"
            ),
            after=(
                "import os\nimport torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "if not os.path.exists(\"samples\"):\n    os.makedirs(\"samples\", exist_ok=True)\n"
            ),
            at=("7:5",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        config = self.ctx.config
        # a helper file of a run: its functions the other files call run on every process;
        # a file that starts a class of the run creating the Accelerator itself runs on
        # every process too (StarGAN's main.py making the Solver's folders)
        entering = bool(config.project_enters) and not analysis.accelerator_names
        # a launched script that drives a model object of the run (`model.optimize_parameters()`)
        driving = bool(config.project_drives) and not analysis.accelerator_names
        if not analysis.migrating and not config.run_callers and not entering and not driving:
            return
        self._helpers_called({spelling: rest for spelling, *rest in config.project_dir_makers})
        for fact in analysis.facts.calls:
            qualified = fact.qualified or ""
            if _path_mkdir(fact.node, qualified):
                self._path_mkdir(fact.node)
                continue
            if _mkdir_sometimes_exist_ok(fact.node, qualified):
                self._sometimes_exist_ok(fact.node)
                continue
            if qualified not in ("os.makedirs", "os.mkdir"):
                continue
            call = fact.node
            path = call.args[0].value if call.args and call.args[0].keyword is None else None
            if path is None or any(a.keyword is not None and a.keyword.value == "exist_ok" for a in call.args):
                continue
            if qualified == "os.makedirs" and len([a for a in call.args if a.keyword is None]) > 2:
                continue  # exist_ok given by position
            text = cst.Module([]).code_for_node(path).strip()
            if any(word in text for word in ("rank", "process_index")) or self._skipped(call):
                continue
            fields = {"call": f"{dotted_name(call.func)}()", "outcome": _race(f"`{text}`" if len(text) <= 40 else "`it`")}
            handler = self._handled_otherwise(call)
            if handler is not None:
                self._report_handled(call, handler, fields["call"], f"`{text}`" if len(text) <= 40 else "the folder")
                continue
            if self._cleared_first(call, text):
                self.report(call, note=self._cleared_note(call), **fields)
            elif qualified == "os.makedirs" and self._checked_first(call, text):
                self.report(call, edits=[replace(call, _with_exist_ok(call))], note="", **fields)
            elif _spelled_os_mkdir(call) and self._checked_first(call, text):
                module = cst.Module([]).code_for_node(call.func.value)  # `os`, as the file spells it
                made = _with_exist_ok(call.with_changes(func=cst.parse_expression(f"{module}.makedirs")))
                self.report(call, edits=[replace(call, made)], note="", **fields)
            else:
                fix = "pass `exist_ok=True`" if qualified == "os.makedirs" else "use `os.makedirs(..., exist_ok=True)`"
                self.report(call, note=f" (left as written: {fix} if an existing directory is fine)", **fields)

    def _helpers_called(self, makers: dict[str, list]) -> None:
        """`create_dirs([...])` of a file the run only reads, whose `os.makedirs` has no
        `exist_ok`: named at the call, which this file runs on every process. Where the
        helper clears the folder with `shutil.rmtree` first, `exist_ok=True` would not do:
        the call belongs on the main process (reader R1, stargan-v2's calculate_metrics)."""
        for fact in self.analysis.facts.calls:
            call = fact.node
            found = makers.get(dotted_name(call.func) or "")
            if found is None or self._skipped(call):
                continue
            where, position, cleared = found
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            path = positional[position] if 0 <= position < len(positional) else None
            text = cst.Module([]).code_for_node(path).strip() if path is not None else ""
            if any(word in text for word in ("rank", "process_index")):
                continue
            if isinstance(path, (cst.List, cst.Tuple)) and path.elements and len(text) > 40:
                text = cst.Module([]).code_for_node(path.elements[0].value).strip()  # the first of several
            shown = f"`{text}`" if text and len(text) <= 40 else "the folder it makes"
            then = (
                "" if self.analysis.accelerator_at(call) is None
                else f", or make this call under `with {self.analysis.accelerator_at(call)}.main_process_first():`"
            )
            note = f" (left as written: {where} has no `exist_ok=True`, in a file this run only reads; pass it there{then})"
            if cleared:
                accelerator = self.analysis.accelerator_at(call) or "accelerator"
                note = (
                    f" (left as written: {where} follows a `shutil.rmtree` of the same folder, in a file this run only"
                    " reads, so one process can also delete the folder another has just made or is filling; make this"
                    f" call on the main process only, `if {accelerator}.is_main_process:`, then"
                    f" `{accelerator}.wait_for_everyone()`; the others wait there while it runs, so if it can take"
                    " longer than the process group's timeout (10 minutes with NCCL), launch with"
                    " `accel-launch --process-group-timeout SECONDS`)"
                )
            self.report(call, note=note, call=f"{dotted_name(call.func)}()", outcome=_race(shown))

    def _cleared_first(self, call: cst.Call, path: str) -> bool:
        """`shutil.rmtree(path)` above, in the same function: a fresh folder each run
        (LiDAR-Bonnetal's log folder). `exist_ok=True` would not do: one process can delete
        the folder another has just made."""
        analysis = self.analysis
        scope, at = analysis.scope_of(call), analysis.order(call)
        return any(
            (c.qualified or "") == "shutil.rmtree" and c.node.args and analysis.scope_of(c.node) is scope
            and analysis.order(c.node) < at and cst.Module([]).code_for_node(c.node.args[0].value).strip() == path
            and self._leads_to(c.node, call)
            for c in analysis.facts.calls
        )

    def _cleared_note(self, call: cst.Call) -> str:
        """Where the main process can be asked: in a file with an Accelerator there; in code
        other files run, at the call or by the launcher's rank; in a launched script the
        Accelerator has not reached yet, where it should be made."""
        if self.analysis.accelerator_at(call) is not None:
            return _CLEARED
        config = self.ctx.config
        if config.run_callers and run_by_other_files(self.analysis, call, config.run_callers, config.project_unpassed):
            return (
                " (left as written: the `shutil.rmtree` above clears it first, so one process can also delete the "
                "folder another has just made; clear and create it on one process only, at the call or here "
                f"{ONE_PROCESS}, and let the others wait for it before they use it)"
            )
        return _CLEARED_NO_ACCELERATOR

    def _leads_to(self, earlier: cst.CSTNode, later: cst.CSTNode) -> bool:
        """`later` can run after `earlier` in the same pass: not in the other branch of
        one `if` (ddim's `if exists: ... rmtree ... else: makedirs`)."""
        analysis = self.analysis
        above: set[int] = set()
        node = earlier
        while node is not None:
            above.add(id(node))
            node = analysis.parent(node)
        node = later
        while node is not None and id(node) not in above:
            node = analysis.parent(node)
        return not isinstance(node, cst.If)

    def _path_mkdir(self, call: cst.Call) -> None:
        """pathlib's `out_dir.mkdir()` under `if not out_dir.exists():` (HRNet's
        create_logger) gets `exist_ok=True`. Elsewhere a `.mkdir()` may not be pathlib's,
        so it is left alone."""
        receiver = cst.Module([]).code_for_node(call.func.value).strip()  # type: ignore[attr-defined]
        if any(word in receiver for word in ("rank", "process_index")) or self._skipped(call):
            return
        if self._checked_first(call, receiver):
            shown = receiver if len(receiver) <= 40 else "it"
            self.report(call, edits=[replace(call, _with_exist_ok(call))], note="", call=f"{shown}.mkdir()", outcome=_race(f"`{shown}`"))

    def _sometimes_exist_ok(self, call: cst.Call) -> None:
        """`save_dir.mkdir(parents=True, exist_ok=exist_ok)` (pytorch-template's ConfigParser,
        `exist_ok = run_id == ''`): where the value is False, every process but the first
        fails. Named, left as written: the author chose to fail on an existing folder."""
        if self._skipped(call):
            return
        receiver = cst.Module([]).code_for_node(call.func.value).strip() if isinstance(call.func, cst.Attribute) else ""
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "makedirs":
            receiver = cst.Module([]).code_for_node(call.args[0].value).strip() if call.args else ""
        if any(word in receiver for word in ("rank", "process_index")):
            return
        value = next(a.value for a in call.args if a.keyword is not None and a.keyword.value == "exist_ok")
        shown = receiver if len(receiver) <= 40 else "it"
        text = cst.Module([]).code_for_node(value).strip()
        clock = self._clock_in_function(call)
        when = (
            f"; if its name comes from `{clock}()`, called in this function, processes started in different seconds "
            "also make different folders: choose the name on one process and share it" if clock else ""
        )
        note = (
            f" (left as written: `exist_ok={text}` is not always True; where it is False, create the folder on the "
            f"main process only, then let the others wait for it{when})"
        )
        name = f"{shown}.mkdir()" if call.func.attr.value == "mkdir" else f"{dotted_name(call.func)}()"  # type: ignore[attr-defined]
        self.report(call, note=note, call=name, outcome=_race(f"`{shown}`"))

    def _clock_in_function(self, call: cst.Call) -> str | None:
        """`datetime.now` (or `time.strftime`, `time.time`) called in the function around
        `call`: a run folder is often named from it."""
        analysis = self.analysis
        function = analysis.branches.function_of(call)
        for c in analysis.facts.calls:
            if (c.qualified or "") in _CLOCKS and analysis.branches.function_of(c.node) is function:
                return c.qualified
        return None

    def _missing(self, test: cst.BaseExpression, path: str) -> bool:
        """`not os.path.exists(path)` (or isdir), or pathlib's `not path.exists()` (or
        `is_dir()`), parentheses or not."""
        if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
            return False
        inner = test.expression
        if (
            isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value in ("exists", "is_dir")
            and cst.Module([]).code_for_node(inner.func.value).strip() == path
        ):
            return True
        if not (isinstance(inner, cst.Call) and (self.analysis.imports.qualify(inner.func) or "") in _CHECKS and inner.args):
            return False
        return cst.Module([]).code_for_node(inner.args[0].value).strip() == path

    def _skipped(self, call: cst.Call) -> bool:
        """Only the main process runs it, a function no file of the run calls, or a `try`
        that catches the error."""
        analysis = self.analysis
        branches = analysis.branches
        if branches.branch_of(call) is not None:
            return True
        function = branches.function_of(call)
        if function is not None and (not branches.callers(function) and not called_by_other_files(analysis, function, self.ctx.config.run_callers) or branches.runs_only_on_main(call)):
            return True
        current = analysis.parent(call)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.Try) and any(_catches(h) for h in current.handlers):
                return True
            current = analysis.parent(current)
        return False

    def _handled_otherwise(self, call: cst.Call) -> cst.ExceptHandler | None:
        """The handler of a `try` around the call that catches an existing directory and
        then does more than let it pass (a2c-ppo-acktr's cleanup_log_dir: `except OSError:`
        removes the `*.monitor.csv` files in it)."""
        analysis = self.analysis
        child, current = call, analysis.parent(call)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.Try) and child is current.body:
                return next((h for h in current.handlers if _tolerates(h) and not _catches(h) and not _stops(h)), None)
            child, current = current, analysis.parent(current)
        return None

    def _report_handled(self, call: cst.Call, handler: cst.ExceptHandler, shown: str, path: str) -> None:
        analysis = self.analysis
        line = analysis.position(handler).start.line
        kind = f"except {cst.Module([]).code_for_node(handler.type).strip()}" if handler.type is not None else "except"
        outcome = (
            f"every process that finds {path} there (each but the first to create it; all of them when it existed"
            f" before) runs the `{kind}` block (line {line}), on what the others may already be using (files they"
            " have opened there)"
        )
        accelerator = analysis.accelerator_at(call)
        where = (
            f"under `if {accelerator}.is_main_process:`, then `{accelerator}.wait_for_everyone()`" if accelerator
            else f"on one process only {ONE_PROCESS}, and have the others wait for it (a barrier)"
        )
        note = f" (left as written: create the folder and run that block {where})"
        self.report(call, note=note, call=shown, outcome=outcome)

    def _checked_first(self, call: cst.Call, path: str) -> bool:
        """Under `if not os.path.exists(path):` (the same path as written), or in the `else`
        of `if os.path.exists(path):`."""
        analysis = self.analysis
        child, current = call, analysis.parent(call)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, cst.If):
                if isinstance(current.orelse, cst.Else) and child is current.orelse:
                    # `if os.path.exists(path): ... else: os.makedirs(path)` (ddim's main.py)
                    return self._missing(cst.UnaryOperation(operator=cst.Not(), expression=current.test), path)
                if child is not current.body:
                    return False
                return any(self._missing(test, path) for test in _conjuncts(current.test))
            child, current = current, analysis.parent(current)
        return False


def _race(path: str) -> str:
    return f"one that finds {path} missing and creates it after another did fails with FileExistsError"


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a and b and c` → [a, b, c]: each must hold for the body to run."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _stops(handler: cst.ExceptHandler) -> bool:
    """The handler raises or exits: the process that loses the race stops there (the
    `exist_ok=True` case, not a block that goes on with the folder)."""
    text = cst.Module([]).code_for_node(handler.body)
    return "raise" in text or "exit(" in text or "quit(" in text


def _tolerates(handler: cst.ExceptHandler) -> bool:
    """The handler catches the error of an existing directory (whatever it then does)."""
    kinds = handler.type
    if kinds is None:
        return True
    names = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    return any((dotted_name(n) or "").rsplit(".", 1)[-1] in _TOLERATED for n in names)


def _catches(handler: cst.ExceptHandler) -> bool:
    """`except OSError: pass`, or `except OSError as e: if e.errno != errno.EEXIST: raise`:
    the error of an existing directory is caught and ignored (a handler that stops the
    script, `print(e); sys.exit(1)`, still stops every process that loses the race)."""
    body = handler.body.body if isinstance(handler.body, cst.IndentedBlock) else [handler.body]
    smalls = [small for line in body for small in (line.body if isinstance(line, cst.SimpleStatementLine) else [None])]
    ignored = smalls and all(isinstance(small, (cst.Pass, cst.Continue)) for small in smalls)
    if not ignored and not (len(body) == 1 and _reraises_all_but_exists(body[0])):
        return False
    kinds = handler.type
    if kinds is None:
        return True
    names = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    return any((dotted_name(n) or "").rsplit(".", 1)[-1] in _TOLERATED for n in names)


def _reraises_all_but_exists(statement: cst.CSTNode) -> bool:
    """`if e.errno != errno.EEXIST: raise`: only an existing directory is let through."""
    if not isinstance(statement, cst.If) or statement.orelse is not None or "EEXIST" not in cst.Module([]).code_for_node(statement.test):
        return False
    lines = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
    smalls = [small for line in lines for small in (line.body if isinstance(line, cst.SimpleStatementLine) else [None])]
    return len(smalls) == 1 and isinstance(smalls[0], cst.Raise) and smalls[0].exc is None


def _spelled_os_mkdir(call: cst.Call) -> bool:
    """`os.mkdir(...)` written through the module (so `os.makedirs` is at hand)."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "mkdir" and len(call.args) <= 2


def _path_mkdir(call: cst.Call, qualified: str) -> bool:
    """`<path>.mkdir(...)` that is not `os.mkdir`, with no `exist_ok` yet."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "mkdir") or qualified.startswith("os."):
        return False
    return not any(a.keyword is not None and a.keyword.value == "exist_ok" for a in call.args) and len(call.args) < 3


def _mkdir_sometimes_exist_ok(call: cst.Call, qualified: str) -> bool:
    """`path.mkdir(..., exist_ok=flag)` or `os.makedirs(path, exist_ok=flag)` with a value
    that is neither a literal True nor a literal False (False is the default's failure,
    reported as such elsewhere: a literal False is left to its author)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("mkdir", "makedirs"):
        return False
    if func.attr.value == "makedirs" and qualified != "os.makedirs":
        return False
    if func.attr.value == "mkdir" and qualified.startswith("os."):
        return False
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "exist_ok"), None)
    return value is not None and not (isinstance(value, cst.Name) and value.value in ("True", "False"))


def _with_exist_ok(call: cst.Call) -> cst.Call:
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    arg = cst.Arg(
        cst.Name("True"),
        keyword=cst.Name("exist_ok"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return call.with_changes(args=[*args, arg])
