"""AM914: the model, optimizer or loader is handed to a training function of another module."""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis import Role, dotted_name
from migrator.analysis.names import LIBRARY_ROOTS
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

# Roots of imports that are libraries, not the project's own modules.
_LIBRARIES = LIBRARY_ROOTS | {"evaluate"}  # Hugging Face's evaluate: told apart by its API below
# Library names a project's own module often takes (`evaluate.py` beside train.py): what
# the library exports, so `from evaluate import evaluate` is known for the project's.
_LIBRARY_API = {"evaluate": frozenset({"load", "combine", "evaluator", "list_evaluation_modules", "save", "push_to_hub"})}
# a word of the name that starts so (`train_one_epoch`, `runEpoch`, `Trainer`, `validate`),
# not a piece of another word (`load_pretrained_state_dict`, `prune`) nor a loaded result (`trained`)
_TRAINING_WORDS = re.compile(
    r"(?:^|_|(?<=[a-z0-9])(?=[A-Z]))(?i:(?:pre|re)?train(?!ed)|eval|fit|test|valid|epoch|step|loop|run|infer|predict"
    r"|engine|solver|learner)",
)
_EVALUATION_WORDS = re.compile(r"(?:^|_|(?<=[a-z0-9])(?=[A-Z]))(?i:eval|valid|val(?=_|$)|test|infer|predict)")
_ADVICE = (
    "its {parts} need the Accelerator too; migrate `{module}` as well "
    "(its own findings say what it needs)"
)
_PASSED = "the Accelerator is passed in, and `{module}` is migrated with it in this run"
_UNREACHED = (
    "no Accelerator reaches this call, so it cannot be passed in; `{module}` is left as written "
    "(its own findings say what it needs)"
)
_LEFT_ALONE = (
    "`{module}` is part of this project, but this function is left without the Accelerator (a caller the "
    "run does not change, or a migration that would not be whole: its own findings say what it needs)"
)
# A function of the run the decision could not thread (project/decide.py): the advice to
# migrate its module as well would be wrong, it is in the run already.
_NOT_TOGETHER = (
    "`{module}` is part of this project, but the two could not be migrated together (whole or not "
    "at all: a caller with no Accelerator to pass, or a migration of either that would not be whole; "
    "their other findings say which), so `{call}` gets no Accelerator: its {parts} still need it"
)
_INHERITS = (
    "`{module}` is part of this project, but `{call}` is built on `{base}` of {file}, whose methods "
    "(an epoch loop, checkpoints, logging) the migration of `{module}` cannot see; it is left without "
    "the Accelerator, and its training needs it: migrate the two classes by hand: create the Accelerator "
    "here, {prepare} (a scheduler too only if it steps per batch and its length does not come from `len(loader)`: "
    "one sized from the prepared loader already counts this process's batches; an evaluation loader only where its "
    "results are gathered), and pass the Accelerator to the base class"
)
# what the hand migration prepares where: the optimizer where it is built
_PREPARE_HERE = "prepare the model together with its optimizer and the training loader"
_PREPARE_IN_BASE = (
    "prepare the training loader here and the model together with its optimizer where the classes build the "
    "optimizer, in place of any DataParallel wrap there"
)
# A class picked from a table of the project's classes (`Trainer = train_factory[opt.task]`)
_FROM_TABLE = (
    "`{call}` is one of the classes of a table in `{module}`, part of this project, which the migration does not "
    "follow; whichever it is gets no Accelerator, and its {parts} need it (the findings of its class's file say what)"
)
# An evaluation on loaders left whole computes on all the data: nothing of it is missing.
_LEFT_WHOLE = (
    "`{module}` is part of this project, but this function is left without the Accelerator (a caller the "
    "run does not change, outputs it hands back whole for this file to take apart, or a migration "
    "that would not be whole)"
)
_READS_WHOLE = "; it reads {loaders} unprepared (left out of prepare()), so it sees all the data on every process"
# A threaded evaluation whose callers keep its loaders whole (migrator/project/decide.py).
_KEPT_WHOLE = (
    "it gets the Accelerator, but reads {loaders} unprepared (kept whole at every call: its callers "
    "do not prepare all of its loaders), so every process evaluates all the data: the same figures "
    "on every process, N times the work; prepare the loader at every call to share it"
)
_SHARE = (
    "; it reads {loaders} prepared, so only this process's share of it, and what it computes "
    "from it stands for the whole data: gather it there by hand, or keep this loader out of prepare()"
)
# ... and for a method of a helper object of the project handed a prepared loader
_HELPER_SHARE = (
    "`{cls}` is part of this project and gets no Accelerator; it reads {loaders} prepared, so only this process's "
    "share of it, and what it computes from it (features, a fitted metric, a statistic) stands for the whole data: "
    "hand it the loader as it was before prepare(), or gather what it computes by hand"
)
# ... and for what its evaluation methods read beside it
_SHARE_EVALUATED = (
    "; its evaluation reads {loaders} prepared, so only this process's share, and the figures it computes "
    "from it stand for the whole data: gather them there by hand, or keep this loader out of prepare()"
)
# ... and for a method of one that is handed the optimizer too: it trains
_HELPER_TRAINS = (
    "`{cls}` is part of this project and gets no Accelerator; its backward, metrics and prints need it (the "
    "findings of its code say what)"
)
# ... and for one that trains on it: the share is right, only its figures are partial
_SHARE_TRAINING = (
    "; it reads {loaders} prepared: this process's share, as training on N processes should; the losses "
    "and accuracies it counts or prints cover that share only: print them on the main process, and reduce "
    "them across processes where they must stand for the whole data"
)
_TWIN = (
    "; it is handed {loaders} as it was before prepare() ({twins}), so it sees all the data "
    "on every process while the rest of the run reads its share"
)
_ROLES = {Role.MODEL: "model", Role.OPTIMIZER: "optimizer", Role.DATALOADER: "loader", Role.SCHEDULER: "scheduler"}


class TrainingInAnotherModule(Rule):
    """## What it does
    Reports a call that hands the model, optimizer, loader or scheduler to a training or
    evaluation function imported from another module of the project
    (`engine.train_fn(loader, model, optimizer, device, scheduler)`), once per function.
    Nothing is changed.

    ## Why is this bad?
    The migration of this file prepares the objects, but the `loss.backward()`, the
    clipping, the metrics and the prints live in the other module. Left alone, that module
    trains without the Accelerator's backward (no loss scaling, no accumulation) and
    computes metrics on this process's share of the data as if they were global.

    ## Example
    ```python
    import engine

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    engine.train_fn(loader, model, optimizer, device)
    ```

    Use instead: migrate the other module too and pass the Accelerator in (its own
    findings, AM913, name each function that needs it):
    ```python
    engine.train_fn(loader, model, optimizer, device, accelerator=accelerator)
    ```

    ## In a run of several files
    When `engine.py` is migrated in the same run (`accel-migrate train.py engine.py`,
    or the folder), its training and evaluation functions get a keyword-only
    `accelerator` parameter, and this rule passes `accelerator=accelerator` at each call
    (the second example). Whole or nothing: if any call of such a function in the run has
    no Accelerator to pass, the function is used as a value, or the engine's migration
    does not take the parameter, both files are left as they are alone, with this
    finding and AM913's (migrator/project/).

    A function of the run that cannot take the parameter (a caller outside the run,
    in a file of the checkout the run leaves alone) keeps this finding, saying so; a loader
    that only such functions read is left out of prepare(), so they compute on all of the
    data on every process (the same numbers as on one) rather than on a share. An
    evaluation whose callers would hand it a prepared loader at one call and one never
    prepared at another (`Test(model, val_loader)` beside `Test(model, test_loader)`) gets
    the Accelerator with its loaders kept whole at every call, and this finding says so.

    A class built on a class of another file of the project (`class Trainer(BaseTrainer)`,
    the base holding the epoch loop and the checkpoints) gets no Accelerator: the migration
    of its file cannot see what it inherits. The finding names the base and its file. A
    function of the run that the run could not migrate together with this file is named
    as part of the project (never "migrate it as well", it is migrated already).

    A class the file picks from a table of the project's classes (`Trainer =
    train_factory[opt.task]`, then `Trainer(opt, model, optimizer)`) is named the same way,
    as a class of the table's module, with what its methods read: a training method its
    share, an evaluation method (`trainer.val(epoch, val_loader)`) a share it would take
    for the whole data.

    ## Known limits
    A module counts as the project's own when its import root is not a known library;
    only functions whose names say they train or evaluate are reported. An evaluation
    handed no optimizer that builds its loaders with a DistributedSampler itself and
    gathers what it computes across the processes (`dist.all_gather`, a helper's
    `all_gather`: lufficc/SSD's `do_evaluation`) is not reported: it is distributed
    already, on the default process group the Accelerator makes.
    """

    code = "AM914"
    name = "training-in-another-module"
    message = "`{call}` from module `{module}` receives the {what}: {advice}"
    fix_title = "Pass the Accelerator in (`accelerator=accelerator`), migrating the other module in the same run"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nimport engine\n\nmodel = torch.nn.Linear(2, 2)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "engine.train_fn(model, optimizer)\n"
            ),
            at=("6:1",),
        ),
        Example(
            before=(
                "import torch\nimport engine\n\n\ndef main():\n"
                "    model = torch.nn.Linear(2, 2)\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    engine.train_fn(model, optimizer)\n"
            ),
            after=(
                "import torch\nimport engine\nfrom runtime import Accelerator\n\n\ndef main():\n"
                "    accelerator = Accelerator()\n"
                "    model = torch.nn.Linear(2, 2)\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "    model, optimizer = accelerator.prepare(model, optimizer)\n"
                "    engine.train_fn(model, optimizer, accelerator=accelerator)\n"
            ),
            at=("8:5",),
            project_calls=("engine.train_fn",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        if self.ctx.config.project_calls:
            self._pass_accelerator(set(self.ctx.config.project_calls))
        unthreaded = dict(self.ctx.config.project_unthreaded)
        if unthreaded:
            self._left_alone(unthreaded)
        analysis = self.analysis
        seen: set[str] = set(self.ctx.config.project_calls) | set(self.ctx.config.project_plain) | set(unthreaded)
        seen |= set(self.ctx.config.project_enters)  # a class of the run that creates the Accelerator itself
        inherits = {spelling: (base, file) for spelling, base, file in self.ctx.config.project_inherits}
        members = set(self.ctx.config.project_members)  # functions of the run's other files
        for c in analysis.facts.calls:
            qualified = c.qualified or _from_a_table(analysis, c.node) or ""
            module, _, function = qualified.rpartition(".")
            root = module.split(".")[0]
            library = root in _LIBRARIES and (root not in _LIBRARY_API or function in _LIBRARY_API[root])
            if not module or library or not _TRAINING_WORDS.search(function):
                continue
            if c.func in analysis.facts.functions or qualified in seen or c.func in seen:
                continue
            if any(a.keyword is not None and a.keyword.value == "accelerator" for a in c.node.args):
                continue  # passed in already (a migrated caller)
            what = _given(analysis, c.node)
            if not what or self._evaluates_whole(c.func, what):
                continue
            seen.add(qualified)
            shared = _shared_through_methods(analysis, c.node)
            # an evaluation handed only loaders left out of prepare() evaluates all of the data on
            # every process (for a training function that would be the defect, not a reassurance)
            evaluation = "optimizer" not in what and _EVALUATION_WORDS.search((c.func or function).rpartition(".")[2])
            whole = "" if shared or not evaluation or _loaders(analysis, c.node, prepared=True) else _whole_loaders(analysis, c.node)
            # one that builds its loaders with a DistributedSampler itself reads its share
            own_share = c.func in self.ctx.config.project_sharding_readers
            advice = self._advice(
                c.func, module, what, inherits, members, through_methods=bool(shared), reads_whole=bool(whole), own_share=own_share,
                from_table=c.qualified is None,
            )
            if shared:
                advice += self._shares(c, function, what, shared)
            advice += whole
            self.report(c.node, call=c.func or function, module=module, what=what, advice=advice)
        self._helpers_handed_a_share(seen)

    def _helpers_handed_a_share(self, seen: set[str]) -> None:
        """open-reid's `metric = DistanceMetric(algorithm=...)`, built with nothing of the
        set-up, then `metric.train(model, train_loader)`: a method of an object of the
        project handed a prepared loader, which fits or computes on this process's share
        as if it were the whole data (a learned distance metric fitted on 1/N of it)."""
        analysis = self.analysis
        for c in analysis.facts.calls:
            qualified = c.qualified or ""
            module, _, cls = qualified.rpartition(".")
            root = module.split(".")[0]
            if not module or root in _LIBRARIES or not cls[:1].isupper() or qualified in seen or _given(analysis, c.node):
                continue
            # the last call of each method: an earlier one may come before prepare() (open-reid's `--evaluate` path)
            last = {dotted_name(m.func): m for m in sorted(_method_calls(analysis, c.node), key=analysis.order)}
            for method in last.values():
                shared = _loaders(analysis, method, prepared=True)
                if not shared or (dotted_name(method.func) or "") in seen:
                    continue
                spelling = dotted_name(method.func) or cls
                seen.add(spelling)
                what = _given(analysis, method) or "loader"
                if "optimizer" in what:  # a method that trains: on its share, as it should, but without the Accelerator
                    advice = _HELPER_TRAINS.format(cls=cls) + _SHARE_TRAINING.format(loaders=", ".join(shared))
                else:
                    advice = _HELPER_SHARE.format(cls=cls, loaders=", ".join(shared))
                self.report(method, call=spelling, module=module, what=what, advice=advice)

    def _shares(self, c, function: str, what: str, shared: list[str]) -> str:
        """What reading the prepared loaders means for the object a call builds: by the
        call, or, for a trainer object handed the optimizer whose evaluation methods read
        some of them (CenterNet's `trainer.val(epoch, val_loader)`), by method."""
        evaluated = list(dict.fromkeys(
            name for method in _method_calls(self.analysis, c.node)
            if _EVALUATION_WORDS.search((dotted_name(method.func) or "").rpartition(".")[2])
            for name in _loaders(self.analysis, method, prepared=True)
        ))
        trained = [name for name in shared if name not in evaluated]
        if "optimizer" not in what or not evaluated or not trained:
            return self._share(c.func or function, what).format(loaders=", ".join(shared))
        return _SHARE_TRAINING.format(loaders=", ".join(trained)) + _SHARE_EVALUATED.format(loaders=", ".join(evaluated))

    def _evaluates_whole(self, call: str, what: str) -> bool:
        """An evaluation handed no optimizer that shards its own loaders and gathers what it
        computes across the processes (lufficc/SSD's `do_evaluation`, reader R1): already
        distributed, served by the default process group the Accelerator makes."""
        return "optimizer" not in what and call in self.ctx.config.project_gathering_readers

    def _evaluates(self, call: str, what: str) -> bool:
        """Named for an evaluation and handed no optimizer (here, or by what its body does
        with its parameters)."""
        by_use = {role for spelling, keys in self.ctx.config.project_roles if spelling == call for _, role in keys}
        return bool("optimizer" not in what and "optimizer" not in by_use and _EVALUATION_WORDS.search(call.rpartition(".")[2]))

    def _share(self, call: str, what: str) -> str:
        """What reading a prepared loader means for it: an evaluation computes partial
        figures as if whole; a training function trains on its share, as it should."""
        return _SHARE if self._evaluates(call, what) else _SHARE_TRAINING

    def _advice(
        self, call: str, module: str, what: str, inherits: dict[str, tuple[str, str]], members: set[str],
        through_methods: bool = False, reads_whole: bool = False, own_share: bool = False, from_table: bool = False,
    ) -> str:
        """Why the Accelerator does not reach a training function of another module. One
        named for an evaluation and handed no optimizer (here, or by what its body does with
        its parameters) needs it for its metrics and prints, not a backward; handed no loader
        either, for its prints alone."""
        evaluates = self._evaluates(call, what)
        if evaluates and own_share:
            parts = "metrics and prints (it builds its loaders with a DistributedSampler: this process's share)"
        elif evaluates and ("loader" not in what or reads_whole) and not through_methods:
            # handed no loader: it reads its data set whole, so every process computes the
            # metrics of all of it (right, N times over); only what it prints is repeated
            parts = "prints (it reads its data whole: each process evaluates all of it)"
        else:
            parts = "metrics and prints" if evaluates else "backward, metrics and prints"
        if from_table:
            return _FROM_TABLE.format(module=module, call=call, parts=parts)
        if call in inherits:
            base, file = inherits[call]
            return _INHERITS.format(module=module, call=call, base=base, file=file, prepare=_prepared_where(what))
        if call in members:
            return _NOT_TOGETHER.format(module=module, call=call, parts=parts)
        return _ADVICE.format(module=module, parts=parts)

    def _left_alone(self, unthreaded: dict[str, bool]) -> None:
        """Calls of functions of the run that get no Accelerator: each call handing one a
        prepared loader it only evaluates on (it sees this process's share, and computes
        from it as if it were everything), and once per function otherwise."""
        analysis = self.analysis
        told: set[str] = set()
        inherits = {spelling: (base, file) for spelling, base, file in self.ctx.config.project_inherits}
        threaded = set(self.ctx.config.project_calls)  # an evaluation threaded with its loaders kept whole
        for c in analysis.facts.calls:
            if c.func not in unthreaded:
                continue
            module = (c.qualified or "").rpartition(".")[0] or c.func.rpartition(".")[0] or "another file"
            what = _given(analysis, c.node)
            if not what or self._evaluates_whole(c.func, what):
                continue
            if c.func in threaded:
                loaders = _loaders(analysis, c.node, prepared=False)
                if loaders and c.func not in told:
                    told.add(c.func)
                    self.report(c.node, call=c.func, module=module, what=what, advice=_KEPT_WHOLE.format(loaders=", ".join(loaders)))
                continue
            shared = [] if unthreaded[c.func] else list(dict.fromkeys(
                _loaders(analysis, c.node, prepared=True) + _shared_through_methods(analysis, c.node)
            ))
            if c.func in told and not shared:
                continue
            told.add(c.func)
            twins = analysis.plan.twins if analysis.plan is not None and not unthreaded[c.func] else {}
            edits = [
                replace(a.value, cst.Name(twins[a.value.value])) for a in c.node.args
                if isinstance(a.value, cst.Name) and a.value.value in twins
            ]
            if edits:
                handed = ", ".join(f"`{twins[n]}`" for n in twins if f"`{n}`" in shared)
                advice = _LEFT_WHOLE.format(module=module) + _TWIN.format(loaders=", ".join(shared), twins=handed)
                self.report(c.node, edits=edits, call=c.func, module=module, what=what, advice=advice)
                continue
            whole = _whole_loaders(analysis, c.node)
            alone = _LEFT_WHOLE if whole and not shared and not unthreaded[c.func] else _LEFT_ALONE
            advice = alone.format(module=module) + whole
            if c.func in inherits:
                base, file = inherits[c.func]
                advice = _INHERITS.format(module=module, call=c.func, base=base, file=file, prepare=_prepared_where(what)) + whole
            if shared:
                advice += self._share(c.func, what).format(loaders=", ".join(shared))
            self.report(c.node, call=c.func, module=module, what=what, advice=advice)

    def _pass_accelerator(self, spellings: set[str]) -> None:
        """In a run of several files (migrator/project/): every call of a function the
        other file's migration threads passes `accelerator=...`; where no Accelerator
        reaches the call it is reported, and the run leaves both files as they are alone."""
        analysis = self.analysis
        for c in analysis.facts.calls:
            if c.func not in spellings:
                continue
            if any(a.keyword is not None and a.keyword.value == "accelerator" for a in c.node.args):
                continue
            module = (c.qualified or "").rpartition(".")[0] or c.func.rpartition(".")[0] or "another file"
            what = _given(analysis, c.node) or "arguments"
            reach = analysis.accelerator_at(c.node)
            if reach is None:
                self.report(c.node, call=c.func, module=module, what=what, advice=_UNREACHED.format(module=module))
                continue
            edit = replace(c.node, _with_keyword(c.node, reach))
            self.report(c.node, edits=[edit], call=c.func, module=module, what=what, advice=_PASSED.format(module=module))


def _from_a_table(analysis, call: cst.Call) -> str | None:
    """`Trainer(opt, model, optimizer)` where the file binds `Trainer = train_factory[opt.task]`
    once, the table imported from a module of the project (CenterNet's trains.train_factory):
    `module.Trainer`, a class of that module's."""
    name = dotted_name(call.func)
    if name is None or "." in name:
        return None
    values = [b.value for b in analysis.facts.bindings if b.name == name]
    if len(values) != 1 or not isinstance(values[0], cst.Subscript):
        return None
    table = analysis.imports.qualify(values[0].value) or ""
    module = table.rpartition(".")[0]
    return f"{module}.{name}" if module and module.split(".")[0] not in _LIBRARIES else None


def _loaders(analysis, call: cst.Call, *, prepared: bool) -> list[str]:
    """The loaders handed to `call` that the migration prepares (or leaves unprepared)."""
    names = (cst.Module([]).code_for_node(a.value).strip() for a in call.args)
    return [
        f"`{name}`" for name in names
        if analysis.roles.of(name) is Role.DATALOADER and (name in analysis.prepared) == prepared
    ]


def _whole_loaders(analysis, call: cst.Call) -> str:
    """The unprepared loaders handed to `call`, or to the methods of the object it builds
    (`evaluator = Evaluator(model)`, then `evaluator.evaluate(val_loader, ...)`)."""
    loaders = _loaders(analysis, call, prepared=False)
    loaders += [name for method in _method_calls(analysis, call) for name in _loaders(analysis, method, prepared=False)]
    loaders = list(dict.fromkeys(loaders))
    return _READS_WHOLE.format(loaders=", ".join(loaders)) if loaders else ""


def _shared_through_methods(analysis, call: cst.Call) -> list[str]:
    """The prepared loaders the methods of the object `call` builds are handed
    (`evaluator.evaluate(train_loader)`): they see this process's share only."""
    return list(dict.fromkeys(
        name for method in _method_calls(analysis, call) for name in _loaders(analysis, method, prepared=True)
    ))


def _method_calls(analysis, call: cst.Call) -> list[cst.Call]:
    """`evaluator.evaluate(...)` calls, in the same scope, on the object `evaluator = call`
    binds."""
    statement = analysis.statement_of(call)
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.value is call):
        return []
    built = dotted_name(statement.targets[0].target)
    scope = analysis.scope_of(call)
    return [
        c.node for c in analysis.facts.calls
        if built and (c.func or "").startswith(f"{built}.") and c.func.count(".") == built.count(".") + 1
        and analysis.scope_of(c.node) is scope
    ]


def _prepared_where(what: str) -> str:
    """yassouali's train.py hands `Trainer` the model and loaders, and BaseTrainer builds the
    optimizer: the model is prepared with it there, not here."""
    return _PREPARE_HERE if "optimizer" in what else _PREPARE_IN_BASE


def _given(analysis, call: cst.Call) -> str:
    """What the call hands over: by the roles of its arguments, or, for objects the file
    builds through factories it cannot read (`get_instance(models, 'arch', config)`), by
    the keywords they are passed as (`model=model, train_loader=train_loader`)."""
    given = [_ROLES[r] for r in (_role(analysis, a.value) for a in call.args) if r in _ROLES]
    given += [k for k in (_keyword_role(a) for a in call.args) if k]
    given += [k for k in (_name_role(a) for a in call.args) if k]
    return ", ".join(dict.fromkeys(given))


def _name_role(arg: cst.Arg) -> str | None:
    """`optimizer` handed by position, built by a factory the file cannot read
    (pytorch-template's `config.init_obj('optimizer', torch.optim, params)`): by its name."""
    if arg.keyword is not None or not isinstance(arg.value, cst.Name):
        return None
    word = arg.value.value.lower()
    return "optimizer" if word == "optimizer" or word.endswith("_optimizer") else None  # `opt` is often the options


def _keyword_role(arg: cst.Arg) -> str | None:
    if arg.keyword is None or (isinstance(arg.value, cst.Name) and arg.value.value[:1].isupper()):
        return None  # `Model=QNetwork` hands over a class, not a model
    word = arg.keyword.value.lower()
    if word in ("model", "net", "network"):
        return "model"
    if word in ("optimizer", "optim"):
        return "optimizer"
    if word.endswith("loader"):
        return "loader"
    if word in ("scheduler", "lr_scheduler"):
        return "scheduler"
    return None


def _with_keyword(call: cst.Call, value: str) -> cst.Call:
    arg = cst.Arg(
        cst.parse_expression(value), keyword=cst.Name("accelerator"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, arg])


def _role(analysis, expr: cst.BaseExpression) -> Role | None:
    name = cst.Module([]).code_for_node(expr).strip()
    return analysis.roles.of(name)
