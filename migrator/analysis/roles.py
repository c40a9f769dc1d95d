"""Which names are the model(s), optimizer(s), dataloader(s) and scheduler(s).

Decided by construction (what a name is assigned from) and by use (whose parameters feed
an optimizer, what a training loop iterates, what `.zero_grad()` is called on). Names are
tracked by their dotted text, so `self.model` works like `model`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Callable

import libcst as cst

from migrator.analysis.collect import Binding, Facts, target_names
from migrator.analysis.loop import local_callee
from migrator.analysis.names import ImportTable, dotted_name
from migrator.analysis.walk import descendants, walk


class Role(enum.Enum):
    MODEL = "model"
    OPTIMIZER = "optimizer"
    DATALOADER = "dataloader"
    SCHEDULER = "scheduler"


_MODEL_FACTORIES = ("torchvision.models.", "timm.create_model", "transformers.")
_EXTRA_OPTIMIZERS = {"AdamW", "Adafactor", "Lion", "LAMB", "Lamb", "AdamW8bit", "Adam8bit", "SGD"}
_SCHEDULER_FACTORY = re.compile(r"^get_(\w*_)?schedule(r)?(_\w*)?$")
# `build_optimizer(model, **kwargs)`, timm's `create_optimizer_v2(model, ...)`, `make_optimizer(cfg, net)`
_OPTIMIZER_FACTORY = re.compile(r"^(build|make|create|get|init|setup|configure)_optim(izer)?(_v\d+)?$")
_SWA = "torch.optim.swa_utils."
_PASSTHROUGH_METHODS = {"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval"}


def peel_moves(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`Net().to(device).cuda()` → `Net()`: what the value is before it was moved or cast."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _PASSTHROUGH_METHODS
    ):
        expr = expr.func.value
    return expr


def module_classes(facts: Facts) -> set[str]:
    """Classes defined in this file that are (transitively) torch.nn.Module subclasses."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, cls in facts.classes.items():
            if name in found:
                continue
            for base in cls.bases:
                qualified = facts.imports.qualify(base.value) or ""
                local = dotted_name(base.value) or ""
                if qualified.startswith("torch.nn.") or local in found:
                    found.add(name)
                    changed = True
                    break
    return found


def _given_an_optimizer(call: cst.Call) -> bool:
    """A learning-rate schedule is built on the optimizer it steps (a noise schedule,
    `get_beta_schedule(beta_schedule=..., beta_start=...)`, on no optimizer)."""
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else ""
        name = (dotted_name(arg.value) or "").rpartition(".")[2].lower()
        if "optim" in keyword.lower() or "optim" in name or name == "opt" or name.startswith("opt_") or name.endswith("_opt"):
            return True
    return False


def role_of_value(
    value: cst.BaseExpression | None, imports: ImportTable, local_models: set[str]
) -> Role | None:
    """The role a freshly constructed value plays, from its constructor alone."""
    if value is None:
        return None
    value = peel_moves(value)
    if not isinstance(value, cst.Call):
        return None
    func = dotted_name(value.func) or ""
    qualified = imports.qualify(value.func) or func
    last = qualified.split(".")[-1]
    if qualified.startswith("torch.optim.lr_scheduler.") or qualified == _SWA + "SWALR":
        return Role.SCHEDULER
    if _SCHEDULER_FACTORY.match(last) and _given_an_optimizer(value):
        return Role.SCHEDULER  # `get_linear_schedule_with_warmup(optimizer, ...)`, not ddim's `get_beta_schedule(...)`
    if qualified == _SWA + "AveragedModel":  # an EMA or SWA copy of a model: a module, no optimizer
        return Role.MODEL
    if qualified.startswith("torch.optim.") and last[:1].isupper():
        return Role.OPTIMIZER
    if last in _EXTRA_OPTIMIZERS and not qualified.startswith("torch."):
        return Role.OPTIMIZER
    if last == "DataLoader":
        return Role.DATALOADER
    if func in local_models:
        return Role.MODEL
    if qualified.startswith("torch.nn.") and last[:1].isupper():
        excluded = ("torch.nn.utils", "torch.nn.functional", "torch.nn.parallel", "torch.nn.parameter")
        # torch's losses hold no parameters (`AdaptiveLogSoftmaxWithLoss` does: a model)
        a_loss = last.endswith("Loss") and not last.endswith("WithLoss")
        if not qualified.startswith(excluded) and last not in {"DataParallel", "Parameter"} and not a_loss:
            return Role.MODEL
    if qualified.startswith(_MODEL_FACTORIES) and (
        last == "from_pretrained" or last == "create_model" or qualified.startswith("torchvision")
    ) and not qualified.split(".")[-2 if last == "from_pretrained" else -1].endswith(_NOT_MODELS):
        return Role.MODEL
    return None


# Classes that keep an average copy of a model (ModelEma, ModelEmaV2, EMA, ema_copy; not `remap_model`)
EMA_CLASS = re.compile(r"EMA|Ema|^ema")
# What a library's `from_pretrained` loads besides models (`BertConfig`, `AutoTokenizer`).
_NOT_MODELS = ("Config", "Tokenizer", "TokenizerFast", "Processor", "FeatureExtractor", "ImageProcessor")


def parameter_owners(call: cst.Call, facts: Facts | None = None) -> list[str]:
    """Names whose `.parameters()` feed this optimizer call: `SGD(model.parameters())`,
    and, given the facts, through names bound on the way (`params = list(
    model.named_parameters())`, then parameter groups built from `params`: the Hugging
    Face weight-decay idiom), and into lists filled with `append`/`extend` (the SSD
    tutorial's `biases.append(param)` in a loop over `model.named_parameters()`)."""
    owners: list[str] = []
    followed: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in {
                "parameters",
                "named_parameters",
            }:
                name = dotted_name(node.func.value)
                if name:
                    owners.append(name)

        def visit_Name(self, node: cst.Name) -> None:
            if facts is None or node.value in followed or len(followed) > 8:
                return
            followed.add(node.value)
            for b in facts.bindings:
                value = b.element if b.element is not None else b.value
                if b.name == node.value and value is not None:
                    walk(value, self)
                elif b.name == node.value and isinstance(b.statement, cst.For):  # `for name, p in model.named_parameters()`
                    walk(b.statement.iter, self)
            for c in facts.calls:  # `biases.append(param)` in a loop over `model.named_parameters()`
                func = c.node.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend") and dotted_name(func.value) == node.value:
                    for a in c.node.args:
                        walk(a.value, self)

    for arg in call.args:
        if arg.keyword is None or arg.keyword.value in {"params", "param_groups"}:
            walk(arg.value, _Find())
    # `self.parameters()`: a module building its own optimizer (SR-GNN's SessionGraph) is no
    # name the file can prepare from inside its own methods
    owners = [o for o in owners if o != "self"]
    return _forward_owners([m for o in owners for m in _iterated_modules(o, facts)], facts)


def _iterated_modules(owner: str, facts: Facts | None) -> list[str]:
    """`module` of `for module in modules_ori: groups.append(dict(params=module.parameters()))`
    with `modules_ori = [model.layer0, model.layer1]` (semseg): the modules it runs over."""
    if facts is None or "." in owner:
        return [owner]
    bound = [b for b in facts.bindings if b.name == owner]
    loops = [b.statement for b in bound if isinstance(b.statement, cst.For) and b.value is None]
    if not bound or len(loops) != len(bound):
        return [owner]
    out: list[str] = []
    for loop in loops:
        iterated = [loop.iter]
        if isinstance(loop.iter, cst.Name):
            iterated = [b.value for b in facts.bindings if b.name == loop.iter.value and b.value is not None]
        for value in iterated:
            if not isinstance(value, (cst.List, cst.Tuple)):
                return [owner]
            names = [dotted_name(e.value) for e in value.elements if isinstance(e, cst.Element)]
            if not names or not all(names):
                return [owner]
            out += names  # type: ignore[arg-type]
    return list(dict.fromkeys(out))


def _forward_owners(owners: list[str], facts: Facts | None) -> list[str]:
    """`model.backbone`, `model.classifier` (parameter groups with their own learning rates)
    stand for `model` when the file runs `model(...)`: the module whose forward trains is
    the one to prepare."""
    if facts is None:
        return owners
    called = {c.func for c in facts.calls if c.func}
    out: list[str] = []
    for owner in owners:
        parts = owner.split(".")
        start = 2 if parts[0] == "self" else 1
        root = next((".".join(parts[:i]) for i in range(start, len(parts)) if ".".join(parts[:i]) in called), None)
        out.append(root or owner)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class RoleTable:
    """name → role, decided once for the whole file."""

    roles: dict[str, Role]

    def of(self, name: str | None) -> Role | None:
        return self.roles.get(name) if name else None

    def names(self, role: Role) -> list[str]:
        return [n for n, r in self.roles.items() if r is role]


def assign_roles(
    facts: Facts, backward_loops: set[int], loader_calls: dict[str, tuple[int, ...]] | None = None,
    argument_roles: dict[str, dict[str, str]] | None = None, iterators: frozenset[str] = frozenset(),
) -> RoleTable:
    """Construction first, then use; a name keeps the first role it gets. `loader_calls`:
    calls of functions in other files of the run that return DataLoaders (the positions
    of the returned tuple that are loaders; -1: the value itself); `argument_roles`: calls
    of functions of other files of the run → position or parameter name → the role their
    body gives it (project/param_roles.py), for names nothing here gives one; `iterators`:
    parameters callers hand a batch iterator that is no DataLoader (project/iterators.py):
    never loaders, however a loop uses them."""
    local_models = module_classes(facts)
    roles: dict[str, Role] = {}
    for b in facts.bindings:
        role = role_of_value(b.element if b.element is not None else b.value, facts.imports, local_models)
        if role is None and b.element is None:
            role = _returned_loader(facts, b.value) or _loader_from_run(b, loader_calls or {})
        if role is not None and b.name not in roles:
            roles[b.name] = role
    _models_of_optimizers(facts, roles)
    for name in _wrapped_models(facts):
        roles.setdefault(name, Role.MODEL)
    _optimizers_from_factories(facts, roles)
    for name in _other_loader_classes(facts, roles):
        del roles[name]
    _roles_by_use(facts, roles, backward_loops)
    # an optimizer known by its use only (`optimizer = get_optimizer(cfg)(model.parameters())`,
    # then `optimizer.step()`) tells its model too
    _models_of_optimizers(facts, roles)
    if argument_roles:
        _roles_by_callee(facts, roles, argument_roles)
    for name in set(iterators) | own_batch_iterators(facts) | _served_by(facts, iterators):
        if roles.get(name) is Role.DATALOADER:
            del roles[name]
    for name in _parts_of_modules(facts, local_models):
        if roles.get(name) is Role.MODEL:
            del roles[name]
    return RoleTable(roles)


def _parts_of_modules(facts: Facts, local_models: set[str]) -> set[str]:
    """`self.embedding = nn.Embedding(...)` in a method of an nn.Module subclass of this
    file: a part of the model, which is the instance itself; prepare() takes the whole
    (SR-GNN's SessionGraph builds its layers, loss and optimizer in `__init__`). Not a
    part that an optimizer of its own trains."""
    inside, outside = set(), set()
    for b in facts.bindings:
        if not b.name.startswith("self.") or b.name.count(".") != 1:
            continue
        cls = facts.method_of.get(id(b.scope))
        (inside if cls is not None and cls.name.value in local_models else outside).add(b.name)
    # a part with an optimizer of its own is a model the class trains (MUNIT's trainer module
    # holds `self.gen_a`, `self.dis_a` and an optimizer over each)
    trained = {
        owner for c in facts.calls
        if (c.qualified or "").startswith("torch.optim.") and role_of_value(c.node, facts.imports, set()) is Role.OPTIMIZER
        for owner in parameter_owners(c.node, facts)
    }
    return inside - outside - trained


def _served_by(facts: Facts, iterators: frozenset[str]) -> set[str]:
    """Names bound to what a method of such an iterator hands out (SR-GNN's
    `slices = train_data.generate_batch(batch_size)`): its batches, no DataLoader either."""
    return {
        b.name for b in facts.bindings
        if iterators and b.element is None and isinstance(b.value, cst.Call) and isinstance(b.value.func, cst.Attribute)
        and dotted_name(b.value.func.value) in iterators
    }


def own_batch_iterators(facts: Facts) -> set[str]:
    """Names bound to an instance of a class of this file that serves batches itself
    (`__iter__` or `__next__`) and is no DataLoader, or to a library's batch iterator
    (library_batch_iterators): prepare() cannot take it."""
    classes = {
        name for name, cls in facts.classes.items()
        if not any((dotted_name(b.value) or "").endswith("DataLoader") for b in cls.bases)
        and any(isinstance(s, cst.FunctionDef) and s.name.value in ("__iter__", "__next__") for s in cls.body.body)
    }
    listed = _list_makers(facts)
    return set(library_batch_iterators(facts)) | {
        b.name for b in facts.bindings
        if b.element is None and isinstance(b.value, cst.Call) and (
            classes and dotted_name(b.value.func) in classes or local_callee(b.value.func) in listed
        )
    }


def _list_makers(facts: Facts) -> set[str]:
    """Functions (and methods) of this file, defined once, that hand back a plain list
    they build (SimGNN's `create_batches`: `batches = []`, slices appended, `return
    batches`; or `return [...]`): what they return is no DataLoader, whatever a loop over
    it trains on."""
    out = set()
    for name, functions in facts.functions.items():
        if len(functions) != 1:
            continue
        returns = [n.value for n in descendants(functions[0]) if isinstance(n, cst.Return)]
        if returns and all(_built_list(functions[0], value) for value in returns):
            out.add(name)
    return out


def _built_list(function: cst.FunctionDef, value: cst.BaseExpression | None) -> bool:
    """A list literal or comprehension, or a name bound only to one, holding no loader
    (`[train_loader, DataLoader(...)]` is a list of them; so is a list they are appended to)."""
    if isinstance(value, (cst.List, cst.ListComp)):
        return not _mentions_a_loader(value)
    if not isinstance(value, cst.Name):
        return False
    name = value.value
    bound, appended = [], []
    for n in descendants(function):
        if isinstance(n, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in n.targets):
            bound.append(n.value)
        elif isinstance(n, cst.Call) and dotted_name(n.func) in (f"{name}.append", f"{name}.extend"):
            appended.append(n)
    return (
        bool(bound) and all(isinstance(v, (cst.List, cst.ListComp)) and not _mentions_a_loader(v) for v in bound)
        and not any(_mentions_a_loader(call) for call in appended)
    )


def _mentions_a_loader(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Name) and "loader" in n.value.lower() for n in descendants(node))


# torchtext's (legacy) iterators batch a Dataset of their own kind and shuffle with their own state
_LIBRARY_ITERATORS = ("BucketIterator", "BPTTIterator", "Iterator")
_TORCHTEXT_MODULES = ("torchtext.data", "torchtext.legacy.data", "torchtext.data.iterator", "torchtext.legacy.data.iterator")


def library_batch_iterator(qualified: str) -> bool:
    """`torchtext.data.BucketIterator`, or its `.splits` (a tuple of them), by qualified name."""
    module, _, name = qualified.removesuffix(".splits").rpartition(".")
    return name in _LIBRARY_ITERATORS and module in _TORCHTEXT_MODULES


def library_batch_iterators(facts: Facts) -> dict[str, tuple[str, str]]:
    """Names bound to torchtext's `BucketIterator(...)` (also as `BucketIterator.splits(...)`
    unpacks them), or to what one hands out (`batch_iterator.__iter__()`): name -> (the
    iterator's name, its class). No DataLoader: prepare() cannot take it, nor split what
    it serves."""
    out = {}
    for b in facts.bindings:
        if isinstance(b.value, cst.Call):
            qualified = facts.imports.qualify(b.value.func) or ""
            if library_batch_iterator(qualified):
                out[b.name] = (b.name, qualified.removesuffix(".splits"))
    for b in facts.bindings:
        value = b.value
        if out and b.element is None and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in ("__iter__", "create_batches") and dotted_name(value.func.value) in out:
            out[b.name] = out[dotted_name(value.func.value)]
    return out


def _optimizers_from_factories(facts: Facts, roles: dict[str, Role]) -> None:
    """`optimizer = torchreid.optim.build_optimizer(model, **kwargs)`: a call named for
    building an optimizer, handed a model or its parameters, returns one. The name alone
    is not enough (`get_optimizer(cfg)` may return the class to call)."""
    for b in facts.bindings:
        value = b.value
        if b.element is not None or b.name in roles or not isinstance(value, cst.Call):
            continue
        last = (dotted_name(value.func) or "").rsplit(".", 1)[-1]
        if not _OPTIMIZER_FACTORY.match(last):
            continue
        handed = [dotted_name(peel_moves(a.value)) for a in value.args]
        if any(roles.get(n or "") is Role.MODEL for n in handed) or parameter_owners(value, facts):
            roles[b.name] = Role.OPTIMIZER


def _models_of_optimizers(facts: Facts, roles: dict[str, Role]) -> None:
    """The names whose parameters an optimizer is built on are models, the optimizer bound
    to a name or built inside another call (Speech-Transformer's `TransformerOptimizer(
    torch.optim.Adam(model.parameters(), ...), ...)`, a wrapper of the project's)."""
    for b in facts.bindings:
        value = b.element if b.element is not None else b.value
        if roles.get(b.name) is Role.OPTIMIZER and isinstance(value, cst.Call):
            for owner in parameter_owners(value, facts):
                roles.setdefault(owner, Role.MODEL)
    for c in facts.calls:
        if (c.qualified or "").startswith("torch.optim.") and role_of_value(c.node, facts.imports, set()) is Role.OPTIMIZER:
            for owner in parameter_owners(c.node, facts):
                if owner != "self":
                    roles.setdefault(owner, Role.MODEL)


def _roles_by_callee(facts: Facts, roles: dict[str, Role], argument_roles: dict[str, dict[str, str]]) -> None:
    """`simclr_train(train_loader, model, criterion, optimizer, epoch)` of another file
    zeroes the gradients of its `optimizer` and puts its `model` in train mode: the names
    handed there are those roles, when this file gives them none."""
    given: dict[str, set[Role]] = {}
    for c in facts.calls:
        keys = argument_roles.get(c.func or "")
        if not keys:
            continue
        for i, arg in enumerate(c.node.args):
            if arg.star:
                break
            key = arg.keyword.value if arg.keyword is not None else str(i)
            name = dotted_name(arg.value)
            if name is not None and key in keys and name not in roles:
                given.setdefault(name, set()).add(Role(keys[key]))
    for name, found in given.items():
        if len(found) == 1:
            roles[name] = found.pop()


# what code calls on a torch DataLoader (or a subclass) besides iterating it
_LOADER_METHODS = {"__iter__", "__len__", "check_worker_number_rationality", "set_epoch", "state_dict", "load_state_dict"}


def _other_loader_classes(facts: Facts, roles: dict[str, Role]) -> list[str]:
    """`data_loader = DataLoader(data_dir, params)` from a project's own module, then
    `data_loader.load_data(...)`: a class that shares the name but not the API (prepare()
    cannot take it). Known by a method torch's DataLoader does not have."""
    out = []
    for name, role in roles.items():
        if role is not Role.DATALOADER:
            continue
        built = [b for b in facts.bindings if b.name == name and isinstance(b.value, cst.Call)]
        if not built or any((facts.imports.qualify(b.value.func) or "").startswith("torch.") for b in built):
            continue
        for c in facts.calls:
            func = c.node.func
            if isinstance(func, cst.Attribute) and dotted_name(func.value) == name and func.attr.value not in _LOADER_METHODS:
                out.append(name)
                break
    return out


_DISTRIBUTED_WRAPS = {"DistributedDataParallel", "DataParallel"}


def _wrapped_models(facts: Facts) -> list[str]:
    """`self.model = DDP(self.model, device_ids=[...])`, `self.model = DDP(model.to(gpu))`:
    what a script wraps for distribution by hand is a model, whatever it was built from."""
    out = []
    for b in facts.bindings:
        value = peel_moves(b.value) if b.value is not None else None  # `nn.DataParallel(model).cuda()`
        if b.element is None and isinstance(value, cst.Call) and value.args:
            last = (facts.imports.qualify(value.func) or dotted_name(value.func) or "").rsplit(".", 1)[-1]
            if last in _DISTRIBUTED_WRAPS and not _a_loss(facts, b.name):  # `self.model = DDP(model.to(gpu), ...)` too
                out.append(b.name)
    return out


def _a_loss(facts: Facts, name: str) -> bool:
    """`self.criterion = nn.NLLLoss(weight=w)`, spread with its batch by `nn.DataParallel(
    self.criterion)` (Bonnetal): a loss with no parameters, not a model to prepare."""
    built = [
        peel_moves(b.value) for b in facts.bindings
        if b.name == name and b.element is None and isinstance(peel_moves(b.value), cst.Call)
    ]
    return any((facts.imports.qualify(v.func) or "").endswith("Loss") for v in built)


def _roles_by_use(facts: Facts, roles: dict[str, Role], backward_loops: set[int]) -> None:
    zero_grad = {
        dotted_name(c.node.func.value)
        for c in facts.calls
        if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "zero_grad"
    }
    for name in zero_grad:
        if name and name not in roles and not name.endswith(("model", "net")) and not _drawn_from_collection(facts, name):
            if not _wraps_an_optimizer(facts, name, roles):
                roles[name] = Role.OPTIMIZER
    _models_built_with_optimizers(facts, roles)
    for loop in facts.loops:
        if loop.iter_name and loop.iter_name not in roles and id(loop.node) in backward_loops:
            if not _counts_epochs(facts, loop.iter_name) and not _a_tensor(facts, loop.iter_name):
                roles[loop.iter_name] = Role.DATALOADER
    for name in _loops_through_training_calls(facts):
        roles.setdefault(name, Role.DATALOADER)
    for name in _drawn_with_next(facts, backward_loops):
        roles.setdefault(name, Role.DATALOADER)
    for loop in facts.loops:
        name = loop.iter_name
        if name and name not in roles and re.search(r"(loader|_dl$|^dl_|^dl$)", name):
            roles[name] = Role.DATALOADER
    _roles_through_calls(facts, roles)


_COUNTERS = {"range", "trange", "tqdm.trange", "tqdm.auto.trange", "itertools.count", "count"}


def _counts_epochs(facts: Facts, name: str) -> bool:
    """`train_iterator = trange(int(args.num_train_epochs), desc="Epoch")` (the Hugging Face
    examples' epoch bar): a count, not data, whatever loop it drives."""
    values = [b.value for b in facts.bindings if b.name == name]
    if not values:
        return False
    for value in values:
        while isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] in ("tqdm", "enumerate") and value.args:
            value = value.args[0].value
        callee = facts.imports.qualify(value.func) or dotted_name(value.func) if isinstance(value, cst.Call) else None
        if callee not in _COUNTERS:
            return False
    return True


# torch's functions that make a tensor: a loop over one goes through its first dimension
TENSOR_MAKERS = {
    "torch.randn", "torch.rand", "torch.randint", "torch.tensor", "torch.zeros", "torch.ones", "torch.arange",
    "torch.linspace", "torch.empty", "torch.full", "torch.from_numpy", "torch.as_tensor", "torch.stack", "torch.cat",
}


def _a_tensor(facts: Facts, name: str) -> bool:
    """`data = torch.randn(8, 2, 4)`, then `for x in data:`: a tensor, which prepare() does
    not take (it would stop with a TypeError), not a loader."""
    values = [b.value for b in facts.bindings if b.name == name]
    return bool(values) and all(
        isinstance(v, cst.Call) and facts.imports.qualify(v.func) in TENSOR_MAKERS for v in (peel_moves(v) for v in values)
    )


def _drawn_with_next(facts: Facts, backward_loops: set[int]) -> list[str]:
    """`data_iter = iter(self.data_loader)`, then `next(data_iter)` in a loop that trains
    (`for step in range(total_step)`, a GAN's trainer restarting the iterator when it runs
    out): what the iterator is made from is the training data, a loader."""
    iterators = {
        b.name: dotted_name(b.value.args[0].value) for b in facts.bindings
        if b.element is None and isinstance(b.value, cst.Call) and dotted_name(b.value.func) == "iter" and len(b.value.args) == 1
    }
    out = []
    for c in facts.calls:
        if c.func != "next" or not c.node.args or not any(id(loop) in backward_loops for loop in c.loops):
            continue
        source = iterators.get(dotted_name(c.node.args[0].value) or "")
        if source and source not in out:
            out.append(source)
    return out


_MODULE_METHODS = {"parameters", "named_parameters", "train", "eval", "to", "cuda", "state_dict", "load_state_dict"}


def _models_built_with_optimizers(facts: Facts, roles: dict[str, Role]) -> None:
    """`model, optimizer = build(lr)`, whatever `build` calls them inside: a name handed
    out with an optimizer by one call and run as a module (`model(x)`, `model.train()`,
    `model.parameters()`) is a model. Without it, only the optimizer was prepared."""
    for b in facts.bindings:
        if roles.get(b.name) is not Role.OPTIMIZER or b.element is not None or not isinstance(b.value, cst.Call):
            continue
        for other in facts.bindings:
            if other.statement is not b.statement or other is b or other.value is not b.value or other.name in roles:
                continue
            if any(_runs_as_module(c.node, other.name) for c in facts.calls):
                roles[other.name] = Role.MODEL


def _runs_as_module(call: cst.Call, name: str) -> bool:
    func = call.func
    if dotted_name(func) == name:
        return True
    return isinstance(func, cst.Attribute) and func.attr.value in _MODULE_METHODS and dotted_name(func.value) == name


def _wraps_an_optimizer(facts: Facts, name: str, roles: dict[str, Role]) -> bool:
    """`self.optim_schedule = ScheduledOptim(self.optim, ...)`, then `self.optim_schedule.zero_grad()`:
    an object built around an optimizer of the file forwards to it; the optimizer is what
    prepare() takes (BERT-pytorch: prepare() refuses the wrapper, reader R2)."""
    built = [b.value for b in facts.bindings if b.name == name and b.element is None]
    return bool(built) and all(
        isinstance(v, cst.Call) and any(
            roles.get(dotted_name(a.value) or "") is Role.OPTIMIZER
            or role_of_value(a.value, facts.imports, set()) is Role.OPTIMIZER  # `Wrapper(torch.optim.Adam(...), ...)`
            for a in v.args
        ) and not _prepares(v)
        for v in built
    )


def _prepares(call: cst.Call) -> bool:
    """`accelerator.prepare(torch.optim.SGD(...))`: the Accelerator's prepare, no wrapper."""
    return (dotted_name(call.func) or "").rsplit(".", 1)[-1] in ("prepare", "prepare_optimizer")


def _drawn_from_collection(facts: Facts, name: str) -> bool:
    """`for optim in self.optims.values(): optim.zero_grad()`: a name bound only as the
    target of loops is one element of a collection at a time, not an object the set-up
    builds (and could prepare)."""
    bindings = [b for b in facts.bindings if b.name == name]
    return bool(bindings) and all(isinstance(b.statement, cst.For) and b.value is None for b in bindings)


def optimizer_containers(facts: Facts, parent: Callable[[cst.CSTNode], cst.CSTNode | None]) -> list[str]:
    """Containers that hold the optimizers a script builds: `self.optims[net] = torch.optim.Adam(...)`,
    `optimizers = {"g": Adam(...), "d": Adam(...)}`, `[SGD(...) for m in models]`, a wrapper
    of the project's built around one (`ScheduledOptim(torch.optim.Adam(...), ...)`, which
    prepare() refuses). The migration prepares named objects only; these are the user's to
    prepare one by one."""
    out: list[str] = []
    for c in facts.calls:
        if role_of_value(c.node, facts.imports, set()) is not Role.OPTIMIZER:
            continue
        node: cst.CSTNode | None = c.node
        up = parent(node)
        while isinstance(up, (cst.DictElement, cst.Element, cst.Dict, cst.List, cst.Tuple, cst.DictComp, cst.ListComp)) or (
            isinstance(up, cst.Arg) and isinstance(parent(up), cst.Call) and dotted_name(parent(up).func) in ("dict", "list", "tuple")
        ):
            node, up = (parent(up), parent(parent(up))) if isinstance(up, cst.Arg) else (up, parent(up))
        if node is c.node and isinstance(up, cst.Arg) and isinstance(parent(up), cst.Call) and not _prepares(parent(up)):
            # `optimizer = ScheduledOptim(torch.optim.Adam(...), ...)`: a wrapper of the project's holds it
            node, up = parent(up), parent(parent(up))
        if isinstance(up, cst.Assign) and node is not c.node:
            names = [dotted_name(t.target) for t in up.targets]
        elif isinstance(up, cst.Assign):
            names = [dotted_name(t.target.value) for t in up.targets if isinstance(t.target, cst.Subscript)]
        else:
            names = []
        out += [n for n in names if n and n not in out]
    return out


def _returned_loader(facts: Facts, value: cst.BaseExpression | None) -> Role | None:
    """`self.train_loader = self._prepare_dataloader(train_set)`: a function (or method)
    of this file whose every `return` builds a DataLoader hands out a loader. Its name says
    nothing (a `prepare_dataloader` helper is not the Accelerator's prepare)."""
    callee = local_callee(value.func) if isinstance(value, cst.Call) else None
    defs = facts.functions.get(callee or "", [])
    if len(defs) != 1:
        return None
    returns = returned_values(defs[0])
    if returns and all(role_of_value(r, facts.imports, set()) is Role.DATALOADER for r in returns):
        return Role.DATALOADER
    return None


def _loader_from_run(b: Binding, loader_calls: dict[str, tuple[int, ...]]) -> Role | None:
    """`train_dl, test_dl, classes = data_setup.create_dataloaders(...)`, the function in
    another file of the run building the loaders it returns at these positions."""
    positions = loader_calls.get(dotted_name(b.value.func) or "") if isinstance(b.value, cst.Call) else None
    if not positions:
        return None
    for small in getattr(b.statement, "body", ()):
        if isinstance(small, cst.Assign) and small.value is b.value:
            for target in small.targets:
                for _, node, index in target_names(target.target):
                    if node is b.target and (index if index is not None else -1) in positions:
                        return Role.DATALOADER
    return None


def returned_values(function: cst.FunctionDef) -> list[cst.BaseExpression | None]:
    """What each `return` of `function` itself (not of a function nested in it) gives."""
    found: list[cst.BaseExpression | None] = []

    class _Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node.value)

    walk(function.body, _Find())
    return found


def _loops_through_training_calls(facts: Facts) -> list[str]:
    """`for x, y in self.train_data: self._run_batch(x, y)` where `_run_batch` calls
    backward: the innermost loop hands what it draws to a method (or function) of this
    file that trains, so what it iterates is a training loader."""
    from migrator.analysis.loop import training_functions

    trains = training_functions(facts, methods=True)
    out = []
    loops = {id(loop.node): loop for loop in facts.loops}
    for c in facts.calls:
        if local_callee(c.node.func) not in trains or not c.loops:
            continue
        loop = loops.get(id(c.loops[-1]))  # the innermost loop, handing its batch to the call
        passed = {dotted_name(peel_moves(arg.value)) for arg in c.node.args}  # `x` of `x.to(gpu)` too
        if loop is not None and loop.iter_name and passed & set(loop.targets) and loop.iter_name not in out:
            out.append(loop.iter_name)
    return out


def _roles_through_calls(facts: Facts, roles: dict[str, Role]) -> None:
    """`train_epoch(train_dataloader, encoder, ...)` where `train_epoch`'s first parameter
    is a loader: the name passed in is one too (one hop, positional and keyword). And the
    other way: `save(model)` makes `net` of `def save(net)` a model, where nothing else
    gave it a role."""
    for c in facts.calls:
        func = c.node.func
        defs = facts.functions.get(func.value, []) if isinstance(func, cst.Name) else []
        if len(defs) != 1:
            continue
        params = facts.params.get(id(defs[0]), ())
        for i, arg in enumerate(c.node.args):
            name = dotted_name(arg.value)
            param = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) and arg.star == "" else None)
            if name and param and name not in roles and roles.get(param) in (Role.DATALOADER, Role.MODEL):
                roles[name] = roles[param]
            elif name and param and param not in roles and roles.get(name) is Role.MODEL and param in params:
                roles[param] = Role.MODEL


def bindings_of(facts: Facts, name: str) -> list[Binding]:
    return [b for b in facts.bindings if b.name == name]
