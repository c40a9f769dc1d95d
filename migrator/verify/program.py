"""Facts about one program text, read with the standard `ast`: scopes, bindings, calls,
loops, prepare() calls and which names hold a DataLoader.

The verifier's own reading, deliberately independent of migrator/analysis (which the
rules share): a bug there must not hide itself here. Nothing here judges anything.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Iterator

Scope = ast.AST  # ast.Module, ast.FunctionDef, ast.AsyncFunctionDef or ast.Lambda

_OPTIMIZER_WORDS = ("optim.", "Optimizer", "AdamW", "Adam", "SGD", "RMSprop", "Adagrad", "Adafactor", "LBFGS", "Lion")
_SCHEDULER_WORDS = ("lr_scheduler", "Scheduler", "_schedule", "LR(")
_ITER_WRAPPERS = {"enumerate", "tqdm", "trange", "iter", "zip", "islice", "Bar"}


def dotted(node: ast.AST | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def call_name(call: ast.Call) -> str:
    """The callee as written, e.g. `torch.optim.SGD`, or '' when it is not a plain chain."""
    return dotted(call.func) or ""


def iterated(expr: ast.AST) -> str | None:
    """The name a for-loop draws from, through enumerate()/tqdm()/zip()/iter()."""
    while isinstance(expr, ast.Call) and last(call_name(expr)) in _ITER_WRAPPERS and expr.args:
        expr = expr.args[0]
    return dotted(expr)


@dataclass(frozen=True, eq=False)
class Assign:
    """`target = value`, one per name target (tuples unpacked element-wise)."""

    target: str
    value: ast.AST | None
    node: ast.AST
    scope: Scope


@dataclass(frozen=True, eq=False)
class Prepare:
    """`targets = <accelerator>.prepare(args)`."""

    call: ast.Call
    args: tuple[str | None, ...]
    targets: tuple[str | None, ...]
    scope: Scope


@dataclass
class Program:
    """The facts of one module text."""

    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    scope_of: dict[ast.AST, Scope] = field(default_factory=dict)
    assigns: list[Assign] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)
    functions: dict[str, list[ast.AST]] = field(default_factory=dict)
    classes: dict[str, list[ast.ClassDef]] = field(default_factory=dict)
    prepares: list[Prepare] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> "Program | None":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
        program = cls(tree)
        program._index(tree, tree)
        program.prepares = list(program._prepares())
        return program

    def _index(self, node: ast.AST, scope: Scope) -> None:
        for child in ast.iter_child_nodes(node):
            self.parents[child] = node
            self.scope_of[child] = scope
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(child.name, []).append(child)
            elif isinstance(child, ast.ClassDef):
                self.classes.setdefault(child.name, []).append(child)
            elif isinstance(child, ast.Call):
                self.calls.append(child)
            elif isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                self._record_assign(child, scope)
            elif isinstance(child, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                self._record_targets(child, scope)
            self._index(child, inner)

    def _record_assign(self, node: ast.AST, scope: Scope) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name, value in _unpack(target, node.value):
                self.assigns.append(Assign(name, value, node, scope))

    def _record_targets(self, node: ast.AST, scope: Scope) -> None:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            for name, _ in _unpack(node.target, None):
                self.assigns.append(Assign(name, None, node, scope))
            return
        for item in node.items:
            if item.optional_vars is not None:
                for name, _ in _unpack(item.optional_vars, None):
                    self.assigns.append(Assign(name, item.context_expr, node, scope))

    # queries -----------------------------------------------------------------------
    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def statement_of(self, node: ast.AST) -> ast.AST:
        for parent in [node, *self.ancestors(node)]:
            if isinstance(parent, ast.stmt):
                return parent
        return node

    def drawn_from(self, loop: ast.For | ast.AsyncFor | ast.comprehension) -> str | None:
        """The name a loop draws from, also through a progress bar bound on its own line in
        the same function (`tbar = tqdm(loader)` ... `for batch in tbar`; the last binding
        above the loop when the name is bound again for another loop)."""
        name = iterated(loop.iter)
        if name is None or "." in name:
            return name
        scope = self.scope_of.get(loop)
        bound = [a for a in self.assigns if a.target == name and a.scope is scope]
        if len(bound) > 1:  # `t = tqdm(train_loader)` ... `t = tqdm(valid_loader)`: the last one above the loop
            line = loop.iter.lineno  # a comprehension has no line of its own
            above = [a for a in bound if a.node.lineno < line]
            bound = [max(above, key=lambda a: a.node.lineno)] if above else bound
        if len(bound) == 1 and isinstance(bound[0].value, ast.Call) and last(call_name(bound[0].value)) == "tqdm":
            return iterated(bound[0].value) or name
        return name

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        return next((a for a in self.ancestors(node) if isinstance(a, ast.ClassDef)), None)

    def values_of(self, name: str) -> list[ast.AST]:
        """Every value assigned to `name` (or to `self.<name>`'s last part when dotted)."""
        return [a.value for a in self.assigns if a.value is not None and a.target == name]

    def is_torch_device(self, name: str) -> bool:
        """Every value `name` is given makes a torch.device (`torch.device(...)`,
        `accelerator.device` through `current_accelerator()`): compared with a string it was
        False before any migration too."""
        values = self.values_of(name)
        return bool(values) and all(
            any(isinstance(n, ast.Call) and last(call_name(n)) in ("device", "current_accelerator") for n in ast.walk(v))
            for v in values
        )

    def is_accelerator(self, expr: ast.AST) -> bool:
        name = dotted(expr)
        if name is None:
            return False
        if last(name) == "accelerator":
            return True
        return any(isinstance(v, ast.Call) and last(call_name(v)) == "Accelerator" for v in self.values_of(name))

    def _prepares(self) -> Iterator[Prepare]:
        for call in self.calls:
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "prepare" and self.is_accelerator(func.value):
                args = tuple(dotted(a) for a in call.args)
                parent = self.parents.get(call)
                targets: tuple[str | None, ...] = ()
                if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
                    target = parent.targets[0]
                    elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                    targets = tuple(dotted(e) for e in elts)
                yield Prepare(call, args, targets, self.scope_of.get(call, self.tree))

    @functools.cached_property
    def nodes(self) -> list[ast.AST]:
        """Every node of the tree, in `ast.walk(tree)` order: listed once, as the checks
        read the whole tree many times."""
        return list(ast.walk(self.tree))

    @functools.cached_property
    def prepared(self) -> set[str]:
        """Every name given to or bound by prepare(), dotted as written."""
        names: set[str] = set()
        for p in self.prepares:
            names.update(n for n in p.args + p.targets if n)
        return names

    def is_prepared(self, name: str) -> bool:
        return name in self.prepared or last(name) in {last(n) for n in self.prepared}

    def kind_of(self, name: str, _seen: frozenset[str] = frozenset()) -> str:
        """'optimizer', 'scheduler', 'loader' or 'other' (a model), judged from what
        `name` is bound to (through plain names: `self.opt = opt`, `opt` an Adam built
        elsewhere), then from its name when the value says nothing (a helper's result:
        `self.optimizer = make_optimizer(cfg)`)."""
        if self.is_loader(name) or last(name) in self.iterated_names:
            return "loader"
        for value in self.values_of(name):
            source = dotted(value)
            if source is not None and source != name and source not in _seen and len(_seen) < 4:
                kind = self.kind_of(source, _seen | {name})
                if kind != "other":
                    return kind
            if isinstance(value, ast.Call):
                callee = call_name(value)
                if any(w in callee + "(" for w in _SCHEDULER_WORDS):
                    return "scheduler"
                if any(w in callee for w in _OPTIMIZER_WORDS):
                    return "optimizer"
        word = last(name).lower()
        if "sched" in word:
            return "scheduler"
        if "optim" in word:
            return "optimizer"
        if "loader" in word or word.endswith("_dl"):
            return "loader"
        return "other"

    @functools.cached_property
    def iterated_names(self) -> set[str]:
        """Last parts of the names for-loops draw from (a model or optimizer never is)."""
        names = set()
        for node in self.nodes:
            if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                name = self.drawn_from(node)
                if name:
                    names.add(last(name))
        return names

    @functools.cached_property
    def loader_names(self) -> set[str]:
        """Last parts of names that hold a DataLoader: built by `DataLoader(...)`, by a
        function of this module that returns one, or passed on from such a name by an
        assignment or a call to a function/class of this module."""
        returns_loader = {
            name for name, defs in self.functions.items()
            if any(_returns_loader(d) for d in defs)
        }
        names: set[str] = set()
        for a in self.assigns:
            if isinstance(a.value, ast.Call) and _is_loader_call(a.value, returns_loader):
                names.add(last(a.target))
        for _ in range(4):  # propagate through `x = y` and call arguments → parameters
            before = len(names)
            for a in self.assigns:
                source = dotted(a.value) if a.value is not None else None
                if source and last(source) in names:
                    names.add(last(a.target))
            for call in self.calls:
                names.update(self._params_fed(call, names))
            if len(names) == before:
                break
        return names

    def is_loader(self, name: str) -> bool:
        return last(name) in self.loader_names

    def _params_fed(self, call: ast.Call, names: set[str]) -> set[str]:
        """Parameters of this module's function (or class __init__) that `call` feeds
        with one of `names`."""
        fed: set[str] = set()
        for params in self.parameters_of(last(call_name(call))):
            for i, arg in enumerate(call.args):
                if i < len(params) and (dotted(arg) or "").rsplit(".", 1)[-1] in names:
                    fed.add(params[i])
            for kw in call.keywords:
                if kw.arg and (dotted(kw.value) or "").rsplit(".", 1)[-1] in names:
                    fed.add(kw.arg)
        return fed

    def parameters_of(self, name: str) -> list[list[str]]:
        """Positional parameter names of each function or class `__init__` called `name`
        (without `self`)."""
        out = []
        for d in self.functions.get(name, []):
            params = [a.arg for a in d.args.posonlyargs + d.args.args]
            if self.enclosing_class(d) is not None and params[:1] in (["self"], ["cls"]):
                params = params[1:]
            out.append(params)
        for node in self.classes.get(name, []):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    out.append([a.arg for a in item.args.args][1:])
        return out

    def callers_of(self, function: ast.AST) -> list[ast.Call]:
        """Calls of `function`: by its bare name for a function, `<obj>.name(...)` for a
        method (`ClassName(...)` for `__init__`)."""
        name = getattr(function, "name", None)
        method = self.enclosing_class(function) is not None
        if name == "__init__":
            cls = self.enclosing_class(function)
            name, method = (cls.name if cls is not None else None), False
        if not name:
            return []
        if method:
            return [c for c in self.calls if isinstance(c.func, ast.Attribute) and c.func.attr == name]
        return [c for c in self.calls if isinstance(c.func, ast.Name) and c.func.id == name]


def fed_prepared(program: Program, name: str, function: ast.AST | None, depth: int = 4) -> bool:
    """`name` is prepared, or is a parameter of `function` that every call of it feeds a
    prepared name: through the callers' own parameters too (`train()` handing the loader
    it was given to `train_step()`), up to `depth` calls away."""
    if program.is_prepared(name):
        return True
    params = [a.arg for a in getattr(getattr(function, "args", None), "args", [])]
    root = name.split(".")[0]
    if root not in params or depth == 0:
        return False
    callers = program.callers_of(function)
    if not callers:
        return False
    offset = 1 if program.enclosing_class(function) is not None else 0
    index = params.index(root) - offset
    for call in callers:
        given = next((kw.value for kw in call.keywords if kw.arg == root), None)
        if given is None and 0 <= index < len(call.args):
            given = call.args[index]
        if given is None or not fed_prepared(program, dotted(given) or "", program.scope_of.get(call), depth - 1):
            return False
    return True


def _unpack(target: ast.AST, value: ast.AST | None) -> Iterator[tuple[str, ast.AST | None]]:
    if isinstance(target, (ast.Tuple, ast.List)):
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
        for i, elt in enumerate(target.elts):
            yield from _unpack(elt.value if isinstance(elt, ast.Starred) else elt, values[i] if values else None)
        return
    name = dotted(target)
    if name is not None:
        yield name, value


def _is_loader_call(call: ast.Call, returns_loader: set[str]) -> bool:
    callee = last(call_name(call))
    return callee.endswith("DataLoader") or callee in returns_loader


def _returns_loader(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            if last(call_name(node.value)).endswith("DataLoader"):
                return True
    return False


def is_optimizer_call(call: ast.Call) -> bool:
    callee = call_name(call)
    return any(w in callee for w in _OPTIMIZER_WORDS) and "lr_scheduler" not in callee


def parameter_owners(expr: ast.AST, program: Program, depth: int = 0) -> set[str]:
    """Names `m` whose `m.parameters()` / `m.named_parameters()` feed `expr`, following
    names bound to such expressions (`params = list(model.parameters())`); a submodule's
    (`model.backbone`) stands for the module the file runs (`model(...)`)."""
    owners = {m for o in _owners(expr, program, depth) for m in _iterated_modules(o, program)}
    called = {call_name(c) for c in program.calls}
    out: set[str] = set()
    for owner in owners:
        parts = owner.split(".")
        start = 2 if parts[0] == "self" else 1
        root = next((".".join(parts[:i]) for i in range(start, len(parts)) if ".".join(parts[:i]) in called), None)
        out.add(root or owner)
    return out


def _owners(expr: ast.AST, program: Program, depth: int = 0) -> set[str]:
    owners: set[str] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("parameters", "named_parameters"):
                owner = dotted(node.func.value)
                if owner:
                    owners.add(owner)
        elif isinstance(node, ast.Name) and depth < 2:
            for value in [*program.values_of(node.id), *_appended_to(node.id, program)]:
                owners |= _owners(value, program, depth + 1)
    return owners


def _iterated_modules(owner: str, program: Program) -> set[str]:
    """`module` of `for module in modules_ori:` with `modules_ori = [model.layer0, ...]`:
    the modules the loop runs over (when that is all that binds `module`)."""
    if "." in owner or program.values_of(owner):
        return {owner}
    loops = [
        n for n in program.nodes if isinstance(n, (ast.For, ast.AsyncFor))
        and isinstance(n.target, ast.Name) and n.target.id == owner
    ]
    out: set[str] = set()
    for loop in loops:
        iterated = program.values_of(loop.iter.id) if isinstance(loop.iter, ast.Name) else [loop.iter]
        for value in iterated:
            names = [dotted(e) for e in value.elts] if isinstance(value, (ast.List, ast.Tuple)) else [None]
            if not names or not all(names):
                return {owner}
            out |= set(names)  # type: ignore[arg-type]
    return out or {owner}


def _appended_to(name: str, program: Program) -> list[ast.AST]:
    """What `name.append(x)` / `name.extend(xs)` add to a list, and for an `x` a loop binds,
    what that loop iterates (`for p in filter(..., model.parameters()): params.append(p)`)."""
    added: list[ast.AST] = []
    for node in program.nodes:
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend") and dotted(node.func.value) == name and node.args
        ):
            added.append(node.args[0])
    loops = [n for n in program.nodes if isinstance(n, (ast.For, ast.AsyncFor))]
    for arg in [a for a in added if isinstance(a, ast.Name)]:
        added += [  # `for name, p in model.named_parameters():` binds `p` too
            loop.iter for loop in loops
            if any(isinstance(t, ast.Name) and t.id == arg.id for t in ast.walk(loop.target))
        ]
    return added
