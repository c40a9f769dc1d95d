"""Each training set-up is whole: what the optimizers update, the optimizers, and the
loaders the training loop draws from are prepared together, and prepare() is given only
what it can prepare.

A half-prepared set-up is the worst migration there is: it runs, and on N processes it
trains N unsynchronised replicas or every rank on the whole data set.
"""

from __future__ import annotations

import ast
from typing import Iterator

from migrator.verify.pair import Pair, Problem
from migrator.verify.program import (
    Program, call_name, dotted, fed_prepared, is_optimizer_call, last, parameter_owners,
)

CODE = "AM951"
_NOT_PREPARABLE = {"tqdm", "trange", "iter", "enumerate", "zip", "range", "islice", "cycle"}


def check(pair: Pair) -> list[Problem]:
    program = pair.after
    if not program.prepares:
        return []
    return (
        list(_optimizers_and_models(pair)) + list(_training_loaders(pair)) + list(_unpreparable(pair))
        + list(_optimizers_alone(pair)) + list(_wrap_dropped(pair)) + list(_prepared_and_dropped(pair))
        + list(_training_elsewhere_unsharded(pair)) + list(_training_left_as_written(pair))
        + list(_handed_over_before_prepare(pair))
        + list(_optimizer_wrappers(pair))
    )


# What a torch optimizer answers; a prepared one forwards nothing else.
_OPTIMIZER_API = frozenset({
    "step", "zero_grad", "state_dict", "load_state_dict", "add_param_group", "param_groups", "state", "defaults",
    "register_step_pre_hook", "register_step_post_hook", "optimizer", "train", "eval",
})


def _optimizer_wrappers(pair: Pair) -> Iterator[Problem]:
    """A prepared "optimizer" the script drives through methods no torch optimizer has
    (FastSpeech2's `optimizer.step_and_update_lr()`, a ScheduledOptim holding a torch Adam,
    returned by another file's `get_model`): a wrapper of the project's, which prepare()
    rejects with a TypeError at start, on one process too."""
    program = pair.after
    before = {a.target for a in pair.before.assigns}
    for prepare in program.prepares:
        for arg, node in zip(prepare.args, prepare.call.args):
            if not arg or program.kind_of(arg) != "optimizer" or arg not in before:
                continue
            foreign = sorted({
                n.attr for n in program.nodes
                if isinstance(n, ast.Attribute) and dotted(n.value) == arg and n.attr not in _OPTIMIZER_API
                and not n.attr.startswith("__") and not _probed(program, arg, n.attr)
            }, key=lambda attr: (attr.startswith("_"), attr))  # its own methods first
            if foreign:
                yield pair.at_after(
                    CODE, node,
                    f"left as written: `{arg}` is used as `{arg}.{foreign[0]}`, which no torch optimizer has: "
                    "it is a wrapper of the project's around one, and prepare() takes only torch optimizers "
                    "(it raises TypeError); prepare the torch optimizer it holds and put the prepared one back "
                    "in the wrapper, then migrate",
                )


def _probed(program: Program, owner: str, attr: str) -> bool:
    """`hasattr(optimizer, 'is_second_order')` (Swin-Transformer, timm): an attribute the
    script asks for first, which a torch optimizer may lack."""
    return any(
        isinstance(n, ast.Call) and call_name(n) in ("hasattr", "getattr") and len(n.args) >= 2
        and dotted(n.args[0]) == owner and isinstance(n.args[1], ast.Constant) and n.args[1].value == attr
        for n in program.nodes
    )


def _training_left_as_written(pair: Pair) -> Iterator[Problem]:
    """The set-up would be prepared for a training function of another file of the run
    whose own migration was left as written (WZMIAOMIAO's ConvNeXt before its loader
    rebinding was understood; an engine skipping a step on a NaN loss): that function
    would run its plain backward, its per-process metrics and whatever stopped its
    migration on the prepared model and loaders. Both are migrated, or neither."""
    if not pair.refused_trainers:
        return
    for call in pair.after.calls:
        spelling = call_name(call)
        if spelling in pair.refused_trainers:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{spelling}` trains what this file would prepare, but its own migration with "
                "the Accelerator was left as written (its findings say why); run on the prepared model and loaders "
                "without it, its backward, metrics and what stopped it would run on N processes; migrate the two "
                "together once its findings are resolved",
            )
            return


def _training_elsewhere_unsharded(pair: Pair) -> Iterator[Problem]:
    """The model and its optimizer would be prepared, but no loader, and nothing in this
    file runs a backward: the training runs in code they are handed to (an engine class of
    the project, a library's trainer), which reads data this migration never shards, so
    every process would train on all of it (deep-person-reid's main.py: `build_engine(cfg,
    datamanager, model, optimizer, scheduler)`, the loaders built inside the data manager).
    A call that passes the Accelerator on hands its training to a migrated engine."""
    program = pair.after
    kinds = [program.kind_of(a) if a else "other" for p in program.prepares for a in p.args]
    if "loader" in kinds or "optimizer" not in kinds or "other" not in kinds:
        return
    if _has_backward(program.tree):
        return
    prepare = program.prepares[0]
    models = {a for p in program.prepares for a in p.args if a and program.kind_of(a) == "other"}
    optimizers = {a for p in program.prepares for a in p.args if a and program.kind_of(a) == "optimizer"}
    handing = [call for call in program.nodes if isinstance(call, ast.Call) and _hands_over(call, models, optimizers)]
    if not handing or any(_hands_sharded_loader(pair, call) for call in handing):
        return
    if any(k.arg == "accelerator" for call in handing for k in call.keywords):
        return  # handed on with the Accelerator: a migrated engine (not a helper given it for a download)
    yield pair.at_after(
        CODE, prepare.call,
        "left as written: the model and its optimizer would be prepared with no loader, and nothing in "
        "this file trains: the code they are handed to trains them on data no prepare() here shards (a "
        "loader it builds, or one it reaches through an object it is handed, such as a data manager), so "
        "every process would train on all of it; prepare the training loader with the model in this "
        "file and hand on the prepared one, migrating the training code with it",
    )


def _hands_sharded_loader(pair: Pair, call: ast.Call) -> bool:
    """`do_train(cfg, model, train_loader, optimizer, ...)` where `train_loader` comes from
    another file's builder that shards it with a DistributedSampler (lufficc/SSD's
    `make_data_loader(...)`): the code it is handed to reads this process's share."""
    handed = {a.id for a in call.args if isinstance(a, ast.Name)} | {k.value.id for k in call.keywords if isinstance(k.value, ast.Name)}
    return bool(handed & _sharded_names(pair))


def _sharded_names(pair: Pair) -> set[str]:
    """Names bound to a call of another file's builder of loaders it shards with a
    DistributedSampler (`train_loader = make_data_loader(...)`): kept out of prepare()."""
    if not pair.sharded_loaders:
        return set()
    return {
        t.id for n in pair.after.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
        and call_name(n.value) in pair.sharded_loaders for t in n.targets if isinstance(t, ast.Name)
    }


def _prepared_and_dropped(pair: Pair) -> Iterator[Problem]:
    """A parameter of a function prepared there and never read again: the prepared object
    dies with the call, and the caller goes on with the one it passed in (SRGAN's models,
    handed to `define_optimizer` for their parameters)."""
    program = pair.after
    for prepare in program.prepares:
        function = prepare.scope
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        parameters = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
        end = getattr(prepare.call, "end_lineno", prepare.call.lineno)
        for target in prepare.targets:
            if target not in parameters:
                continue
            read_later = any(
                isinstance(n, ast.Name) and n.id == target and isinstance(n.ctx, ast.Load) and n.lineno > end
                for n in ast.walk(function)
            )
            if not read_later:
                yield pair.at_after(
                    CODE, prepare.call,
                    f"left as written: `{target}` would be prepared inside `{function.name}()`, which takes it as a "
                    "parameter and neither uses nor returns the prepared object, so its caller would go on with the "
                    "unprepared one; prepare it where the caller binds it",
                )


# calls a prepared model may still be handed to without training through them
_KEEPING_WORDS = ("save", "load", "checkpoint", "state", "log", "print", "summary", "unwrap", "watch", "count", "param")


def _handed_over_before_prepare(pair: Pair) -> Iterator[Problem]:
    """CenterNet's `trainer = Trainer(opt, model, optimizer)`, then `prepare(model, ...)`,
    then `trainer.train(epoch, loader)`: the object keeps the model it was built with (its
    own `ModelWithLoss(model, loss)`), and the prepared one is never run here, only saved.
    The training goes on through the plain model: no gradient is averaged, N processes
    train N copies."""
    program = pair.after
    for prepare in program.prepares:
        end = getattr(prepare.call, "end_lineno", prepare.call.lineno)
        for model in (t for t in prepare.targets if t and program.kind_of(t) == "other"):
            holders = _built_with(program, prepare, model)
            if not holders or _runs_after(program, prepare, model, end):
                continue
            driven = [h for h in holders if _used_after(program, prepare, h, end)]
            if driven:
                holder, call = driven[0]
                yield pair.at_after(
                    CODE, prepare.call,
                    f"left as written: `{holder}` is built with `{model}` before prepare() (`{call_name(call)}(...)`) "
                    f"and goes on with the model it was given, while the prepared `{model}` is never "
                    "run here: the training would not pass through prepare()'s wrap, so no gradient would be averaged "
                    f"and N processes would train N copies; prepare `{model}` before it is handed over, or migrate the "
                    "code that trains it with this file",
                )


def _built_with(program: Program, prepare, model: str) -> list[tuple[str, ast.Call]]:
    """Names bound, before `prepare` in its scope, to a call handed `model` itself (not a
    library's: an optimizer takes its parameters; a copy for an EMA is a copy)."""
    out = []
    for a in program.assigns:
        value = a.value
        if a.scope is not prepare.scope or not isinstance(value, ast.Call) or a.node.lineno >= prepare.call.lineno:
            continue
        name = call_name(value)
        if name.split(".")[0] in ("torch", "nn", "copy", "deepcopy", "accelerator") or last(name) in ("prepare", "deepcopy"):
            continue
        given = [dotted(x) for x in value.args] + [dotted(k.value) for k in value.keywords]
        if model in given and a.target != model:
            out.append((a.target, value))
    return out


def _runs_after(program: Program, prepare, model: str, end: int) -> bool:
    """The prepared model is run, or handed to code that may run it, after prepare()."""
    for call in program.calls:
        if call.lineno <= end or program.scope_of.get(call) is not prepare.scope:
            continue
        if dotted(call.func) == model or (isinstance(call.func, ast.Attribute) and dotted(call.func.value) == model):
            return True
        given = [dotted(x) for x in call.args] + [dotted(k.value) for k in call.keywords]
        if model in given and not any(w in last(call_name(call)).lower() for w in _KEEPING_WORDS):
            return True
    return False


def _used_after(program: Program, prepare, holder: tuple[str, ast.Call], end: int) -> bool:
    """A method of the holder is called after prepare() (`trainer.train(epoch, loader)`)."""
    name = holder[0]
    return any(
        call.lineno > end and program.scope_of.get(call) is prepare.scope
        and isinstance(call.func, ast.Attribute) and dotted(call.func.value) == name
        for call in program.calls
    )


_WRAPS = ("DistributedDataParallel", "DataParallel")


def _wrap_dropped(pair: Pair) -> Iterator[Problem]:
    """`model = DDP(model, ...)` removed while `model` is prepared nowhere: the script lost
    its wrap and got none back, so N processes train N unsynchronised copies."""
    after = pair.after
    wraps = set(_WRAPS) | {
        alias.asname for n in pair.before.nodes if isinstance(n, ast.ImportFrom)
        for alias in n.names if alias.name in _WRAPS and alias.asname
    }
    if any(last(call_name(c)) in wraps for c in after.calls):
        return
    for call in pair.before.calls:
        if last(call_name(call)) not in wraps or not call.args:
            continue
        wrapped = dotted(_peel(call.args[0]))
        if wrapped is None or any(after.is_prepared(".".join(wrapped.split(".")[:k])) for k in range(1, wrapped.count(".") + 2)):
            continue  # prepared itself, or a part of a prepared model (`model.features`)
        if any(after.is_prepared(a.target) for a in after.assigns if dotted(_peel(a.value)) == wrapped):
            continue  # prepared under another name it was bound to
        if any(wrapped in p.args for p in after.prepares):
            continue  # handed to prepare() (`ddp = accelerator.prepare(net)`)
        if _loss_module(pair.before, wrapped, call):
            continue  # a loss spread over GPUs with its batch (Bonnetal's criterion): nothing to synchronise
        yield Pair.at_before(
            CODE, call,
            f"left as written: the `{last(call_name(call))}` wrap of `{wrapped}` would go while `{wrapped}` "
            "is prepared nowhere, so N processes would train N unsynchronised copies; prepare the model",
        )
        return


def _loss_module(program: Program, name: str, wrap: ast.Call) -> bool:
    """`criterion = nn.NLLLoss(weight=w).to(device)`, later `nn.DataParallel(criterion)`: every
    value of the name but the wrap is a torch loss, which has no parameters to train."""
    values = [v for v in program.values_of(name) if _peel(v) is not wrap]
    return bool(values) and all(
        isinstance(v := _peel(value), ast.Call) and last(call_name(v)).endswith("Loss") for value in values
    )


def _peel(node: ast.AST) -> ast.AST:
    """`model.to(device)`, `model.cuda(gpu)`: the model."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "cuda"):
        node = node.func.value
    return node


def _hands_over(call: ast.Call, models: set[str], optimizers: set[str]) -> bool:
    """`Engine(model, optimizer)`, `build_engine(cfg, data, model, optimizer=optimizer)`:
    a call given a prepared model and its optimizer, all a training needs."""
    if last(call_name(call)) == "prepare":
        return False
    given = {dotted(a) for a in call.args} | {dotted(k.value) for k in call.keywords}
    return bool(given & models) and bool(given & optimizers)


def _optimizers_alone(pair: Pair) -> Iterator[Problem]:
    """The file's prepare() calls take an optimizer but no model (optimizers, schedulers and
    loaders only): the model they update is prepared nowhere here, so nothing is wrapped
    for distribution (an optimizer built in a model's own `get_optimizer()`, handed over by
    another file, or over the parameters of models kept in a dict: monodepth2's
    `self.models["encoder"]`)."""
    program = pair.after
    kinds = [(p, [program.kind_of(a) if a else "other" for a in p.args]) for p in program.prepares]
    flat = [k for _, ks in kinds for k in ks]
    if not kinds or "optimizer" not in flat or any(k not in ("optimizer", "scheduler", "loader") for k in flat):
        return
    if "loader" in flat and any(models for _, _, models in optimizers(program)):
        return  # the optimizer's own models are known: `_optimizers_and_models` names the one left out
    if any(models and program.is_prepared(name) for name, _, models in optimizers(program)):
        return  # likewise: a prepared optimizer whose models are known is named with them (SR-GNN's `self`)
    prepare, _ = kinds[0]
    yield pair.at_after(
        CODE, prepare.call,
        "left as written: the optimizer would be prepared without the model it updates, which is "
        "prepared nowhere in this file (built elsewhere, or kept where the migration does not "
        "follow, such as a dict of models), so N processes would train N unsynchronised copies; "
        "prepare the model and its optimizer together where both exist",
    )


def optimizers(program: Program) -> Iterator[tuple[str, ast.Call, set[str]]]:
    """(optimizer name, its constructor call, the models whose parameters it updates)."""
    for a in program.assigns:
        if not isinstance(a.value, ast.Call) or "sched" in last(a.target).lower():
            continue
        if last(call_name(a.value)) == "prepare":
            continue
        if is_optimizer_call(a.value):
            yield a.target, a.value, parameter_owners(a.value, program)
        elif "optim" in last(a.target).lower():  # a factory: construct_class_by_name(params=net.parameters())
            owners = parameter_owners(a.value, program)
            if owners:
                yield a.target, a.value, owners


def _optimizers_and_models(pair: Pair) -> Iterator[Problem]:
    program = pair.after
    for name, call, models in optimizers(program):
        steps = any(_steps(c, name) for c in program.calls)
        optimizer_prepared = program.is_prepared(name)
        unprepared = sorted(
            m for m in models if not program.is_prepared(m) and not _raw_alias(program, m) and not _part_of_prepared(program, m)
        )
        if optimizer_prepared and unprepared == ["self"]:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{name}` is built inside the model's own class over `self.parameters()`, and a "
                "model cannot be prepared from inside itself: prepare the model where it is made, together with "
                f"the optimizer it holds (`model, model.{last(name)} = accelerator.prepare(model, model.{last(name)})`)"
                + _methods_beside_forward(program, call, last(name)),
            )
        elif optimizer_prepared and unprepared:
            yield pair.at_after(
                CODE, call,
                f"left as written: `{name}` would be prepared but not the model "
                f"`{unprepared[0]}` whose parameters it updates, so N processes would train "
                "N unsynchronised copies; prepare them in one call",
            )
        elif steps and not optimizer_prepared and any(program.is_prepared(m) for m in models):
            yield pair.at_after(
                CODE, call,
                f"left as written: the model would be prepared but not `{name}`, the optimizer "
                "that updates it (no loss scaling, accumulation or scheduler stepping); prepare them in one call",
            )


def _methods_beside_forward(program: Program, call: ast.Call, optimizer: str) -> str:
    """What the recipe above breaks, said with it: the class's own methods besides
    `forward`, and its attributes, that this file reads on an instance of it (SR-GNN's
    `model.compute_scores(...)` and `model.loss_function` in functions handed the model).
    On the prepared model, a DDP wrapper, they raise AttributeError; a method called on
    the unwrapped module during training gets no gradient synchronisation. `optimizer`:
    the attribute the recipe sets on the wrapper itself, which reads back."""
    owner = next(
        (c for c in ast.walk(program.tree) if isinstance(c, ast.ClassDef) and any(n is call for n in ast.walk(c))), None
    )
    if owner is None:
        return ""
    inside = {id(n) for n in ast.walk(owner)}
    methods = {m.name for m in owner.body if isinstance(m, ast.FunctionDef) and m.name != "forward" and not m.name.startswith("__")}
    steps = {  # a method that takes the step itself (`agent.update(...)`) is AM224's: not a part of forward
        m.name for m in owner.body if isinstance(m, ast.FunctionDef) and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("backward", "step")
            for n in ast.walk(m)
        )
    }
    kept = {
        t.attr for n in ast.walk(owner) if isinstance(n, ast.Assign) for t in n.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    read = sorted({
        n.attr for n in ast.walk(program.tree)
        if isinstance(n, ast.Attribute) and id(n) not in inside and n.attr in (methods - steps) | kept
        and not (isinstance(n.value, ast.Name) and n.value.id == "self")
    })
    read = [r for r in read if r != optimizer]  # the recipe sets the prepared optimizer on the wrapper itself
    if not read:
        return ""

    def shown(names: list[str]) -> str:
        return ", ".join(f"`{m}`" for m in names[:4]) + (", ..." if len(names) > 4 else "")

    called = [r for r in read if r in methods]
    kept_read = [r for r in read if r not in methods]
    parts = []
    if called:  # reader R1: "through unwrap_model" read as fit for a method that trains, which it is not
        parts.append(
            f"of its methods this file calls ({shown(called)}), those computing what the loss trains belong inside "
            "the model's forward (called on the unwrapped module their gradients are not synchronised, and with "
            "`find_unused_parameters` the backward fails), the others (sampling, keeping data, evaluation under "
            "`torch.no_grad()`) go through `accelerator.unwrap_model(model)`"
        )
    if kept_read:
        parts.append(f"its attributes ({shown(kept_read)}) are read through `accelerator.unwrap_model(model)`")
    return "; then the model is a DDP wrapper: " + "; ".join(parts)


def _part_of_prepared(program: Program, name: str) -> bool:
    """`model.aux_classifier` of a prepared `model`: its parameters are the wrapped model's."""
    parts = name.split(".")
    return any(program.is_prepared(".".join(parts[:i])) for i in range(1, len(parts)) if ".".join(parts[:i]) != "self")


def _steps(call: ast.Call, optimizer: str) -> bool:
    """`optimizer.step()`, or a GradScaler's `scaler.step(optimizer)`."""
    name = call_name(call)
    if name == f"{optimizer}.step":
        return True
    return last(name) == "step" and any(dotted(a) == optimizer for a in call.args[:1])


def _raw_alias(program: Program, name: str) -> bool:
    """`model_without_ddp = model`, then `model_without_ddp = accelerator.unwrap_model(model)`
    (or `model.module`) with `model` prepared: every value names the prepared module itself,
    whose parameters prepare() keeps (it wraps that same object)."""
    values = program.values_of(name)

    def plain(value: ast.AST) -> str | None:
        if isinstance(value, ast.Call) and last(call_name(value)) == "unwrap_model" and len(value.args) == 1:
            value = value.args[0]
        elif isinstance(value, ast.Attribute) and value.attr == "module":
            value = value.value
        return dotted(value)

    sources = {plain(v) for v in values}
    return bool(values) and None not in sources and all(s != name and program.is_prepared(s) for s in sources)


def _training_loaders(pair: Pair) -> Iterator[Problem]:
    """A loop that trains (calls backward, directly or through a function of this
    module) must draw from a prepared loader, else every rank reads the whole data set."""
    program = pair.after
    trainers = _functions_that_backward(program)
    for loop in (n for n in program.nodes if isinstance(n, (ast.For, ast.AsyncFor))):
        name = program.drawn_from(loop)
        if name is None and _trains(loop, trainers):
            yield from _drawn_from_a_container(pair, loop)
        if name is None or not _trains(loop, trainers):
            continue
        if not program.is_loader(name) and not _named_as_loader(program, name):
            continue
        if not _prepared_here(program, name, loop) and not _handed_sharded(pair, name, loop):
            yield pair.at_after(
                CODE, loop.iter,
                f"left as written: the training loop draws from `{name}`, which would not be "
                "prepared, so every process would read the whole data set; prepare it with the model",
            )


def _handed_sharded(pair: Pair, name: str, loop: ast.AST) -> bool:
    """`name` comes from another file's builder that shards it already: bound here to
    its call, or a parameter of the loop's function that callers in other files hand such
    a loader (lufficc/SSD's `do_train(..., data_loader, ...)`): this process's share,
    kept out of prepare()."""
    function = pair.after.scope_of.get(loop)
    params = {a.arg for a in getattr(getattr(function, "args", None), "args", [])}
    return name in params and name in pair.sharded_params or name in _sharded_names(pair)


def _drawn_from_a_container(pair: Pair, loop: ast.For | ast.AsyncFor) -> Iterator[Problem]:
    """`for x, y in dataloaders[phase]:` (the transfer-learning tutorial's dict of loaders,
    pytorch-3dunet's `self.loaders["train"]`): the migration does not take containers
    apart, so the loader the training loop reads would not be prepared, and every process
    would train on all of it, with nothing written to say so."""
    expr = loop.iter
    while isinstance(expr, ast.Call) and last(call_name(expr)) in _NOT_PREPARABLE and expr.args:
        expr = expr.args[0]
    if not isinstance(expr, ast.Subscript):
        return
    holder = dotted(expr.value)
    if holder is None or not _holds_loaders(pair.after, holder):
        return
    spelling = ast.unparse(expr)
    yield pair.at_after(
        CODE, loop.iter,
        f"left as written: the training loop draws from `{spelling}`, a loader kept in a container the migration "
        f"does not take apart, so it would not be prepared and every process would read the whole data set; "
        f"prepare the training loader with the model where the container is built (`{spelling} = "
        f"accelerator.prepare({spelling})`); a validation loader prepared too gives each process its share, so its "
        f"metrics (and what they decide: a scheduler, an early stop, the best checkpoint) must be gathered first",
    )


def _holds_loaders(program: Program, holder: str) -> bool:
    """A container named for loaders (`dataloaders`, `self.loaders`), or built from
    `DataLoader(...)` calls, that no prepare() call fills."""
    values = program.values_of(holder)
    if any(isinstance(n, ast.Call) and last(call_name(n)) == "prepare" for v in values for n in ast.walk(v)):
        return False
    if "loader" in last(holder).lower():
        return True
    return any(isinstance(n, ast.Call) and last(call_name(n)).endswith("DataLoader") for v in values for n in ast.walk(v))


def _named_as_loader(program: Program, name: str) -> bool:
    """`self.train_loader` handed to a class by another file: no `DataLoader(...)` here
    says what it is, but its name does (and a training loop draws from it)."""
    word = last(name).lower()
    return "loader" in word and program.kind_of(name) == "loader"


def _functions_that_backward(program: Program) -> set[str]:
    names: set[str] = set()
    for fname, defs in program.functions.items():
        if any(_has_backward(d) for d in defs):
            names.add(fname)
    return names


def _has_backward(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
        for n in ast.walk(node)
    )


def _trains(loop: ast.AST, trainers: set[str]) -> bool:
    body = ast.Module(body=loop.body, type_ignores=[])
    if _has_backward(body):
        return True
    return any(isinstance(n, ast.Call) and last(call_name(n)) in trainers for n in ast.walk(body))


def _prepared_here(program: Program, name: str, loop: ast.AST) -> bool:
    """`name` is prepared, or is a parameter that every caller feeds a prepared name."""
    return fed_prepared(program, name, program.scope_of.get(loop))


def _unpreparable(pair: Pair) -> Iterator[Problem]:
    program = pair.after
    for prepare in program.prepares:
        for arg, node in zip(prepare.args, prepare.call.args):
            values = _values_reaching(program, arg, prepare) if arg else [node]
            for value in values:
                if isinstance(value, ast.IfExp) and any(
                    isinstance(v, ast.Constant) and v.value is None for v in (value.body, value.orelse)
                ):
                    yield pair.at_after(
                        CODE, node,
                        f"left as written: `{arg}` may be None (`... if {ast.unparse(value.test)} else None`), "
                        "and prepare() takes no None; prepare it only where it exists",
                    )
                    break
                if isinstance(value, ast.Call) and last(call_name(value)) == "ReduceLROnPlateau":
                    yield pair.at_after(
                        CODE, node,
                        f"left as written: `{arg}` is a ReduceLROnPlateau stepped by a metric; prepared, it "
                        "steps once per process for each metric and lowers the rate too early; keep it out "
                        "of prepare() and step it with a metric reduced over the processes",
                    )
                    break
                if isinstance(value, ast.Call) and last(call_name(value)) in _NOT_PREPARABLE:
                    yield pair.at_after(
                        CODE, node,
                        f"left as written: `{ast.unparse(node)}` is a `{last(call_name(value))}(...)` object, "
                        "not a DataLoader; prepare the loader it wraps instead",
                    )


def _values_reaching(program: Program, name: str, prepare) -> list[ast.AST]:
    """The values `name` may hold at the prepare: bound in its scope above it, or anywhere
    when it is bound in no scope of its own (a function's own `loader = tqdm(loader)` is
    another variable)."""
    mine = [
        a.value for a in program.assigns
        if a.value is not None and a.target == name and a.scope is prepare.scope
        and getattr(a.node, "lineno", 0) <= prepare.call.lineno
    ]
    return mine or program.values_of(name)
