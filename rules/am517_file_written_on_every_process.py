"""AM517: an image, array, figure or text file written to the same path by every process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.names import LIBRARY_ROOTS
from migrator.analysis.reach import DRIVEN_LATER, NO_ACCELERATOR_YET, ONE_PROCESS, run_by_other_files
from migrator.analysis.random_draws import unique_draw, unseeded_draw
from migrator.analysis.saving import barrier_anchor, per_process_path
from migrator.analysis.roles import optimizer_containers, returned_values
from migrator.cst import adjacent_runs, wrap_statements
from migrator.edits import Edit, Fix
from migrator.rule import Example, FixAvailability, Rule

# qualified writer → (index of its path argument, its keyword)
_WRITERS = {
    "torchvision.utils.save_image": (1, "fp"),
    "matplotlib.pyplot.savefig": (0, "fname"),
    "numpy.save": (0, "file"),
    "numpy.savez": (0, "file"),
    "numpy.savez_compressed": (0, "file"),
    "numpy.savetxt": (0, "fname"),
    "torch.onnx.export": (2, "f"),
    "shutil.copyfile": (1, "dst"),
    "shutil.copy": (1, "dst"),
    "shutil.copy2": (1, "dst"),
    "shutil.copytree": (1, "dst"),
    # a tree removed to be written again (`if os.path.exists(dst): shutil.rmtree(dst)` before
    # `shutil.copytree(src, dst)`): one process deleting what another is writing fails both
    "shutil.rmtree": (0, "path"),
    # a file removed (BigGAN's MetricsLogger: `if os.path.exists(fname): os.remove(fname)`, built on every
    # process): the process that finds it gone after the others checked fails with FileNotFoundError
    "os.remove": (0, "path"),
    "os.unlink": (0, "path"),
    "joblib.dump": (1, "filename"),
    "scipy.io.savemat": (0, "file_name"),
}
# pandas frames written with `.to_csv(path)` and the like: the method → its path keyword
_FRAME_WRITERS = {
    "to_csv": "path_or_buf", "to_json": "path_or_buf", "to_excel": "excel_writer", "to_parquet": "path",
    "to_pickle": "path", "to_feather": "path", "to_html": "buf",
}
_FRAME_MAKERS = {"pandas.DataFrame", "pandas.concat", "pandas.read_csv", "pandas.Series"}
# writers that run a model they are given: on the main process alone it must be the
# unwrapped one (DistributedDataParallel's forward would wait for the other processes)
_MODEL_ARGUMENT = {"torch.onnx.export": (0, "model")}
_OPENERS = {"open", "builtins.open", "io.open"}
# library objects that keep a file open for writing while they are used: the class →
# (position of its path, keyword, what it writes)
_LIBRARY_KEEPERS = {
    f"{package}.Monitor": (1, "filename", "a Monitor writes every episode to `<filename>.monitor.csv`")
    for package in ("stable_baselines3.common.monitor", "baselines.bench", "baselines.bench.monitor")
}
# PIL images written with `.save(path)`: made by these
_PIL_MAKERS = ("PIL.Image.fromarray", "PIL.Image.open", "PIL.Image.new")


_SAME_FILE = "N processes write the same file at once"
_REMOVERS = {"os.remove", "os.unlink"}
_REMOVED_BY_HAND = (
    "remove it on the main process only, once no other process reads it (after `accelerator.wait_for_everyone()` "
    "where one does)"
)
_REMOVED = "N processes remove the same file at once, and one that finds it gone after checking fails (FileNotFoundError)"
_KEPT_OPEN = (
    " (left as written: every process uses the object it makes; make it on the main process only where the others"
    " need nothing of it (`if accelerator.is_main_process: sys.stdout = Logger(...)`), or give each process a file"
    " of its own (`accelerator.process_index` in its name))"
)
_ELSEWHERE = f" ({NO_ACCELERATOR_YET}: write it on one process only, at the call or here {ONE_PROCESS})"
# ... in a function that hands a result back (human-pose's `evaluate`, writing its results
# file and returning the scores): gated at the call, the other processes would get nothing
_ELSEWHERE_RETURNING = (
    f" ({NO_ACCELERATOR_YET}: write it on one process only, here {ONE_PROCESS}, not at the call: `{{function}}` hands"
    " back a result its callers may use on every process)"
)
# ... an object kept open there (stable-baselines' Monitor in a helper that builds environments)
_KEPT_OPEN_ELSEWHERE = (
    f" ({NO_ACCELERATOR_YET}: give each process a file of its own (the process's rank in its name, or in the"
    " folder the callers pass), or make it on one process only)"
)
# ... and read back right after by every process (pytorch-retinanet's coco_eval: `loadRes(path)`)
_ELSEWHERE_READ_BACK = (
    f" ({NO_ACCELERATOR_YET}; every process reads it back after it: give each process a file of its own (its rank"
    f" in the name), or write it on one process only {ONE_PROCESS} and have the others wait for it (a barrier)"
    " before they read it)"
)


class FileWrittenOnEveryProcess(Rule):
    """## What it does
    In a script being migrated, puts a file written to the same path by every process
    under `if accelerator.is_main_process:`: a statement that is one call of
    `torchvision.utils.save_image`, `matplotlib.pyplot.savefig`, `numpy.save`/`savez`/
    `savetxt`, `torch.onnx.export`, `shutil.copyfile`/`copy`/`copy2`/`copytree` (and the
    `shutil.rmtree` that clears its destination first), `joblib.dump`, a pandas frame's
    `to_csv`/`to_json`/`to_excel`/... (`pd.DataFrame(log).to_csv(path)`, or a name bound to
    a frame pandas made in the same scope), a whole `with open(path, "w") as f:` block (any
    writing mode), or an archive unpacked (`tar.extractall()`, `shutil.unpack_archive`,
    with the `with` blocks that only download and open it). In the block, calls of the
    prepared model, and the model an ONNX export runs, go through
    `accelerator.unwrap_model(model)`, so the main process alone runs no
    DistributedDataParallel collective. When the script reads the files afterwards (an
    unpacked archive, the same path passed to a later call), `accelerator.wait_for_everyone()`
    follows, so no process reads them before they are written. (`torch.save` is
    AM510's; a model's `save_pretrained` AM502's.) In a run of several files, the same for
    a call of another file's helper that does nothing but write a file
    (`utils.save_dict_to_json(metrics, path)`: it opens a file for writing, and otherwise
    only formats and prints, returns nothing and sets nothing outside it;
    migrator/project/writers.py); a file that starts a class of the run that creates the
    Accelerator itself, or a launched script that drives a model object of the run
    (`model.optimize_parameters()`), hears of such calls, left as written. So does a
    call that builds an object of another file's class keeping a file open for writing
    (`sys.stdout = Logger(path)`, whose `__init__` does `self.file = open(fpath, 'w')`):
    every process goes on using the object, so the caller chooses how to split it. In a file given
    no Accelerator whose code other files of the run call on every process (a helper
    module, a base class's method appending to the run's log), its own writes are reported
    and left as they are. In a file AM912 leaves single-process (its optimizers kept in a
    container), a checkpoint method of the run's objects it calls (`ckptio.save(step)`
    for each of `self.ckptios`) is still named: the hand migration needs it gated. So is a
    call of a helper of a file the run only reads that writes files among other work
    (stargan-v2's `utils.debug_image(nets, args, inputs, step)`, running the networks and
    saving sample grids; migrator/project/output_writers.py): left as written, since only
    the caller knows whether the rest may run on the main process alone.

    ## Why is this bad?
    Under `accel-launch` every process runs the script, so N processes truncate and
    write the same file at once: the work is done N times and the file can end up with
    interleaved or half-written contents.

    ## Example
    ```python
    for epoch in range(epochs):
        train(epoch)
        save_image(samples, f"results/sample_{epoch}.png")
    ```

    Use instead:
    ```python
    for epoch in range(epochs):
        train(epoch)
        if accelerator.is_main_process:
            save_image(samples, f"results/sample_{epoch}.png")
    ```

    ## Fix safety
    A statement is gated only when nothing in it must run on every process: no
    collective (a gather, a reduce, a barrier, `backward`, a function of this file that
    runs one), and no name, attribute or variable it binds is read after it. Values it
    writes are still computed on every process before it (the gated statement only
    writes). The barrier after it is written only where every process reaches the
    statement (not under an `if` of its own, not in a helper called under one).

    ## Known limits
    Left as a finding, with nothing changed: a writer inside a larger expression or a
    statement line with several statements, a `with` that opens more than the file, a
    block with a collective or with results used later, a file read back where no place
    right after the write is reached by every process (a write under an `if`), code
    before the Accelerator exists, and a file removed (`os.remove`/`os.unlink` after an
    existence check: the last process to look finds it gone), since when no other process
    reads it any more is the user's to say. A writer in a function this file never calls is not reported: its callers
    decide which processes run it. A PIL image made in the same function
    (`Image.fromarray(a).save(path)`) is a writer too. Paths built from the rank, and temporary
    directories, are per-process files and are left alone. A path drawn at random
    (`runs/<random.randint(...)>` with no seed set alike before it) is reported for what it
    does: each process writes its own copy in a place of its own. Writers this rule does not
    know (a frame made elsewhere, an image object made elsewhere) are not reported, nor is
    a write in code other files run under a test of an optional parameter no call of the
    run passes (`if save_path is not None:`): in this run it never happens.
    """

    code = "AM517"
    name = "file-written-on-every-process"
    message = "`{call}` writes {path} on every process: {consequence}{note}"
    fix_title = "Write it on the main process only (`if accelerator.is_main_process:`)"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom torchvision.utils import save_image\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nsamples = torch.rand(4, 1, 8, 8)\n"
                "save_image(samples, \"samples.png\")\n"
            ),
            after=(
                "import torch\nfrom torchvision.utils import save_image\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\nsamples = torch.rand(4, 1, 8, 8)\n"
                "if accelerator.is_main_process:\n    save_image(samples, \"samples.png\")\n"
            ),
            at=("7:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        helpers = dict(self.ctx.config.project_writers)
        # a file that starts a class or function of the run that creates the Accelerator
        # itself runs on every process too: its helpers' writes are reported there
        # (and so does a launched script driving a model object of the run: `model.optimize_parameters()`)
        entered = bool(self.ctx.config.project_enters or self.ctx.config.project_drives) and not analysis.accelerator_names
        # a model object's checkpoint method, unless the run gives its class the Accelerator (it then saves once)
        savers = {s: where for s, where, made_by in self.ctx.config.project_savers if made_by not in self.ctx.config.project_calls}
        driving = bool(self.ctx.config.project_drives) and not analysis.accelerator_names
        if not analysis.migrating and not driving and not analysis.accelerator_names and self.ctx.config.run_callers:
            self._in_code_run_elsewhere()
        self._kept_open_files(analysis.migrating or driving)
        outputs = dict(self.ctx.config.project_output_writers)
        if not analysis.migrating and not (entered and (helpers or savers)):
            held = optimizer_containers(analysis.facts, analysis.parent)
            if held:
                self._checkpoint_methods(savers)  # left single-process by AM912: the hand migration needs them too
            if held or entered or (self.ctx.config.run_callers and not analysis.accelerator_names):
                self._output_helpers(outputs)
            return
        self._checkpoint_methods(savers)
        self._output_helpers(outputs)
        gated: list[tuple[cst.Call, cst.BaseStatement, dict]] = []
        self._model_arguments: set[int] = set()
        # a launched script driving a model object writes its own files on every process too
        for fact in analysis.facts.calls:
            own = analysis.migrating or driving
            found = self._write(fact) or self._helper_write(fact, helpers) if own else self._helper_write(fact, helpers)
            if found is None:
                continue
            call, path, statement, shown = found
            if per_process_path(analysis, path) or self._main_only(call):
                continue
            why, wait = self._why_not(call, path, statement)
            if why is None and fact.qualified in _REMOVERS:
                why = _REMOVED_BY_HAND  # the others may still read the file: when to remove it is the user's
            if why is not None and not analysis.migrating:  # a launched script driving a model object of the run
                why = f"{DRIVEN_LATER}; write it on the main process then"
            fields = {"call": shown, "path": _short(path) if path is not call else "a file",
                      "consequence": self._consequence(path, call) if path is not call else _SAME_FILE}
            if why is not None:
                self.report(call, note=f" (left as written: {why})", **fields)
            else:
                gated.append((call, statement, fields, wait))
                if fact.qualified in _MODEL_ARGUMENT:
                    self._model_arguments.add(id(_argument(call, *_MODEL_ARGUMENT[fact.qualified])))
        for group in adjacent_runs(gated, analysis.parent):
            accelerator = analysis.accelerator_at(group[0][1])
            pairs = wrap_statements([entry[1] for entry in group], self._wrapper(accelerator))
            edits = [Edit(node, replacement=new) for node, new in pairs]  # type: ignore[arg-type]
            if any(entry[3] for entry in group):  # the files are read next: the others wait for them
                barrier = cst.parse_statement(f"{accelerator}.wait_for_everyone()\n")
                edits[-1] = Edit(edits[-1].node, replacement=edits[-1].replacement, after=(barrier,))
            fix = Fix(tuple(edits))
            for call, _, fields, _ in group:
                self.report(call, edits=fix, note="", **fields)

    def _in_code_run_elsewhere(self) -> None:
        """A file given no Accelerator whose code other files of the run call on every
        process (st-gcn's `IO.print_log`, appending to the run's log.txt): each process
        writes the file. Named, left as written. A helper that does nothing but write is
        named at its calls instead, where the run's own files make them (project/writers.py)."""
        analysis = self.analysis
        branches = analysis.branches
        gated = set(self.ctx.config.project_gated_writers)
        helpers = dict(self.ctx.config.project_writers)  # `self.io.save_pkl(...)`: a helper of another file that only writes
        for fact in analysis.facts.calls:
            found = self._write(fact) or self._helper_write(fact, helpers)
            if found is None:
                continue
            call, path, _, shown = found
            if per_process_path(analysis, path) or branches.branch_of(call) is not None or branches.runs_only_on_main(call):
                continue
            function = branches.function_of(call)
            if function is None or (function.name.value in gated or id(function) in analysis.facts.method_of) and _only_writes(function):
                continue
            unpacks = fact.qualified == "shutil.unpack_archive" or isinstance(call.func, cst.Attribute) and call.func.attr.value == "extractall"
            if unpacks or self._copy_of_a_save(fact, function):
                continue  # an unpacked download is AM220's, at the call; a checkpoint's copy goes with AM510's save
            if run_by_other_files(analysis, call, self.ctx.config.run_callers, self.ctx.config.project_unpassed):
                fields = {"call": shown, "path": _short(path) if path is not call else "a file", "consequence": self._consequence(path, call)}
                read_back = path is not call and self._read_back(path, call, same_function=True)
                returns = any(value is not None for value in returned_values(function))
                note = _ELSEWHERE_RETURNING.replace("{function}", function.name.value) if returns else _ELSEWHERE
                self.report(call, note=_ELSEWHERE_READ_BACK if read_back else note, **fields)

    def _kept_open_files(self, own: bool) -> None:
        """An object of another file's class that keeps a file open for writing, built by
        every process (`sys.stdout = Logger(path)`: project/open_files.py), or of a library's
        (stable-baselines' `Monitor(env, path)`, pytorch-a2c's envs.py). Named, left as
        written: every process goes on using the object, so only the caller can choose
        between one process writing it and a file for each."""
        keepers = {spelling: (position, where) for spelling, position, where in self.ctx.config.project_file_keepers}
        analysis = self.analysis
        for fact in analysis.facts.calls:
            spelling = dotted_name(fact.node.func)
            call = fact.node
            if fact.qualified in _LIBRARY_KEEPERS:
                position, keyword, where = _LIBRARY_KEEPERS[fact.qualified]
                path = _argument(call, position, keyword)
            elif spelling in keepers:
                position, where = keepers[spelling]
                path = _argument(call, position, "") if position >= 0 else call
            else:
                continue
            if path is None or dotted_name(path) == "None" or path is not call and per_process_path(analysis, path):
                continue  # no path given (the class then opens nothing), or one of each process
            branches = analysis.branches
            if own and self._main_only(call) or not own and (
                branches.branch_of(call) is not None or branches.runs_only_on_main(call)
                or not run_by_other_files(analysis, call, self.ctx.config.run_callers, self.ctx.config.project_unpassed)
            ):
                continue
            shown = _short(path) if path is not call else "a file"
            if path is not call and any(word in _short(path) for word in ("rank", "process_index")):
                where += "; the rank in its name is a parameter each call fills with a loop's count, not the process's"
            consequence = f"each process opens it for writing and keeps it open ({where}), so N processes write into one file"
            note = _KEPT_OPEN if own else _KEPT_OPEN_ELSEWHERE
            self.report(call, call=f"{spelling}()", path=shown, consequence=consequence, note=note)

    def _copy_of_a_save(self, fact, function: cst.FunctionDef) -> bool:
        """`shutil.copyfile(path, best)` after a `torch.save` in the same function: AM510,
        naming the save, says to move the copy with it."""
        if not (fact.qualified or "").startswith("shutil.copy"):
            return False
        analysis = self.analysis
        return any(
            c.qualified == "torch.save" and analysis.branches.function_of(c.node) is function
            and analysis.order(c.node) < analysis.order(fact.node)
            for c in analysis.facts.calls
        )

    def _write(self, fact):
        """(call, path, statement to gate or None, how to show the call) for a writer."""
        call = fact.node
        qualified = fact.qualified or ""
        if qualified in _WRITERS:
            index, keyword = _WRITERS[qualified]
            path = _argument(call, index, keyword)
            if path is None:
                return None
            return call, path, self._own_line(call), f"{dotted_name(call.func) or qualified}()"
        unpack = qualified == "shutil.unpack_archive"
        if unpack or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "extractall"):
            path = _argument(call, 1, "extract_dir") if unpack else _argument(call, 0, "path")
            line = self._own_line(call)
            return call, path or cst.SimpleString('"."'), self._lifted(line) if line is not None else None, f"{dotted_name(call.func) or 'extractall'}()"
        if qualified in _OPENERS or (dotted_name(call.func) == "open" and "open" not in self.analysis.imports.aliases):
            path, mode = _argument(call, 0, "file"), _argument(call, 1, "mode")
            if path is None or not _writes(mode):
                return None
            item = self.analysis.parent(call)
            with_ = self.analysis.parent(item) if isinstance(item, cst.WithItem) else None
            if not isinstance(with_, cst.With):
                return call, path, None, "open()"
            return call, path, with_ if len(with_.items) == 1 else None, "open()"
        frame = self._frame_write(call)
        if frame is not None:
            path = _argument(call, 0, _FRAME_WRITERS[frame])
            return (call, path, self._own_line(call), f"DataFrame.{frame}()") if path is not None else None
        if self._pil_image_save(call):
            path = _argument(call, 0, "fp")
            return (call, path, self._own_line(call), "Image.save()") if path is not None else None
        return None

    def _frame_write(self, call: cst.Call) -> str | None:
        """`pd.DataFrame(log).to_csv(path)`, or `.to_csv(path)` (`to_json`, ...) on a name
        bound in the same scope to a frame pandas makes (`df = pd.DataFrame(rows)`):
        the method's name."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _FRAME_WRITERS):
            return None
        analysis = self.analysis
        values = [func.value]
        if isinstance(func.value, cst.Name):
            scope = analysis.scope_of(call)
            values = [
                b.value for b in analysis.facts.bindings
                if b.name == func.value.value and b.value is not None and analysis.scope_of(b.statement) is scope
            ]
        made = bool(values) and all(
            isinstance(v, cst.Call) and analysis.imports.qualify(v.func) in _FRAME_MAKERS for v in values
        )
        return func.attr.value if made else None

    def _pil_image_save(self, call: cst.Call) -> bool:
        """`Image.fromarray(a).save(path)`, or `.save(path)` on a name bound to a PIL image
        made in the same scope (`img = Image.open(p)`)."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "save"):
            return False
        analysis = self.analysis
        values = [func.value]
        if isinstance(func.value, cst.Name):
            scope = analysis.scope_of(call)
            values = [
                b.value for b in analysis.facts.bindings
                if b.name == func.value.value and b.value is not None and analysis.scope_of(b.statement) is scope
            ]
        return bool(values) and all(
            isinstance(v, cst.Call) and (analysis.imports.qualify(v.func) or "").startswith(_PIL_MAKERS) for v in values
        )

    def _helper_write(self, fact, helpers: dict[str, int]):
        """A call of another file's helper that only writes a file (project/writers.py):
        the path is the argument it opens, or the call itself when the helper builds it."""
        spelling = dotted_name(fact.node.func)
        if spelling not in helpers:
            return None
        position = helpers[spelling]
        path = _argument(fact.node, position, "") if position >= 0 else None
        return fact.node, path if path is not None else fact.node, self._own_line(fact.node), f"{spelling}()"

    def _own_line(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        """The statement line that is nothing but `call`."""
        analysis = self.analysis
        expr = analysis.parent(call)
        line = analysis.parent(expr) if isinstance(expr, cst.Expr) else None
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            return line
        return None

    def _lifted(self, line: cst.BaseStatement) -> cst.BaseStatement:
        """An unpacking line together with the `with` blocks that only hold it (`with
        requests.get(url) as r: with tarfile.open(fileobj=r.raw) as t: t.extractall()`):
        the download is the main process's alone too."""
        analysis = self.analysis
        statement = line
        while True:
            block = analysis.parent(statement)
            owner = analysis.parent(block) if isinstance(block, cst.IndentedBlock) else None
            if not isinstance(owner, cst.With) or len(block.body) != 1 or self._collective_in(owner) is not None:  # type: ignore[union-attr]
                return statement
            statement = owner

    def _checkpoint_methods(self, savers: dict[str, str]) -> None:
        """`model.module.save('latest')` on a model object of the run whose method
        torch.saves (project/savers.py): named, left as written (the method may do more
        than write: move the network, keep state)."""
        if not savers:
            return
        for fact in self.analysis.facts.calls:
            call = fact.node
            where = savers.get(dotted_name(call.func) or "")
            if where is None or self._main_only(call):
                continue
            if self._own_line(call) is None:
                # its result is used (Bert-Multi-Label's `features = processor.create_features(...)`, a
                # data cache): every process needs it, so the main process goes first, not alone
                note = (
                    f" (left as written: it saves with {where}, and every process uses what it returns; run it "
                    "under `with accelerator.main_process_first():`, so the others read what the main process wrote)"
                )
                self.report(call, call=f"{dotted_name(call.func)}()", path="a file", consequence=_SAME_FILE, note=note)
                continue
            note = (
                f" (left as written: it saves with {where}; call it on the main process only, with "
                "`accelerator.wait_for_everyone()` before the call on every process, not inside the method)"
            )
            self.report(call, call=f"{dotted_name(call.func)}()", path="a checkpoint", consequence=_SAME_FILE, note=note)

    def _output_helpers(self, outputs: dict[str, str]) -> None:
        """`utils.debug_image(nets_ema, args, inputs, step)` of a file the run only reads,
        which runs the networks and saves sample grids (project/output_writers.py): named,
        left as written (the helper does more than write; only the caller knows whether
        the rest may run on the main process alone)."""
        if not outputs:
            return
        for fact in self.analysis.facts.calls:
            call = fact.node
            where = outputs.get(dotted_name(call.func) or "")
            if where is None or self._main_only(call):
                continue
            accelerator = self.analysis.accelerator_at(call) or "accelerator"
            unless = ", unless the other processes need what it changes" if "changes in place" in where else ""
            note = (
                f" (left as written: it writes with {where} among other work, in a file this run only reads; call it"
                f" on the main process only (`if {accelerator}.is_main_process:`){unless}; a prepared model it runs goes in"
                f" unwrapped (`{accelerator}.unwrap_model(...)`): run on one process alone, it would wait for the others)"
            )
            self.report(call, call=f"{dotted_name(call.func)}()", path="files", consequence=_SAME_FILE, note=note)

    def _main_only(self, call: cst.Call) -> bool:
        """Only the main process runs it, or a function no code of the run calls (its
        callers decide); a method of a class another file of the run builds runs on every
        process (`solver.train()` in main.py), and so does a function another file calls
        (an evaluation writing its results), unless it only writes: its callers gate those
        calls (project/writers.py)."""
        branches = self.analysis.branches
        branch = branches.branch_of(call)
        if branch is not None:
            return True  # main only is right; the others only is AM901's business
        function = branches.function_of(call)
        if function is None:
            return False
        config = self.ctx.config
        helper = id(function) not in self.analysis.facts.method_of and function.name.value in config.project_gated_writers
        elsewhere = not helper and run_by_other_files(self.analysis, call, config.run_callers, config.project_unpassed)
        return not branches.callers(function) and not elsewhere or branches.runs_only_on_main(call)

    def _consequence(self, path: cst.BaseExpression, call: cst.Call | None = None) -> str:
        """A path drawn at random on each process (`runs/<random.randint(...)>`) names a
        folder of its own per process: not one file written N times, but N copies of the
        run's records, each in a place of its own. A removal races otherwise."""
        draw = unseeded_draw(self.analysis, path)
        if draw is None:
            removes = call is not None and (self.analysis.imports.qualify(call.func) or "") in _REMOVERS
            return _REMOVED if removes else _SAME_FILE
        shown = f"{dotted_name(draw.func) or 'a random draw'}()"
        remedy = "draw it on the main process and share it" if unique_draw(draw, self.analysis) else (
            "seed the generator alike on every process, or draw it on the main process and share it"
        )
        return (
            f"its path comes from `{shown}`, a different draw on each process, so the processes "
            f"write N copies into N places (pick the path once: {remedy})"
        )

    def _why_not(self, call: cst.Call, path: cst.BaseExpression, statement: cst.CSTNode | None) -> tuple[str | None, bool]:
        """Why the write cannot be gated (None when it can), and whether the other
        processes must wait for it after the gate (an archive unpacked, a file read back)."""
        analysis = self.analysis
        if statement is None:
            if dotted_name(call.func) == "open" or (self.analysis.imports.qualify(call.func) or "") in _OPENERS:
                return "the file is opened outside a `with open(...)` block of its own", False
            return "the write is part of a larger statement", False
        if analysis.accelerator_at(statement) is None:
            return "the Accelerator cannot be reached here", False
        collective = self._collective_in(statement)
        if collective is not None:
            return f"it also runs `{collective}`, which every process must reach", False
        used = self._bound_and_used_later(statement)
        if used is not None:
            return f"`{used}`, set here, is used after it by every process", False
        unpacks = isinstance(call.func, cst.Attribute) and call.func.attr.value == "extractall" or (
            (analysis.imports.qualify(call.func) or "") == "shutil.unpack_archive"
        )
        if unpacks or self._read_back(path, statement):
            if barrier_anchor(analysis, call) is not statement:
                return "the files are read afterwards, and no place after it is reached by every process to wait for them", False
            return None, True
        return None, False

    def _collective_in(self, statement: cst.CSTNode) -> str | None:
        branches = self.analysis.branches
        inside = _ids(statement)
        for collective in branches.collectives:
            if id(collective.call) in inside:
                return collective.name
        for fact in self.analysis.facts.calls:
            if id(fact.node) in inside:
                reached = branches.collective_in_function(fact.node)
                if reached is not None:
                    return f"{cst.Module([]).code_for_node(fact.node.func)}() → {reached}"
        return None

    def _bound_and_used_later(self, statement: cst.CSTNode) -> str | None:
        """A name (or attribute, subscript) the statement sets that is read outside it."""
        analysis = self.analysis
        inside = _ids(statement)
        scope = analysis.scope_of(statement)
        for node in _walk(statement):
            if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
                target = node.target
                if not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
                    return cst.Module([]).code_for_node(target)
            if isinstance(node, (cst.Global, cst.Nonlocal)):
                return node.names[0].name.value
        bound = {b.name for b in analysis.facts.bindings if id(b.statement) in inside or id(b.target) in inside}
        if isinstance(statement, cst.With):
            for item in statement.items:
                if item.asname is not None and isinstance(item.asname.name, cst.Name):
                    bound.add(item.asname.name.value)
        loops = [a for a in _ancestors(analysis, statement) if isinstance(a, (cst.For, cst.While))]
        for load in analysis.facts.loads:
            if load.name not in bound or load.scope is not scope or id(load.node) in inside:
                continue
            if analysis.order(load.node) > analysis.order(statement):
                if not self._rebound_before(load, statement, inside):
                    return load.name
            elif any(loop in _ancestors(analysis, load.node) for loop in loops):
                return load.name  # read again on the loop's next turn
        return None

    def _rebound_before(self, load, statement: cst.CSTNode, inside: set[int]) -> bool:
        """`load` reads a binding made after `statement` that every path to it passes:
        a `for` target whose loop holds it, or an assignment in a block around it."""
        analysis = self.analysis
        around = {id(a) for a in _ancestors(analysis, load.node)}
        start, at = analysis.order(statement), analysis.order(load.node)
        for block in _ancestors(analysis, load.node):  # `with open(...) as f:` again (ConvLSTM's second history file)
            if isinstance(block, cst.With) and analysis.order(block) > start and any(
                item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == load.name
                for item in block.items
            ):
                return True
        for b in analysis.facts.bindings:
            if b.name != load.name or b.scope is not load.scope or id(b.statement) in inside:
                continue
            if not start < analysis.order(b.statement) < at:
                continue
            if isinstance(b.statement, (cst.For, cst.With)) and id(b.statement) in around:
                return True
            line = analysis.line_of(b.statement) if not isinstance(b.statement, cst.BaseCompoundStatement) else b.statement
            if line is not None and id(analysis.parent(line)) in around:
                return True
        return False
        return None

    def _read_back(self, path: cst.BaseExpression, statement: cst.CSTNode, same_function: bool = False) -> bool:
        """The same path (as written) passed to a call outside the statement, after it,
        that neither only shows it nor writes it again (with `same_function`, in the
        statement's own function: a helper's path text means nothing in another helper)."""
        analysis = self.analysis
        text = cst.Module([]).code_for_node(path).strip()
        # `args.prediction_file`: a call of the project's handed `args` itself may read it
        # (BiDAF's `evaluate.main(args)` opens `args.prediction_file`: reader R4, 29th session)
        holder = dotted_name(path.value) if isinstance(path, cst.Attribute) else None
        inside = _ids(statement)
        at = analysis.order(statement)
        scope = analysis.scope_of(statement) if same_function else None
        # the name bound anew after the write names another path from there on (CycleGAN's
        # visualizer: `img_path = f"epoch{n:03d}_{label}.png"`, a link in a web page)
        rebound = min((
            analysis.order(b.statement) for b in analysis.facts.bindings
            if isinstance(path, cst.Name) and b.name == text and analysis.order(b.statement) > at
            and b.scope is analysis.scope_of(statement)
        ), default=None)
        for fact in analysis.facts.calls:
            if id(fact.node) in inside or analysis.order(fact.node) < at or _only_shows(fact) or self._write(fact):
                continue  # shown, or written again: not read
            if rebound is not None and analysis.order(fact.node) > rebound:
                continue
            if scope is not None and fact.scope is not scope:
                continue
            handed = [cst.Module([]).code_for_node(a.value).strip() for a in fact.node.args]
            if text in handed or holder is not None and holder in handed and _of_the_project(analysis, fact):
                return True
        return False

    def _wrapper(self, accelerator: str):
        """Builds `if accelerator.is_main_process:` around a body; in it, the prepared
        model is called unwrapped (DDP's forward would wait for the other processes)."""
        models = {n for n in self.analysis.prepared if self.analysis.roles.of(n) is Role.MODEL}
        test = cst.parse_expression(f"{accelerator}.is_main_process")

        def build(body: cst.IndentedBlock) -> cst.If:
            unwrap = _Unwrap(models, accelerator, self._model_arguments)
            return cst.If(test=test, body=body.visit(unwrap) if models else body)

        return build


class _Unwrap(cst.CSTTransformer):
    """`model(x)` → `accelerator.unwrap_model(model)(x)` for the prepared models, and a
    prepared model handed to a writer that runs it (`torch.onnx.export(model, ...)`)."""

    def __init__(self, models: set[str], accelerator: str, model_arguments: set[int]) -> None:
        super().__init__()
        self.models = models
        self.accelerator = accelerator
        self.model_arguments = model_arguments

    def leave_Name(self, original: cst.Name, updated: cst.BaseExpression) -> cst.BaseExpression:
        if id(original) in self.model_arguments and original.value in self.models:
            return cst.parse_expression(f"{self.accelerator}.unwrap_model({original.value})")
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        name = dotted_name(original.func)
        if name in self.models:
            return updated.with_changes(func=cst.parse_expression(f"{self.accelerator}.unwrap_model({name})"))
        return updated


def _of_the_project(analysis, fact) -> bool:
    """A call of this file's functions or of a module of the project, not of a library."""
    if fact.qualified is None:
        return fact.func is not None and fact.func.split(".")[0] in analysis.facts.functions
    return fact.qualified.split(".")[0] not in LIBRARY_ROOTS


def _argument(call: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index].value if index < len(positional) else None


# calls that show a path without reading the file (`print("saved {}".format(path))`)
_SHOWS = {"print", "format", "str", "repr", "info", "debug", "warning", "write", "set_description", "set_postfix"}


def _only_shows(fact) -> bool:
    """The call shows the path or works on its text (`os.path.basename(filename)`): the
    file itself is not read."""
    func = fact.node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name in _SHOWS or (fact.qualified or "") in _PATH_TEXT


_PATH_TEXT = {"os.path.basename", "os.path.dirname", "os.path.join", "os.path.splitext", "os.path.split", "os.path.abspath"}


def _writes(mode: cst.BaseExpression | None) -> bool:
    """A literal mode that writes ("w", "wb", "a", "x", "r+")."""
    if not isinstance(mode, cst.SimpleString):
        return False
    value = mode.evaluated_value
    return isinstance(value, str) and any(c in value for c in "wax+")


def _only_writes(function: cst.FunctionDef) -> bool:
    """The function does nothing but write a file (project/writers.py's reading of it)."""
    import ast
    import textwrap

    from migrator.analysis.only_writes import only_writes

    try:
        node = ast.parse(textwrap.dedent(cst.Module([]).code_for_node(function))).body[0]
    except (SyntaxError, ValueError, IndexError):
        return False
    return isinstance(node, ast.FunctionDef) and only_writes(node) is not None


def _short(path: cst.BaseExpression) -> str:
    text = cst.Module([]).code_for_node(path).strip()
    return f"`{text}`" if len(text) <= 50 else "the file"


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _ancestors(analysis, node: cst.CSTNode):
    current = analysis.parent(node)
    while current is not None:
        yield current
        current = analysis.parent(current)


def _ids(node: cst.CSTNode) -> set[int]:
    return {id(n) for n in _walk(node)}
