"""One traversal that records the raw facts every analysis step reads.

Facts are plain records (bindings, calls, loops, name loads, functions), each tagged with
the scope it lives in; nothing here decides what anything *is* (that is roles.py's job).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Union

import libcst as cst

from migrator.analysis.names import ImportTable, dotted_name
from migrator.analysis.walk import children, walk

Scope = Union[cst.Module, cst.FunctionDef]


@dataclass(frozen=True, eq=False)
class Binding:
    """`name = value` (or a tuple/for/with target): `name` is dotted, e.g. "self.model".

    `element` is the value matched to this name when a tuple is unpacked from a tuple.
    """

    name: str
    target: cst.CSTNode
    value: cst.BaseExpression | None
    statement: cst.CSTNode
    scope: Scope
    element: cst.BaseExpression | None = None
    loops: tuple[cst.For, ...] = ()  # enclosing for-loops, outermost first


@dataclass(frozen=True, eq=False)
class CallFact:
    node: cst.Call
    func: str | None  # dotted text of the callee, e.g. "optimizer.step"
    qualified: str | None  # through imports, e.g. "torch.optim.SGD"
    scope: Scope
    loops: tuple[cst.For, ...]  # enclosing for-loops, outermost first


@dataclass(frozen=True, eq=False)
class LoopFact:
    node: cst.For
    iter_name: str | None  # the dotted name being iterated, through enumerate()/tqdm()
    targets: tuple[str, ...]
    scope: Scope


@dataclass(frozen=True, eq=False)
class NameLoad:
    name: str
    node: cst.Name
    scope: Scope


@dataclass
class Facts:
    imports: ImportTable = field(default_factory=ImportTable)
    bindings: list[Binding] = field(default_factory=list)
    calls: list[CallFact] = field(default_factory=list)
    loops: list[LoopFact] = field(default_factory=list)
    loads: list[NameLoad] = field(default_factory=list)
    functions: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    params: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(FunctionDef) → names
    scope_of_function: dict[int, Scope] = field(default_factory=dict)
    # filled from node_tables() by analyze(): every node by type name, and document order
    by_type: dict[str, list[cst.CSTNode]] = field(default_factory=dict)
    order: dict[cst.CSTNode, int] = field(default_factory=dict)
    method_of: dict[int, cst.ClassDef] = field(default_factory=dict)
    # filled by analyze(): (id(function), parameter) of loader parameters every call in the
    # file hands a loader it has not prepared (whole_loaders.py)
    whole_loaders: frozenset[tuple[int, str]] = frozenset()

    def loader_parameter(self, scope: object, name: str) -> bool:
        """`name` is a parameter of the function `scope` that a caller may hand a prepared
        loader (not one every call in the file hands a loader left whole)."""
        return (
            isinstance(scope, cst.FunctionDef) and name in self.params.get(id(scope), ())
            and (id(scope), name) not in self.whole_loaders
        )


_ITER_WRAPPERS = {"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter", "zip"}


def iterated_name(expr: cst.BaseExpression) -> str | None:
    """The loader name behind `loader`, `enumerate(loader)`, `tqdm(loader, ...)`."""
    while isinstance(expr, cst.Call) and expr.args:
        func = dotted_name(expr.func) or ""
        if func.split(".")[-1] not in {w.split(".")[-1] for w in _ITER_WRAPPERS}:
            return None
        expr = expr.args[0].value
    return dotted_name(expr)


def target_names(target: cst.BaseExpression) -> list[tuple[str, cst.CSTNode, int | None]]:
    """Names bound by an assignment target, with their index when unpacked from a tuple."""
    if isinstance(target, (cst.Tuple, cst.List)):
        out = []
        for i, el in enumerate(target.elements):
            for name, node, _ in target_names(el.value):
                out.append((name, node, i))
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    name = dotted_name(target)
    return [(name, target, None)] if name else []


class Collector(cst.CSTVisitor):
    """Walks the module once. Attribute tails, keyword names and parameter names are not
    loads; everything else named is."""

    def __init__(self) -> None:
        super().__init__()
        self.facts = Facts()
        self._scopes: list[Scope] = []
        self._loops: list[cst.For] = []
        self._statement: list[cst.CSTNode] = []
        self._classes: list[cst.ClassDef] = []
        self._stores: set[int] = set()

    # scopes -----------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self._scopes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        f = self.facts
        f.functions.setdefault(node.name.value, []).append(node)
        f.scope_of_function[id(node)] = self._scopes[-1]
        if self._classes and self._classes[-1].body.body and any(
            s is node for s in self._classes[-1].body.body
        ):
            f.method_of[id(node)] = self._classes[-1]
        params = node.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                every.append(extra)
        f.params[id(node)] = tuple(p.name.value for p in every)
        for p in every:
            if p.default is not None:
                walk(p.default, self)
        for deco in node.decorators:
            walk(deco, self)
        self._scopes.append(node)
        saved_loops, self._loops = self._loops, []
        walk(node.body, self)
        self._loops = saved_loops
        self._scopes.pop()
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.facts.classes[node.name.value] = node
        for arg in node.bases:
            walk(arg.value, self)
        self._classes.append(node)
        walk(node.body, self)
        self._classes.pop()
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        walk(node.body, self)
        return False

    # statements ---------------------------------------------------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement.append(node)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement.pop()

    # `if i: x = f()` has no statement line: its small statements sit in a suite on the
    # compound statement's line, which stands for the line (as `line_of` answers).
    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._statement.append(node)

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._statement.pop()

    def visit_Import(self, node: cst.Import) -> bool:
        self.facts.imports.add(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.facts.imports.add(node)
        return False

    def _bind(self, target, value, statement) -> None:
        elements = None
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = [el.value for el in value.elements]
        for name, node, index in target_names(target):
            self._stores.add(id(node))
            element = None
            if elements is not None and index is not None and index < len(elements):
                element = elements[index]
            self.facts.bindings.append(
                Binding(name, node, value, statement, self._scopes[-1], element, tuple(self._loops))
            )

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind(t.target, node.value, self._statement[-1])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value, self._statement[-1])

    def visit_For(self, node: cst.For) -> None:
        names = tuple(n for n, _, _ in target_names(node.target))
        self.facts.loops.append(
            LoopFact(node, self._loader_behind(node.iter), names, self._scopes[-1])
        )
        self._bind(node.target, None, node)
        self._loops.append(node)

    def _loader_behind(self, expr: cst.BaseExpression) -> str | None:
        """The iterated name, seen through a progress bar bound on its own line first
        (`tk0 = tqdm(loader)` ... `for batch in tk0:`), the last binding of it before the loop
        in this scope."""
        name = iterated_name(expr)
        if name is None or "." in name:
            return name
        scope = self._scopes[-1]
        for binding in reversed(self.facts.bindings):
            if binding.scope is not scope or binding.name != name:
                continue
            value = binding.value
            if (
                binding.element is None
                and isinstance(value, cst.Call)
                and (dotted_name(value.func) or "").split(".")[-1] == "tqdm"
            ):
                return iterated_name(value) or name
            return name
        return name

    def leave_For(self, node: cst.For) -> None:
        self._loops.pop()

    # expressions ----------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        self.facts.calls.append(
            CallFact(
                node,
                dotted_name(node.func),
                self.facts.imports.qualify(node.func),
                self._scopes[-1],
                tuple(self._loops),
            )
        )

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk(node.value, self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self._stores:
            return
        self.facts.loads.append(NameLoad(node.value, node, self._scopes[-1]))


@dataclass
class NodeTables:
    """child → parent (what LibCST's ParentNodeProvider computes), every node by type name
    in document order (so rules and analyses can visit one node type without walking), the
    document order (pre-order index) of every node, and of the last node under each."""

    parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    by_type: dict[str, list[cst.CSTNode]] = field(default_factory=dict)
    order: dict[cst.CSTNode, int] = field(default_factory=dict)
    last: dict[cst.CSTNode, int] = field(default_factory=dict)
    _orders: dict[str, list[int]] = field(default_factory=dict)

    def under(self, node: cst.CSTNode, type_name: str) -> list[cst.CSTNode]:
        """Every node of one type inside `node` (itself included), in document order:
        a slice of `by_type`, found by bisection, without a walk."""
        nodes = self.by_type.get(type_name)
        if not nodes:
            return []
        orders = self._orders.get(type_name)
        if orders is None:
            orders = self._orders[type_name] = [self.order[n] for n in nodes]
        return nodes[bisect_left(orders, self.order[node]):bisect_right(orders, self.last[node])]


def node_tables(module: cst.Module) -> NodeTables:
    """Parents, nodes by type name and document order for the whole module, in one
    read-only walk (walk.py: LibCST's visit would rebuild every node)."""
    tables = NodeTables()
    parents, by_type, order, last = tables.parents, tables.by_type, tables.order, tables.last
    order[module] = 0
    by_type["Module"] = [module]
    stack = [(module, children(module), 0)]  # iterative: deep expressions would overflow recursion
    while stack:
        parent, kids, i = stack.pop()
        while i < len(kids):
            node = kids[i]
            i += 1
            parents[node] = parent
            order[node] = len(order)
            name = type(node).__name__
            if name in by_type:
                by_type[name].append(node)
            else:
                by_type[name] = [node]
            grandchildren = children(node)
            if grandchildren:
                stack.append((parent, kids, i))
                stack.append((node, grandchildren, 0))
                break
            last[node] = len(order) - 1
        else:
            last[parent] = len(order) - 1
    return tables


def collect(module: cst.Module) -> Facts:
    collector = Collector()
    walk(module, collector)
    return collector.facts
