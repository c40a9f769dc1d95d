"""Tests every process evaluates alike: `if (i + 1) % args.save_every == 0:`.

A barrier (`accelerator.wait_for_everyone()`) may only sit where every process gets to:
inside an `if` whose test holds on one process and not on another, the others never
arrive and the run hangs. Lifting it out of every `if` is always safe, but a periodic save
in a training loop (`if step % 1000 == 0:`) then waits for everyone at every step. Where
the test reads only what every process shares, the barrier can stay inside the branch.

The answer must be certain, so the reading is strict: a value is the same everywhere when
it is built from constants, settings (parsed arguments, a loaded config, the parameter
`args` or `cfg`), counters (`step += 1` in the loop, a `range()` or `enumerate()` index),
file reads of the same path, and arithmetic on them; every binding of a name must be such
a value, and no binding may sit under a test that is not. Anything else, including a call
this module does not know, is taken to differ between processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.walk import walk

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

# Parameters and names that hold a run's settings by convention.
_SETTINGS = {
    "args", "opt", "opts", "cfg", "config", "conf", "hparams", "hp", "flags", "FLAGS", "params",
    "options", "settings", "hyperparams", "hyper_params", "configs", "cmd_args",
}
# Calls whose result is the same on every process given the same arguments.
_PURE = {
    "int", "float", "len", "min", "max", "abs", "round", "bool", "str", "divmod", "sum", "tuple", "list",
    "dict", "vars", "getattr", "hasattr", "isinstance",
    "math.ceil", "math.floor", "math.sqrt", "math.log", "math.log2", "math.exp", "math.cos", "math.pi",
    "os.path.join", "os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.basename",
    "os.path.dirname", "os.path.splitext", "copy.deepcopy", "copy.copy", "open", "torch.load", "json.loads",
}
# Calls that read settings or a file every process reads the same.
_SETTINGS_READS = {
    "parse_args", "parse_known_args", "safe_load", "full_load", "load_config", "get_config",
    "parse_config", "from_yaml", "fromfile", "EasyDict", "edict", "SimpleNamespace", "Namespace",
}
_CONFIG_FILES = {"json.load", "yaml.load", "yaml.safe_load", "yaml.full_load", "tomllib.load", "toml.load"}
_METHODS = {"get", "format", "lower", "upper", "startswith", "endswith", "strip", "split", "keys", "values", "items"}
# Parts of a name that say it belongs to one process.
_PER_PROCESS = ("rank", "process_index", "local_process_index", "gpu", "device", "is_main", "is_master")
_COUNTING = {"range", "enumerate", "count", "trange", "tqdm", "itertools.count"}
_DEPTH = 4


def same_everywhere(analysis: "ScriptAnalysis", test: cst.BaseExpression) -> bool:
    """Whether `test`, where it stands, evaluates alike on every process."""
    return _Reader(analysis).value(test, analysis.scope_of(test), 0)


def reached_alike(analysis: "ScriptAnalysis", statement: cst.CSTNode) -> bool:
    """Whether every process that runs an iteration of the loops around `statement` (in its
    function) gets to it: no `continue`, `break`, `return` or `raise` above it in those loop
    bodies tests what may differ between processes (`if loss.item() > 1: continue`)."""
    reader = _Reader(analysis)
    scope = analysis.scope_of(statement)
    current, child = analysis.parent(statement), statement
    while current is not None and current is not scope:
        if isinstance(current, (cst.IndentedBlock, cst.Module)):
            body = list(current.body)
            before = body[:body.index(child)] if child in body else []
            if any(not reader.exits_alike(s, scope, 0) for s in before):
                return False
        current, child = analysis.parent(current), current
    return True


class _Reader:
    def __init__(self, analysis: "ScriptAnalysis") -> None:
        self.analysis = analysis
        self.pending: set[tuple[int, str]] = set()  # names being read: assumed alike (a counter reads itself)

    # -- expressions -------------------------------------------------------------------------
    def value(self, expr: cst.CSTNode, scope: cst.CSTNode, depth: int) -> bool:
        if depth > _DEPTH:
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)):
            return True
        if isinstance(expr, (cst.ConcatenatedString, cst.FormattedString)):
            return all(self.value(n, scope, depth) for n in _children_expressions(expr))
        if isinstance(expr, cst.Name):
            return self.name(expr.value, scope, depth)
        if isinstance(expr, cst.Attribute):
            return self.attribute(expr, scope, depth)
        if isinstance(expr, cst.Subscript):
            return self.value(expr.value, scope, depth) and all(
                self.value(n, scope, depth) for s in expr.slice for n in _children_expressions(s)
            )
        if isinstance(expr, cst.Call):
            return self.call(expr, scope, depth)
        if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation, cst.UnaryOperation, cst.Comparison,
                             cst.IfExp, cst.Tuple, cst.List)):
            return all(self.value(n, scope, depth) for n in _children_expressions(expr))
        return False

    def call(self, call: cst.Call, scope: cst.CSTNode, depth: int) -> bool:
        qualified = self.analysis.imports.qualify(call.func) or dotted_name(call.func) or ""
        short = call.func.attr.value if isinstance(call.func, cst.Attribute) else qualified.split(".")[-1]
        if qualified in _CONFIG_FILES:
            return True  # a config file: every process reads the same one
        if qualified == "len" and len(call.args) == 1:
            # a data set's or a prepared loader's length is the same on every process
            counted = call.args[0].value
            from migrator.analysis.roles import Role

            if self.analysis.roles.of(dotted_name(counted) or "") is Role.DATALOADER:
                return True
            return self.value(counted, scope, depth)
        args = all(self.value(a.value, scope, depth) for a in call.args)
        if qualified in _PURE:
            return args
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _METHODS:
            return args and self.value(call.func.value, scope, depth)
        return short in _SETTINGS_READS

    def attribute(self, expr: cst.Attribute, scope: cst.CSTNode, depth: int) -> bool:
        dotted = dotted_name(expr)
        if dotted is None:
            return self.value(expr.value, scope, depth) and not _per_process(expr.attr.value)
        if any(_per_process(part) for part in dotted.split(".")[1:]):
            return False
        root = dotted.split(".")[0]
        if root in ("self", "cls"):
            return self.field(dotted, depth)
        assigned = [b for b in self.analysis.facts.bindings if b.name == dotted]
        if any(not self.binding_alike(b.value, b.statement, b.scope, depth + 1) for b in assigned):
            return False  # `args.best = acc`
        return self.value(expr.value, scope, depth)

    def field(self, dotted: str, depth: int) -> bool:
        """`self.save_every`: every assignment of it in the file is alike (`self.x = config.x`
        in `__init__`); one never assigned here (inherited, set elsewhere) is not known."""
        parts = dotted.split(".")
        for size in range(len(parts), 1, -1):
            prefix = ".".join(parts[:size])
            bound = [b for b in self.analysis.facts.bindings if b.name == prefix]
            if bound:
                return all(self.binding_alike(b.value, b.statement, b.scope, depth + 1) for b in bound)
        return False

    def name(self, name: str, scope: cst.CSTNode, depth: int) -> bool:
        if name in ("True", "False", "None"):
            return True
        if _per_process(name):
            return False
        key = (id(scope), name)
        if key in self.pending:
            return True
        self.pending.add(key)
        try:
            return self._name(name, scope, depth)
        finally:
            self.pending.discard(key)

    def _name(self, name: str, scope: cst.CSTNode, depth: int) -> bool:
        facts = self.analysis.facts
        bound = [b for b in facts.bindings if b.name == name and b.scope is scope]
        augmented = [a for a in self.analysis.nodes("AugAssign")
                     if dotted_name(a.target) == name and self.analysis.scope_of(a) is scope]
        other = _other_bindings(self.analysis, scope, name) or _mutated(self.analysis, scope, name)
        is_param = isinstance(scope, cst.FunctionDef) and name in facts.params.get(id(scope), ())
        if other:
            return False
        if is_param and not self.parameter(scope, name, depth):
            return False
        if not (bound or augmented or is_param):
            module = self.analysis.module
            return scope is not module and self.name(name, module, depth)  # a module-level setting
        for b in bound:
            if isinstance(b.statement, cst.For):
                if not self.loop_target(b.statement, name, scope, depth):
                    return False
            elif not self.binding_alike(b.element or b.value, b.statement, scope, depth + 1):
                return False
        return all(self.binding_alike(a.value, a, scope, depth + 1) for a in augmented)

    def parameter(self, function: cst.FunctionDef, name: str, depth: int) -> bool:
        """A settings parameter (`args`), or one every caller in this file passes alike."""
        if name in _SETTINGS or name in ("self", "cls"):
            return True
        callers = self.analysis.branches.callers(function)
        if not callers:
            return False
        positional = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if positional[:1] == ["self"]:
            positional = positional[1:]
        index = positional.index(name) if name in positional else None
        for call in callers:
            given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
            if given is None and index is not None and index < len(call.args) and call.args[index].keyword is None:
                given = call.args[index].value
            if given is None:
                continue  # the default
            if not self.value(given, self.analysis.scope_of(call), depth + 1):
                return False
        return True

    def loop_target(self, loop: cst.For, name: str, scope: cst.CSTNode, depth: int) -> bool:
        """The count of `range()`/`enumerate()`/`count()`: every process steps through it in
        lockstep (a training loop that did not would already hang in the all-reduce)."""
        it = loop.iter
        while isinstance(it, cst.Call) and (dotted_name(it.func) or "").split(".")[-1] in ("tqdm", "iter") and it.args:
            it = it.args[0].value
        if not isinstance(it, cst.Call):
            return False
        callee = self.analysis.imports.qualify(it.func) or dotted_name(it.func) or ""
        short = callee.split(".")[-1]
        if short == "enumerate":
            target = loop.target
            return isinstance(target, cst.Tuple) and bool(target.elements) and (
                dotted_name(target.elements[0].value) == name
            )
        return short in ("range", "count", "trange") and dotted_name(loop.target) == name

    def binding_alike(self, value: cst.CSTNode | None, statement: cst.CSTNode, scope: cst.CSTNode, depth: int) -> bool:
        """The value is alike, every test the binding runs under in its scope is, and no way
        out of the loop above it (`if loss.item() > 1: continue`) tests what may differ."""
        if value is None or not self.value(value, scope, depth):
            return False
        current, child = self.analysis.parent(statement), statement
        while current is not None and current is not scope:
            if isinstance(current, (cst.If, cst.While)) and not self.value(current.test, scope, depth):
                return False
            if isinstance(current, (cst.IndentedBlock, cst.Module)):
                body = list(current.body)
                before = body[:body.index(child)] if child in body else []
                if any(not self.exits_alike(s, scope, depth) for s in before):
                    return False
            current, child = self.analysis.parent(current), current
        return True

    def exits_alike(self, statement: cst.CSTNode, scope: cst.CSTNode, depth: int) -> bool:
        """Every `continue`, `break`, `return` or `raise` in `statement` (not in a loop or
        function of its own) sits under tests every process evaluates alike."""
        for exit_ in _exits(statement):
            current = self.analysis.parent(exit_)
            while current is not None and current is not statement:
                if isinstance(current, (cst.If, cst.While)) and not self.value(current.test, scope, depth):
                    return False
                if isinstance(current, cst.Try):
                    return False  # an exception one process raises alone
                current = self.analysis.parent(current)
            if isinstance(statement, (cst.If, cst.While)) and not self.value(statement.test, scope, depth):
                return False
        return True


def _per_process(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _PER_PROCESS)


def _children_expressions(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The operands of an operation (not its operators or brackets)."""
    out: list[cst.CSTNode] = []
    for child in node.children:
        if isinstance(child, cst.BaseExpression):
            out.append(child)
        elif isinstance(child, (cst.ComparisonTarget, cst.Element, cst.StarredElement, cst.SubscriptElement,
                                cst.Index, cst.Slice, cst.FormattedStringExpression)):
            out.extend(_children_expressions(child))
        elif isinstance(child, cst.FormattedStringText):
            continue
    return out


_READS = {"get", "keys", "values", "items", "index", "count", "copy", "format", "lower", "upper", "startswith",
          "endswith", "strip", "split", "join", "__len__"}


def _mutated(analysis: "ScriptAnalysis", scope: cst.CSTNode, name: str) -> bool:
    """`losses.append(loss.item())`, `best[k] = v`, `del xs[0]`: a container changed in place
    (what it holds then is not its first binding's)."""
    for call in analysis.nodes("Call"):
        func = call.func
        if isinstance(func, cst.Attribute) and dotted_name(func.value) == name and func.attr.value not in _READS:
            if analysis.scope_of(call) is scope:
                return True
    for target in analysis.nodes("AssignTarget"):
        inner = target.target
        if isinstance(inner, cst.Subscript) and dotted_name(inner.value) == name and analysis.scope_of(target) is scope:
            return True
    return False


def _exits(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The `continue`/`break`/`return`/`raise` statements of `statement`'s own loop level."""
    found: list[cst.CSTNode] = []

    class _Find(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> bool:
            return node is statement

        def visit_While(self, node: cst.While) -> bool:
            return node is statement

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Continue(self, node: cst.Continue) -> None:
            found.append(node)

        def visit_Break(self, node: cst.Break) -> None:
            found.append(node)

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

        def visit_Raise(self, node: cst.Raise) -> None:
            found.append(node)

    walk(statement, _Find())
    return found


def _other_bindings(analysis: "ScriptAnalysis", scope: cst.CSTNode, name: str) -> bool:
    """`with ... as name`, `except ... as name`, `(name := ...)`, `global name`, an import:
    bindings this module does not read, so the name is not known to be alike."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_AsName(self, node: cst.AsName) -> None:
            nonlocal found
            found = found or dotted_name(node.name) == name

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            nonlocal found
            found = found or dotted_name(node.target) == name

        def visit_Global(self, node: cst.Global) -> None:
            nonlocal found
            found = found or any(n.name.value == name for n in node.names)

        def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
            nonlocal found
            found = found or any(n.name.value == name for n in node.names)

    walk(scope, _Find())
    return found
