"""AM510: checkpoints written with `torch.save` from every process, still wrapped."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.handed_models import handed_model
from migrator.analysis.saving import Save, barrier_anchor, optimizers_in, paired_loads, saves
from migrator.analysis.walk import descendants
from migrator.analysis.roles import module_classes
from migrator.analysis.reach import CALLERS_STUB, DRIVEN_LATER, NO_ACCELERATOR_YET, ONE_PROCESS, run_by_other_files
from migrator.edits import Edit, Fix, insert_after, insert_before, replace
from migrator.rule import Example, FixAvailability, Rule


_ELSEWHERE = f" ({NO_ACCELERATOR_YET}: "
_COPIES = ("shutil.copy", "shutil.copyfile", "shutil.copy2", "shutil.move", "os.rename", "os.replace")


class TorchSaveCheckpoint(Rule):
    """## What it does
    Rewrites `torch.save(obj, path)` to `accelerator.save(obj, path)` (which writes from
    the main process only), unwraps the models it saves
    (`model.state_dict()` → `accelerator.unwrap_model(model).state_dict()`,
    `torch.save(model, f)` → `accelerator.save(accelerator.unwrap_model(model), f)`; in a
    saved dict, a model pickled whole is unwrapped too and a prepared optimizer pickled
    whole becomes the user's own, `optimizer.optimizer`), and
    puts `accelerator.wait_for_everyone()` before it, so every process has finished the
    step being saved, and before each later `torch.load` of the same path, so no process
    reads the file before the main process has written it; such a load of a model saved
    whole (`model = torch.load(f)`) gets `map_location=accelerator.device`, since the pickle
    holds the main process's device. A path that differs on every
    process (built from the rank, or inside a `TemporaryDirectory()` each process makes)
    is left alone: each process writes and reads its own file.

    ## Why is this bad?
    On N processes every process writes the same file at once (a corrupt checkpoint on
    a shared file system), and the prepared model is wrapped in DistributedDataParallel
    there, so its state dict's keys start with `module.`: the checkpoint does not load
    into the plain model.

    ## Where the barrier goes
    `wait_for_everyone()` must be reached by every process. It goes right before the
    statement with the save, lifted out of any `if` around it that may differ between
    processes (`if rank == 0:`, `if is_best:`): a condition that is true on one process
    only would leave the others waiting forever. An `if` in a loop whose test every
    process evaluates alike (`if (step + 1) % args.save_every == 0:`: a loop index, a
    counter, a setting) keeps the barrier inside, so the loop waits only at the steps that
    save, not at every step. In a function called under an `if`
    (`if gpu_id == 0: self._save_checkpoint(epoch)`) it goes before that call, lifted the
    same way. No barrier is written where only the main process runs (a function called
    only under `if accelerator.is_main_process:`, code after
    `if not accelerator.is_main_process: return`), or where a function saving under an
    `if` has several callers.

    ## Example
    ```python
    if args.local_rank in (-1, 0):
        torch.save(model.state_dict(), "model.pt")
    ```

    Use instead:
    ```python
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        accelerator.save(accelerator.unwrap_model(model).state_dict(), "model.pt")
    ```

    ## Known limits
    A save that cannot reach the Accelerator is reported, not changed. Objects other
    than models are saved as they are (optimizer and scheduler state dicts need no
    unwrapping).

    In a file that gets no Accelerator but whose code other files of the run call on every
    process (a base class's `save_network`, a checkpoint method of a class the launched
    script drives), the save is reported and left as written; a helper that only writes, which
    only files of the run call, is named at those calls instead (AM517 gates or names them).
    So is a save in a launched script that drives a model object of the run (its loop calls
    `trainer.train_step(...)`): the script gets its Accelerator with that object.
    A save into an in-memory buffer (`io.BytesIO()`) is each process's own and left alone.
    """

    code = "AM510"
    name = "torch-save-checkpoint"
    message = (
        "`torch.save` {audience}{wrapped}; save once with accelerator.save after wait_for_everyone() "
        "(and wait again before another process loads the file){note}"
    )
    fix_title = "Use accelerator.save, unwrap the model, wait for everyone first"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\n"
                "torch.save(model.state_dict(), \"model.pt\")\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\nmodel = accelerator.prepare(model)\n"
                "accelerator.wait_for_everyone()\n"
                "accelerator.save(accelerator.unwrap_model(model).state_dict(), \"model.pt\")\n"
            ),
            at=("7:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if not analysis.migrating and self.ctx.config.run_callers:
            self._in_code_run_elsewhere()
            return
        if not analysis.migrating and self.ctx.config.project_drives and not analysis.accelerator_names:
            self._in_a_driving_script()
            return
        if analysis.patterns is None or not analysis.migrating:
            return
        found = []
        for save in saves(analysis):
            accelerator = analysis.accelerator_at(save.call)
            if accelerator is None:
                self.report(
                    save.call, wrapped=_wrapped(save), audience=self._audience(save),
                    note=" (left as written: the Accelerator cannot be reached from here)" + self._clock(save) + self._unwrap_hint(save),
                )
            else:
                found.append((save, accelerator))
        anchors = {id(s.anchor) for s, _ in found if s.anchor is not None}
        groups: dict[int, list[tuple[Save, str]]] = {}
        for save, accelerator in found:
            key = id(self._first_of_run(save.anchor, anchors)) if save.anchor is not None else id(save)
            groups.setdefault(key, []).append((save, accelerator))
        for group in groups.values():
            edits = [e for save, accelerator in group for e in self._edits(save, accelerator)]
            accelerator = group[0][1]
            anchor = self._first_of_run(group[0][0].anchor, anchors) if group[0][0].anchor is not None else None
            if anchor is not None:
                accelerator = self._reach(anchor, group[0][0].call, accelerator)
            if anchor is not None and accelerator is not None:
                if not self._waits_before(anchor, accelerator):
                    edits.append(insert_before(anchor, cst.parse_statement(f"{accelerator}.wait_for_everyone()\n")))
                if self._for_callers_elsewhere(anchor) and not self._waits_after(anchor, accelerator):
                    edits.append(insert_after(anchor, cst.parse_statement(f"{accelerator}.wait_for_everyone()\n")))
            edits += self._barriers_before_loads(group, {id(anchor)} if anchor is not None else set())
            fix = Fix(tuple(edits))
            for save, _ in group:
                self.report(save.call, edits=fix, wrapped=_wrapped(save), audience=self._audience(save), note=self._clock(save) + self._unwrap_hint(save))

    def _in_code_run_elsewhere(self) -> None:
        """A file given no Accelerator whose code other files of the run call on every
        process (pix2pixHD's `BaseModel.save_network`, a `save_checkpoint` of a trainer's
        base class): each process writes the file. Named, left as written."""
        analysis = self.analysis
        branches = analysis.branches
        gated = set(self.ctx.config.project_gated_writers)  # their callers' AM517 gates or names each call
        for save in saves(analysis):
            call = save.call
            if branches.branch_of(call) is not None or branches.runs_only_on_main(call):
                continue
            function = branches.function_of(call)
            if function is not None and function.name.value in gated and id(function) not in analysis.facts.method_of:
                continue
            if run_by_other_files(analysis, call, self.ctx.config.run_callers, self.ctx.config.project_unpassed):
                self.report(call, wrapped="", audience="writes from every process", note=self._elsewhere_note(save))

    def _in_a_driving_script(self) -> None:
        """A launched script that drives a model object of the run (LightGCN's main.py,
        `Procedure.BPR_train_original(...)` each epoch, then `torch.save(Recmodel.state_dict(),
        weight_file)`): every process writes the file. Named, left as written: the script
        gets its Accelerator with that object."""
        branches = self.analysis.branches
        for save in saves(self.analysis):
            call = save.call
            if branches.branch_of(call) is not None or branches.runs_only_on_main(call):
                continue
            function = branches.function_of(call)
            if function is not None and not branches.callers(function):
                continue
            note = (
                f" (left as written: {DRIVEN_LATER}; save on the main process then{self._unwrap_hint(save, any_model=True)})"
            )
            self.report(call, wrapped="", audience="writes from every process", note=note)

    def _elsewhere_note(self, save: Save) -> str:
        """What to do where no Accelerator exists: a file read back in the same function
        is a cache (MUNIT's `load_vgg16`, JointBERT's cached features), which one process
        builds while the others wait; a copy after the save (`shutil.copyfile(path, best)`)
        must move with it; a model handed in (`model.state_dict()` of a parameter) is saved
        unwrapped, so its keys load into a plain model."""
        analysis = self.analysis
        call = save.call
        function = analysis.branches.function_of(call)
        path = cst.Module([]).code_for_node(call.args[1].value).strip() if len(call.args) > 1 else None
        same_function = [c for c in analysis.facts.calls if analysis.branches.function_of(c.node) is function]
        if path is not None and any(
            c.qualified == "torch.load" and c.node.args and cst.Module([]).code_for_node(c.node.args[0].value).strip() == path
            for c in same_function
        ):
            return (
                f"{_ELSEWHERE}the file is read back here, a cache: let one process {ONE_PROCESS} build and save it "
                "while the others wait, then every process loads it)"
            )
        copies = any(
            (c.qualified or "") in _COPIES and analysis.order(c.node) > analysis.order(call) for c in same_function
        )
        where = ": gate the call, or this whole function with what it copies after the save" if copies else ", at the call or here"
        saved = cst.Module([]).code_for_node(call.args[0].value) if call.args else ""
        handed = self._handed_model(call, function)
        unwrap = (
            ", and save the unwrapped model (`model.module` of a prepared one): its keys then load into a plain model"
            if handed and not any(w in saved for w in ("module", "unwrap", "without_ddp")) else ""
        )
        return f"{_ELSEWHERE}save on one process only{where} {ONE_PROCESS}{unwrap})"

    def _handed_model(self, call: cst.Call, function: cst.FunctionDef | None) -> bool:
        """The save takes `x.state_dict()` of a parameter of its function or of an attribute
        of `self` (a model a caller hands in), not of a model made here."""
        if function is None or not call.args:
            return False
        params = {p.name.value for p in function.params.params} | {"self"}
        if self._in_a_model(function):
            params.discard("self")
        for node in descendants(call.args[0].value):
            func = node.func if isinstance(node, cst.Call) else None
            if isinstance(func, cst.Attribute) and func.attr.value == "state_dict":
                root = func.value
                while isinstance(root, (cst.Attribute, cst.Call)):  # `network.cpu().state_dict()`
                    root = root.value if isinstance(root, cst.Attribute) else root.func
                if isinstance(root, cst.Name) and root.value in params:
                    return True  # a parameter, or what the object keeps (a base trainer's `self.model`)
        return False

    def _in_a_model(self, function: cst.FunctionDef) -> bool:
        """A method of one of this file's nn.Module classes: `self.backbone` is a layer of
        the model itself, never wrapped (DDP calls into the model it wraps)."""
        facts = self.analysis.facts
        cls = facts.method_of.get(id(function))
        return cls is not None and cls.name.value in module_classes(facts)

    def _audience(self, save: Save) -> str:
        """Under a main-process guard the save already runs once: what is left is the wrap."""
        if self.analysis.branches.runs_only_on_main(save.call):
            return "writes under a main-process guard"
        return "writes from every process"

    def _edits(self, save: Save, accelerator: str) -> list[Edit]:
        """Small edits, so that the rewrites of other rules around them still apply in
        the same pass: the callee, and each saved model. A file opened by
        `with open(path, "wb") as f:` is opened on the main process only: every process
        opening it would truncate what the main process writes."""
        edits: list[Edit] = [replace(save.call.func, cst.parse_expression(f"{accelerator}.save"))]
        for model in save.models:
            code = cst.Module([]).code_for_node(model).strip()
            reach = self.analysis.accelerator_at(model) or accelerator
            edits.append(replace(model, cst.parse_expression(f"{reach}.unwrap_model({code})")))
        for argument in save.call.args[:1]:
            for optimizer in optimizers_in(self.analysis, argument.value):
                code = cst.Module([]).code_for_node(optimizer).strip()
                edits.append(replace(optimizer, cst.parse_expression(f"{code}.optimizer")))
        opened = save.opened
        if opened is None or self._main_only(opened):
            return edits
        table = {id(e.node): e.replacement for e in edits}
        inner = opened.visit(_Swap(table)).with_changes(leading_lines=[])
        test = cst.parse_expression(f"{accelerator}.is_main_process")
        guarded = cst.If(test=test, body=cst.IndentedBlock([inner]), leading_lines=opened.leading_lines)
        return [replace(opened, guarded)]

    def _unwrap_hint(self, save: Save, any_model: bool = False) -> str:
        """A `state_dict()` saved of a model kept in a dict, which the migration does not
        follow (monodepth2's `to_save = model.state_dict()` over `self.models.items()`):
        once the model is prepared by hand, the keys gain DDP's `module.` prefix and load
        into no plain model (reader R2). `any_model`: any name's `state_dict()` (a launched
        script driving a model object: LightGCN's `Recmodel.state_dict()`, reader R1)."""
        if save.models and not any_model or not save.call.args:
            return ""
        whole = [dotted_name(m) for m in save.models if not _of_state_dict(m, self.analysis)]
        handed = handed_model(self.analysis, self.ctx.config) if any_model else None
        if handed is not None and any(
            isinstance(n, cst.Name) and n.value == handed.binding.name and not _of_state_dict(n, self.analysis)
            and not isinstance(self.analysis.parent(n), cst.Attribute)
            for n in descendants(save.call.args[0].value)
        ):
            whole.append(handed.binding.name)  # the model object it hands on (pytorch-a2c's `[actor_critic, obs_rms]`)
        if whole:
            name = whole[0]
            return (
                f"; once `{name}` is a prepared model, save `accelerator.unwrap_model({name})`: pickled whole, the"
                " wrapper is a DDP object, without the model's own methods and unloadable without a process group"
            )
        scope = self.analysis.scope_of(save.call)
        values = [save.call.args[0].value]
        names = {n.value for n in descendants(values[0]) if isinstance(n, cst.Name)}
        values += [b.value for b in self.analysis.facts.bindings if b.name in names and b.value is not None and b.scope is scope]
        held = self._models_of_a_dict(scope)
        for value in values:
            for node in descendants(value):
                func = node.func if isinstance(node, cst.Call) else None
                if isinstance(func, cst.Attribute) and func.attr.value == "state_dict":
                    owner = (dotted_name(func.value) or "").lower()
                    kept = isinstance(func.value, cst.Name) and (any_model or func.value.value in held)
                    if kept and not any(word in owner for word in ("optim", "sched", "scaler", "module")):
                        return (
                            f"; once `{dotted_name(func.value)}` is a prepared model, save "
                            f"`accelerator.unwrap_model({dotted_name(func.value)}).state_dict()`: the wrapper's keys carry DDP's "
                            "`module.` prefix and load into no plain model"
                        )
        return ""

    def _models_of_a_dict(self, scope: cst.CSTNode) -> set[str]:
        """Names a loop of `scope` binds to the values of a dict (`for name, model in
        self.models.items():`): models kept where the migration does not follow them."""
        out: set[str] = set()
        for loop in self.analysis.nodes_under(scope, "For"):
            it = loop.iter
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("items", "values"):
                target = loop.target
                last = target.elements[-1].value if isinstance(target, cst.Tuple) and target.elements else target
                if isinstance(last, cst.Name):
                    out.add(last.value)
        return out

    def _clock(self, save: Save) -> str:
        """A note when the saved path is built from the clock (`time.strftime(...)`): each
        process reads it at its own moment, so the name the main process writes is not
        the one another process would read back."""
        if len(save.call.args) < 2:
            return ""
        scope = self.analysis.scope_of(save.call)
        values, names = [save.call.args[1].value], set()
        for _ in range(3):  # through the names the path is built from: `save_path = "..." % timestr`
            names |= {n.value for v in values for n in descendants(v) if isinstance(n, cst.Name)}
            values += [
                b.value for b in self.analysis.facts.bindings
                if b.name in names and b.value is not None and b.value not in values
                and self.analysis.scope_of(b.statement) is scope
            ]
        reads_clock = any(
            (self.analysis.imports.qualify(c.func) or "") in _CLOCKS
            for v in values for c in descendants(v) if isinstance(c, cst.Call)
        )
        if not reads_clock:
            return ""
        return (
            "; its path is built from the clock, which each process reads at its own moment: "
            "a process reading the file back looks for a name nobody wrote (name it on the main "
            "process and share it, or leave the time out)"
        )

    def _for_callers_elsewhere(self, anchor: cst.CSTNode) -> bool:
        """A helper of a run whose callers live in other files (the callers' stub stands
        for them): they may read the file back as soon as it returns, so every process
        waits for the main one's write before leaving it."""
        analysis = self.analysis
        scope = analysis.scope_of(anchor)
        stub = any(isinstance(s, cst.FunctionDef) and s.name.value == CALLERS_STUB for s in analysis.module.body)
        return stub and isinstance(scope, cst.FunctionDef) and scope.name.value != CALLERS_STUB

    def _waits_after(self, anchor: cst.CSTNode, accelerator: str) -> bool:
        parent = self.analysis.parent(anchor)
        body = list(parent.body) if isinstance(parent, (cst.IndentedBlock, cst.Module)) else []
        following = body[body.index(anchor) + 1] if anchor in body and body.index(anchor) + 1 < len(body) else None
        code = cst.Module([]).code_for_node(following).strip() if following is not None else ""
        return code == f"{accelerator}.wait_for_everyone()"

    def _main_only(self, node: cst.CSTNode) -> bool:
        branches = self.analysis.branches
        branch = branches.branch_of(node)
        return branch.audience.name == "MAIN" if branch is not None else branches.runs_only_on_main(node)

    def _reach(self, anchor: cst.CSTNode, save: cst.Call, accelerator: str) -> str | None:
        """The Accelerator as code at `anchor` sees it: the save's own in its function; in
        a caller the barrier was lifted to, what reaches there (None: no barrier)."""
        analysis = self.analysis
        if analysis.scope_of(anchor) is analysis.scope_of(save):
            return analysis.accelerator_at(anchor) or accelerator
        return analysis.accelerator_at(anchor)

    def _barriers_before_loads(self, group: list[tuple[Save, str]], taken: set[int]) -> list[Edit]:
        """`wait_for_everyone()` before each `torch.load` of a file this group now writes on
        the main process only: the other processes would read it missing or half-written."""
        edits: list[Edit] = []
        for save, _ in group:
            for load in paired_loads(self.analysis, save.call):
                accelerator = self.analysis.accelerator_at(load)
                anchor = barrier_anchor(self.analysis, load)
                if accelerator is None or anchor is None or id(anchor) in taken:
                    continue
                taken.add(id(anchor))
                if not self._waits_before(anchor, accelerator):
                    edits.append(insert_before(anchor, cst.parse_statement(f"{accelerator}.wait_for_everyone()\n")))
                if _whole_model(save) and not any(a.keyword and a.keyword.value == "map_location" for a in load.args):
                    edits.append(_mapped_to(load, accelerator))
        return edits

    def _first_of_run(self, anchor: cst.CSTNode, anchors: set[int]) -> cst.CSTNode:
        """Saves one after another share one barrier, before the first of them."""
        body = list(getattr(self.analysis.parent(anchor), "body", ()))
        index = next((i for i, s in enumerate(body) if s is anchor), 0)
        while index > 0 and id(body[index - 1]) in anchors:
            index -= 1
        return body[index] if body else anchor

    def _waits_before(self, anchor: cst.CSTNode, accelerator: str) -> bool:
        """`accelerator.wait_for_everyone()` is already the statement right above."""
        block = self.analysis.parent(anchor)
        body = list(getattr(block, "body", ()))
        index = next((i for i, s in enumerate(body) if s is anchor), 0)
        if index == 0:
            return False
        previous = cst.Module([]).code_for_node(body[index - 1]).strip()
        return previous == f"{accelerator}.wait_for_everyone()"



_CLOCKS = {"time.strftime", "time.time", "time.ctime", "datetime.datetime.now", "datetime.now", "datetime.datetime.today"}


def _whole_model(save: Save) -> bool:
    """`torch.save(model, f)`: the module pickled whole, its tensors on the main process's device."""
    return bool(save.models) and bool(save.call.args) and save.models[0] is save.call.args[0].value


def _mapped_to(load: cst.Call, accelerator: str) -> Edit:
    """A whole model written by the main process loads onto that process's device (`cuda:0`)
    everywhere unless mapped: on the other processes its inputs are on their own device."""
    args = list(load.args)
    if args and args[-1].comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    mapped = cst.Arg(cst.parse_expression(f"{accelerator}.device"), keyword=cst.Name("map_location"),
                     equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    return replace(load, load.with_changes(args=[*args, mapped]))


def _wrapped(save: Save) -> str:
    return " with the wrapped model" if save.models else ""


class _Swap(cst.CSTTransformer):
    """Replaces nodes by identity (id of the original node → its replacement)."""

    def __init__(self, table: dict) -> None:
        super().__init__()
        self._table = table

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self._table.get(id(original_node), updated_node)


def _of_state_dict(model: cst.BaseExpression, analysis) -> bool:
    """`model` is read for its `state_dict()`, not saved as the object itself."""
    parent = analysis.parent(model)
    return isinstance(parent, cst.Attribute) and parent.attr.value == "state_dict"
