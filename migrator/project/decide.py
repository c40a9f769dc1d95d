"""The run's decision: which functions are threaded, redone until every caller passes
the Accelerator and every engine took it (whole or nothing per function)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable

from migrator.findings import FileResult, FileStatus, Finding, is_refusal
from migrator.project.calls import check_caller
from migrator.project.index import ACCELERATOR, FileIndex, candidates, init_of
from migrator.project.stub import caller_stub, parameter_kinds
from migrator.verify.signature import CALLED_UNTHREADED

_ROUNDS = 6


@dataclass(frozen=True)
class Outcome:
    """What the run decided: the functions threaded, and each file's context."""

    threaded: frozenset[tuple[str, str]]
    calls: dict[str, tuple[str, ...]]  # caller path → spellings that pass the Accelerator
    stubs: dict[str, str]  # engine path → its callers' stub
    stepped: dict[str, tuple[str, ...]] = field(default_factory=dict)  # caller path → schedulers stepped per batch
    loaders: dict[str, tuple] = field(default_factory=dict)  # caller path → its calls that return loaders
    covered: dict[str, frozenset[str]] = field(default_factory=dict)  # engine path → functions migrated with the Accelerator
    states: dict[str, tuple] = field(default_factory=dict)  # caller path → its calls of state helpers left unthreaded
    plain: dict[str, tuple[str, ...]] = field(default_factory=dict)  # caller path → its calls of functions needing no Accelerator
    unthreaded: dict[str, tuple[tuple[str, bool], ...]] = field(default_factory=dict)  # caller path → its calls of run functions left alone
    refused_calls: dict[str, tuple[str, ...]] = field(default_factory=dict)  # caller path → its calls of training functions left as written
    refused: dict[str, tuple[Finding, ...]] = field(default_factory=dict)  # engine path threaded nothing → why its migration with the Accelerator was left as written

    def context(self, path: str) -> tuple[tuple[str, ...], str, tuple[str, ...], tuple, tuple, tuple[str, ...], tuple, tuple[str, ...]]:
        """(calls, stub, stepped, loaders, states, plain, unthreaded, refused) for `path`: what `migrate` was given for it."""
        return (
            self.calls.get(path, ()), self.stubs.get(path, ""), self.stepped.get(path, ()),
            self.loaders.get(path, ()), self.states.get(path, ()), self.plain.get(path, ()),
            self.unthreaded.get(path, ()), self.refused_calls.get(path, ()),
        )


def decide(
    files: dict[str, FileIndex],
    migrate: Callable[[str, tuple[str, ...], str, tuple[str, ...]], FileResult],
    target_import: Callable[[str], str],
    outside: dict[str, str] | None = None,
    read_only: frozenset[str] = frozenset(),
) -> tuple[Outcome, dict[str, FileResult]]:
    """Run the callers and engines with the threaded set until nothing is dropped.
    `migrate(path, calls, stub, stepped, loaders, states, plain)` migrates one file with that
    context (the stub already cut off again; `stepped`: its schedulers the threaded
    functions step per batch; `loaders`: its calls of functions of the run that return
    DataLoaders; `states`: its calls of unthreaded functions that save or load the state
    of a model they are given; `plain`: its calls of functions migrated with it that need
    no Accelerator; `unthreaded`: its calls of functions of the run left without it).
    `read_only`: files the run reads and never writes (index.candidates).
    Returns the outcome and the results of the files that had a context."""
    threaded = candidates(files, outside, read_only)
    plain: set[tuple[str, str]] = set()  # threaded, but their migration needs no Accelerator
    unwrapped: set[tuple[str, str]] = set()  # threaded state helpers handed the unwrapped model at every call
    whole: set[tuple[str, str]] = set()  # threaded evaluations whose callers keep their loaders whole
    refusals: dict[str, tuple[Finding, ...]] = {}  # engine → the AM95x reasons its first refused migration gave
    gone: set[tuple[str, str]] = set()  # dropped for good
    for round_ in range(_ROUNDS):
        if round_:  # a file that called a function now dropped may have its own threaded (DeepLabV3's engine calling MetricLogger)
            threaded |= candidates(files, outside, read_only, frozenset(gone)) - gone - plain
        if not threaded:
            refused_alone(files, _untried(files, gone, threaded, read_only), refusals, migrate)
            return Outcome(frozenset(), {}, {}, refused=refusals), {}
        plain &= threaded
        results: dict[str, FileResult] = {}
        dropped: set[tuple[str, str]] = set()
        unthreaded: dict[str, tuple[tuple[str, bool], ...]] = {}
        refused_calls: dict[str, tuple[str, ...]] = {}
        calls = _calls_by_file(files, threaded - plain)
        plain_calls = _calls_by_file(files, plain)
        stepped: dict[str, tuple[str, ...]] = {}
        loaders = {path: _loader_calls(files, files[path]) for path in calls}
        states = {path: _state_calls(files, files[path], threaded, unwrapped) for path in calls}
        prepared: dict[tuple[str, str], list[dict[str, str]]] = {}
        for path in sorted(set(calls) | set(plain_calls)):
            spellings = calls.get(path, ())
            loaders.setdefault(path, _loader_calls(files, files[path]))
            states.setdefault(path, _state_calls(files, files[path], threaded, unwrapped))
            stepped[path] = _stepped_by(files, files[path], threaded)
            unthreaded[path] = _unthreaded_calls(files, files[path], threaded, whole)
            refused_calls[path] = refused_trainers(files, path, refusals, threaded)
            result = migrate(
                path, spellings, "", stepped[path], loaders[path], states[path], plain_calls.get(path, ()), unthreaded[path],
                refused_calls[path],
            )
            results[path] = result
            dropped |= check_caller(files[path], threaded, result, prepared, loaders[path], plain)
        threaded -= dropped
        gone |= dropped
        if dropped:
            continue
        stubs = {}
        covered: dict[str, frozenset[str]] = {}
        needless: set[tuple[str, str]] = set()
        again = False
        for engine in sorted({t[0] for t in threaded}):
            mine = sorted(t for t in threaded if t[0] == engine)
            stub, left_out = caller_stub(files, mine, prepared, target_import(engine))
            rescued = {t for t in left_out - unwrapped if _agrees_unwrapped(files, t, prepared.get(t, []))}
            kept = {t for t in left_out - whole - rescued if _agrees_whole(files, t, prepared.get(t, []))}
            kept |= {t for t in set(mine) - left_out - whole if _reads_whole(files, t, prepared.get(t, []))}
            unwrapped |= rescued
            whole |= kept
            again |= bool(rescued | kept)  # its callers are migrated again, unwrapping the model or keeping the loaders whole
            dropped |= left_out - rescued - kept
            if stub is None or left_out:
                continue  # the callers are migrated again without what was left out
            stubs[engine] = stub
            result = migrate(engine, (), stub, (), (), ())
            bad = _check_engine(mine, result, files)
            if not _refused(result):  # left as written, it reads no Accelerator because it was not migrated
                needless |= {t for t in bad - plain if not _uses_accelerator(result, t[1])}
            elif engine not in refusals:  # the callers' AM914 points at these reasons
                refusals[engine] = tuple(f for f in result.findings if is_refusal(f.code))
            bad -= plain | needless
            if not bad:  # the functions left alone keep the AM913 advice they get alone
                covered[engine] = frozenset(covered_functions(result, mine, files))
                result = with_unthreaded(result, migrate(engine, (), "", (), (), ()), covered[engine])
            results[engine] = result
            dropped |= bad
        threaded -= dropped
        gone |= dropped
        if again:
            continue
        if needless - dropped:
            plain |= needless - dropped  # its callers no longer pass the Accelerator: again
            continue
        if not dropped:
            refused_alone(files, _untried(files, gone, threaded, read_only), refusals, migrate)
            engines = {t[0] for t in threaded}
            refused = {path: found for path, found in refusals.items() if path not in engines}
            return Outcome(
                frozenset(threaded), calls, stubs, stepped, loaders, covered, states, plain_calls, unthreaded, refused_calls, refused,
            ), results
    refused_alone(files, _untried(files, gone, frozenset(), read_only), refusals, migrate)
    return Outcome(frozenset(), {}, {}, refused=refusals), {}


def _untried(files: dict[str, FileIndex], gone: set, threaded, read_only: frozenset[str]) -> set[tuple[str, str]]:
    """The training functions and classes whose engines no round migrated with the
    Accelerator: those dropped, and those nothing threads (LightGCN's `utils.BPRLoss`, a
    class that would create its own Accelerator, built once by main.py). Migrated alone,
    a refusal among them leaves the set-ups that call them as written too."""
    engines = {path for path, _ in threaded}
    return set(gone) | {t for t in trainers_called(files, read_only) if t[0] not in engines}


def refused_alone(files: dict[str, FileIndex], trainers: set[tuple[str, str]], refusals: dict, migrate) -> None:
    """Engines of training functions the run does not thread, or dropped before trying their
    migration with the Accelerator (Bert-Multi-Label's Trainer: its three callers could not
    agree on a stub, or one of them is a file the run only reads): migrated alone, one whose
    migration is left as written for a reason of its own (a refusal other than AM954's
    "nothing here calls it"; its "another file calls it without passing it" is one) is added to `refusals`, so the set-up its callers would prepare
    for it is left as written too (refused_trainers)."""
    for engine in sorted({path for path, name in trainers if _trains(files, path, name)} - set(refusals)):
        result = migrate(engine, (), "", (), (), ())
        reasons = tuple(
            f for f in result.findings if is_refusal(f.code) and (f.code != "AM954" or CALLED_UNTHREADED in f.message)
        )
        if reasons:
            refusals[engine] = reasons


def trainers_called(files: dict[str, FileIndex], read_only: frozenset[str] = frozenset()) -> set[tuple[str, str]]:
    """The training functions and classes (a backward or a step in them) of the run that
    another file of the run, one it may write, calls."""
    return {
        call.target for path, f in files.items() if path not in read_only for call in f.calls
        if call.target[0] != path and _trains(files, *call.target)
    }


def _trains(files: dict[str, FileIndex], path: str, name: str) -> bool:
    function = files[path].functions.get(name) if path in files else None
    return function is not None and function.updates


def refused_trainers(
    files: dict[str, FileIndex], path: str, refusals: dict[str, tuple[Finding, ...]], threaded=frozenset(),
) -> tuple[str, ...]:
    """The file's calls of training functions (a backward or a step in them) of engines whose
    migration with the Accelerator was left as written: a set-up prepared for them would
    run their plain backward, per-process metrics and whatever stopped their migration on
    N processes (Config.project_refused; the set-up is left as written too)."""
    out = set()
    for call in files[path].calls:
        owner = files.get(call.target[0])
        function = owner.functions.get(call.target[1]) if owner else None
        if call.target[0] in refusals and call.target[0] != path and call.target not in threaded and function is not None and function.updates:
            out.add(call.spelling)
    return tuple(sorted(out))


def _unthreaded_calls(files: dict[str, FileIndex], f: FileIndex, threaded, whole=frozenset()) -> tuple[tuple[str, bool], ...]:
    """This file's calls of functions of the run that train, read batches or run a model
    and are not given the Accelerator (nor were by an earlier run), and whether each trains
    (calls backward or step): a loader only evaluations read is better left whole. With
    them the evaluations of `whole`, threaded with their loaders kept whole."""
    out = set()
    for call in f.calls:
        owner = files.get(call.target[0])
        function = owner.functions.get(call.target[1]) if owner else None
        roles = {role for _, role in function.param_roles} if function is not None else set()
        if function is None or call.target in threaded and call.target not in whole:
            continue
        if call.target not in whole and any(k == ACCELERATOR for k, _ in call.keywords):
            continue  # threaded by an earlier run
        if function.collective and not function.updates:
            continue  # it adds up across processes itself: its loader is best prepared (shared)
        if function.updates or roles & {"dataloader", "model"} or (function.is_class and function.methods):
            out.add((call.spelling, function.updates))  # a class: its methods may read what the caller hands them
    return tuple(sorted(out))


def placing_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file, its calls of the run's functions and classes that move tensors onto a
    device themselves (`.to(...)`, `.cuda()` in their body, a class's methods, or a function of
    their file they call), as Config.project_placing takes them: batches they are handed need
    no prepared loader to reach the model's device (clovaai's `validation` moves its own)."""
    placing: set[tuple[str, str]] = set()
    for path in {c.target[0] for f in files.values() for c in f.calls if c.target[0] != f.path}:
        try:
            tree = ast.parse(sources.get(path, b""))
        except (SyntaxError, ValueError):
            continue
        defined = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for name, node in defined.items():
            called = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            if any(_moves(defined[n]) for n in {name} | (called & set(defined))):
                placing.add((path, name))
    out = {}
    for path, f in files.items():
        found = {c.spelling for c in f.calls if c.target in placing and c.target[0] != path}
        if found:
            out[path] = tuple(sorted(found))
    return out


def _moves(node: ast.AST) -> bool:
    """The code moves what it feeds its model: every name a parameter-held model is called
    with (`model(input)`, `self.model(x)`) was moved first (`input = input.cuda()`). HRNet's
    `validate` moves only its targets: its inputs reach the model where the loader left them.
    Code that calls no model of its parameters counts as moving when it moves anything."""
    functions = [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    fed: list[ast.expr] = []
    moved: set[str] = set()
    for function in functions:
        params = {a.arg for a in function.args.args + function.args.kwonlyargs} - {"self"}
        for n in ast.walk(function):
            if isinstance(n, ast.Call) and _model_call(n, params):
                fed += [a for a in n.args if isinstance(a, ast.Name)]
            if isinstance(n, ast.Assign) and any(_moving(c) for c in ast.walk(n.value)):
                moved |= {t.id for target in n.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    if fed:
        return all(a.id in moved for a in fed)
    return any(_moving(n) for n in ast.walk(node))


def _moving(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "cuda")


def _model_call(call: ast.Call, params: set[str]) -> bool:
    """`model(x)` on a parameter named like a model, or `self.model(x)`."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" else None
    if name is None or isinstance(func, ast.Name) and name not in params:
        return False
    return any(word in name.lower() for word in ("model", "net"))


def evaluation_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file, its calls of the run's functions and classes that read what they are
    handed without training on it (no backward, no step), as Config.project_evaluations
    takes them: those that get no Accelerator (not threaded) read a loader whole, so a
    caller leaves out of prepare() a loader only they read (open-reid's
    `Evaluator(model).evaluate(val_loader, ...)`), even in a run that threads nothing."""
    out = {}
    for path, f in files.items():
        found = {spelling for spelling, trains in _unthreaded_calls(files, f, frozenset()) if not trains}
        if found:
            out[path] = tuple(sorted(found))
    return out


def _stepped_by(files: dict[str, FileIndex], f: FileIndex, threaded) -> tuple[str, ...]:
    """Names this caller hands to a threaded function that steps them per batch."""
    out = set()
    for call in f.calls:
        if call.target not in threaded:
            continue
        function = files[call.target[0]].functions[call.target[1]]
        given = list(zip(function.params, call.args)) + list(call.keywords)
        out |= {name for param, name in given if name and param in function.batch_stepped}
    return tuple(sorted(out))


def loader_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple]:
    """For each file, its calls of the run's functions that return DataLoaders, as
    Config.project_loaders takes them, also in a run that threads nothing: a set-up
    migrated alone knows `train_loader = make_loader(...)` of data.py is a loader to
    prepare with the model (else the engine it hands them to trains on all of it)."""
    return {path: found for path, f in files.items() if (found := _loader_calls(files, f))}


def _loader_calls(files: dict[str, FileIndex], f: FileIndex) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """This file's calls of functions of the run that return DataLoaders: (spelling, positions)."""
    out = set()
    for call in f.calls:
        owner = files.get(call.target[0])
        function = owner.functions.get(call.target[1]) if owner else None
        if function is not None and function.returned_loaders:
            out.add((call.spelling, function.returned_loaders))
    return tuple(sorted(out))


def state_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple]:
    """Every file's calls of the run's functions that save or load a model's state, as
    Config.project_states takes them: read for a file migrated alone too (its set-up left
    as written still hears AM207 on the model it hands them)."""
    out = {path: _state_calls(files, f, set()) for path, f in files.items()}
    return {path: calls for path, calls in out.items() if calls}


def _state_calls(files: dict[str, FileIndex], f: FileIndex, threaded, unwrapped=frozenset()) -> tuple[tuple[str, tuple[int, ...], tuple[str, ...], bool], ...]:
    """This file's calls of functions of the run that save or load the state of a model
    they are given, not threaded or threaded with the model unwrapped at their calls
    (`unwrapped`: their migration writes the file once), and of the methods of the run's
    classes that do (`es(score, model)`): (spelling, positions, names of those parameters,
    whether it writes a file on every process)."""
    out = set()
    for call in f.calls:
        owner = files.get(call.target[0])
        function = owner.functions.get(call.target[1]) if owner else None
        if function is None or not function.state_params or call.target in threaded and call.target not in unwrapped:
            continue
        positions = tuple(i for i, p in enumerate(function.params) if p in function.state_params)
        out.add((call.spelling, positions, function.state_params, function.state_writes and call.target not in threaded))
    for name, (path, cls) in f.instances.items():  # `es = utils.EarlyStopping(...)` ... `es(score, model)`
        if (path, cls) in threaded:
            continue  # the class gets the Accelerator: its migration unwraps and saves once
        owner = files.get(path)
        made = owner.functions.get(cls) if owner else None
        for method, positions, params, writes in made.method_states if made is not None and made.is_class else ():
            out.add((name if method == "__call__" else f"{name}.{method}", positions, params, writes))
    return tuple(sorted(out))


def _agrees_unwrapped(files: dict[str, FileIndex], target: tuple[str, str], calls: list[dict[object, str]]) -> bool:
    """The callers of a state helper disagree only on its model: the plain model at one call
    (`load_checkpoint(model, ...)` before prepare()), the prepared one at another (after it).
    Handed `accelerator.unwrap_model(model)` at the second, it gets the plain model at every
    call and can be given the Accelerator (`map_location=accelerator.device`)."""
    function = files[target[0]].functions.get(target[1])
    if function is None or function.is_class or not function.state_params:
        return False
    states = set(function.state_params)

    def plain(key: object) -> object:
        return function.params[key] if isinstance(key, int) and key < len(function.params) else key

    seen = [{k: "other" if plain(k) in states and v == "prepared:model" else v for k, v in call.items()} for call in calls]
    handed = any(plain(k) in states and v == "prepared:model" for call in calls for k, v in call.items())
    return handed and parameter_kinds(function.params, seen) is not None


def _agrees_whole(files: dict[str, FileIndex], target: tuple[str, str], calls: list[dict[object, str]]) -> bool:
    """The callers of an evaluation disagree only on its loaders: one prepared, because the
    evaluation was to get the Accelerator (`val_loader` prepared with the training objects),
    another handed over whole (`test_loader` never prepared). With its loaders kept whole
    at every call it evaluates on all the data on every process, as when left alone, and
    still gets the Accelerator (its prints on the main process)."""
    function = files[target[0]].functions.get(target[1])
    if function is None or function.updates:
        return False
    seen = [{k: "whole:dataloader" if v == "prepared:dataloader" else v for k, v in call.items()} for call in calls]
    handed = any(v == "whole:dataloader" for call in calls for v in call.values())
    return handed and parameter_kinds(function.params, seen) is not None


def _reads_whole(files: dict[str, FileIndex], target: tuple[str, str], calls: list[dict[object, str]]) -> bool:
    """An evaluation every call hands only loaders left out of prepare() (a test loader
    never prepared; the validation loader of an earlier run, kept whole there): threaded,
    it evaluates all the data on every process, and its callers hear so."""
    function = files[target[0]].functions.get(target[1])
    if function is None or function.updates or not calls:
        return False
    kinds = [set(call.values()) for call in calls]
    return all("whole:dataloader" in k and "prepared:dataloader" not in k for k in kinds)


def _calls_by_file(files: dict[str, FileIndex], threaded: set[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    out = {}
    for path, f in files.items():
        spellings = sorted({c.spelling for c in f.calls if c.target in threaded})
        if spellings:
            out[path] = tuple(spellings)
    return out


def _check_engine(mine, result: FileResult, files: dict[str, FileIndex]) -> set[tuple[str, str]]:
    """The functions of `mine` the engine's migration did not give the keyword-only
    parameter; all of them when it changed another function or class of the file (the
    stub's prepare() speaks for the threaded functions only: a `.to(device)` removed from a
    function the set-up does not reach would leave its batches off the device), other than
    the engine's own helpers that only the threaded functions call (`train()` calling
    `train_step()`: the engine's migration threads them as it would in one file)."""
    if _refused(result):
        return set(mine)  # unchanged is fine where an earlier run threaded them all
    try:
        tree = ast.parse(result.after)
        before = ast.parse(result.before or "")
    except SyntaxError:
        return set(mine)
    names = _with_private_helpers(before, {t[1] for t in mine}, mine[0][0], files)
    if not _others_kept(_others(before, names), _others(tree, names)):
        return set(mine)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    defs |= {n.name: init for n in tree.body if isinstance(n, ast.ClassDef) and (init := init_of(n)) is not None}
    return {t for t in mine if t[1] not in defs or ACCELERATOR not in [a.arg for a in defs[t[1]].args.kwonlyargs]}


def _refused(result: FileResult) -> bool:
    """The engine's migration failed or was left as written for a reason (AM95x)."""
    return result.status is FileStatus.FAILED or result.after is None or any(is_refusal(x.code) for x in result.findings)


def _uses_accelerator(result: FileResult, name: str) -> bool:
    """Whether the migrated function `name` reads the Accelerator (else it needs none: its
    migration only dropped device moves its callers' prepared loaders make redundant)."""
    try:
        tree = ast.parse(result.after or "")
    except SyntaxError:
        return True
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return any(isinstance(n, ast.Name) and n.id == ACCELERATOR for n in ast.walk(node))
    return True


def covered_functions(result: FileResult, mine, files: dict[str, FileIndex]) -> set[str]:
    """The engine's functions migrated with the Accelerator: the threaded ones and their
    private helpers."""
    try:
        tree = ast.parse(result.before or "")
    except SyntaxError:
        return {t[1] for t in mine}
    return _with_private_helpers(tree, {t[1] for t in mine}, mine[0][0], files)


def _with_private_helpers(tree: ast.Module, names: set[str], path: str, files: dict[str, FileIndex]) -> set[str]:
    """`names` and the module's functions called only from inside them (transitively),
    named by no other file of the run."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    elsewhere = {w for p, f in files.items() if p != path for w in f.words}
    users: dict[str, set[str | None]] = {name: set() for name in defs}
    for node in tree.body:  # who mentions each function: a top-level function, or None (module code, classes)
        owner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in users and n.id != owner:
                users[n.id].add(owner)
    allowed = set(names)
    grew = True
    while grew:
        grew = False
        for name, mentioned_by in users.items():
            if name not in allowed and name not in elsewhere and mentioned_by and mentioned_by <= allowed:
                allowed.add(name)
                grew = True
    return allowed


def with_reasons(alone: FileResult, reasons: tuple[Finding, ...]) -> FileResult:
    """An engine no function of which took the Accelerator, as migrated alone, with the
    reasons its migration together with its callers was left as written (their AM914 says
    its findings tell why: WZMIAOMIAO's utils.py rebinding its loader to a tqdm bar)."""
    from dataclasses import replace

    known = {(f.code, f.start, f.message) for f in alone.findings}
    extra = tuple(f for f in reasons if (f.code, f.start, f.message) not in known)
    found = sorted(alone.findings + extra, key=lambda f: (f.start.line, f.start.col))
    return replace(alone, findings=tuple(found)) if extra else alone


def with_unthreaded(result: FileResult, alone: FileResult, threaded: set[str]) -> FileResult:
    """`result` (the engine migrated with its callers) plus the AM913 findings the engine
    alone gives in the functions that were not threaded, moved to where those functions
    are now (they are unchanged; code above them may have moved)."""
    from dataclasses import replace

    from migrator.findings import Position

    try:
        before, after = ast.parse(result.before or ""), ast.parse(result.after or "")
    except SyntaxError:
        return result
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    spans = {n.name: (n.lineno, n.end_lineno or n.lineno) for n in before.body if isinstance(n, kinds) and n.name not in threaded}
    now = {n.name: n.lineno for n in after.body if isinstance(n, kinds)}
    extra = []
    for f in alone.findings:
        name = next((k for k, (a, b) in spans.items() if f.code == "AM913" and a <= f.start.line <= b and k in now), None)
        if name is not None:
            shift = now[name] - spans[name][0]
            extra.append(replace(
                f, start=Position(f.start.line + shift, f.start.col), end=Position(f.end.line + shift, f.end.col)
            ))
    return replace(result, findings=result.findings + tuple(extra)) if extra else result


def _others(tree: ast.Module, names: set[str]) -> list[ast.stmt]:
    """The module's statements but its imports and the definitions named in `names`."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [
        n for n in tree.body
        if not isinstance(n, (ast.Import, ast.ImportFrom)) and not (isinstance(n, kinds) and n.name in names)
    ]


def _others_kept(before: list[ast.stmt], after: list[ast.stmt]) -> bool:
    """The statements the set-up does not reach are unchanged, or changed only in ways right
    whatever their callers prepared: no device move dropped, no Accelerator read (ConvNeXt's
    `plot_data_loader_image` gets `.cpu()` before `.numpy()`, AM107: right on any device)."""
    if len(before) != len(after):
        return False
    for old, new in zip(before, after):
        if ast.dump(old) == ast.dump(new):
            continue
        if any(isinstance(n, ast.Name) and n.id == ACCELERATOR for n in ast.walk(new)) or _device_moves(new) < _device_moves(old):
            return False
    return True


def _device_moves(node: ast.AST) -> int:
    return sum(_moving(n) for n in ast.walk(node))
