"""How a script picks its device, and when its user asked for the CPU.

`device = torch.device("cuda" if args.cuda else "cpu")`, or an if/elif/else cascade
whose every branch assigns the device variable (`if use_accel: device =
torch.accelerator.current_accelerator() else: device = torch.device("cpu")`), is one
*choice*. The Accelerator picks the process's device itself, so the choice collapses to
`device = accelerator.device`; what the user still decides is whether to train on the
CPU, which becomes `Accelerator(cpu=<condition>)`. The condition is the path to the
branches that pick the CPU, with the availability checks (`torch.cuda.is_available()`)
taken as true, because the Accelerator falls back to the CPU by itself when there is no
accelerator: `use_accel = not args.no_accel and torch.accelerator.is_available()` and
`if use_accel: ... else: cpu` give `cpu=args.no_accel`. Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Union

import libcst as cst

from migrator.analysis.collect import Binding, Facts
from migrator.analysis.loop import is_main_guard
from migrator.analysis.names import ImportTable, dotted_name
from migrator.analysis.walk import walk

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

AVAILABILITY = (
    "torch.cuda.is_available",
    "torch.accelerator.is_available",
    "torch.backends.mps.is_available",
    "torch.xpu.is_available",
    "torch.mps.is_available",
)
_ACCELERATOR_DEVICES = ("torch.accelerator.current_accelerator",)
_EMPTY = cst.Module([])


@dataclass(frozen=True, eq=False)
class DeviceChoice:
    """One place a scope picks device `name`: `statement` is the assignment (an Assign) or
    the top `if` of a cascade whose branches do nothing else. `cpu` is the source of an
    expression true when the user asked for the CPU ("False" when nothing asks for it);
    None when it cannot be read (`reason` says why)."""

    name: str
    scope: cst.CSTNode
    statement: cst.CSTNode
    bindings: tuple[Binding, ...]
    cpu: str | None
    reason: str | None = None
    flag: bool = False  # `args.cuda = not args.no_cuda and ...` gating `.cuda()` moves, no device variable

    @property
    def names(self) -> frozenset[str]:
        """Names the cpu condition reads (where the Accelerator is created, they must exist)."""
        if not self.cpu:
            return frozenset()
        found: set[str] = set()

        class _Find(cst.CSTVisitor):
            def visit_Name(self, node: cst.Name) -> None:
                found.add(node.value)

            def visit_Attribute(self, node: cst.Attribute) -> bool:
                walk(node.value, self)
                return False

        walk(cst.parse_expression(self.cpu), _Find())
        return frozenset(found - {"True", "False", "None"})


def is_accelerator_device(expr: cst.BaseExpression | None, imports: ImportTable) -> bool:
    """`torch.accelerator.current_accelerator()`: the current accelerator, a device value."""
    return isinstance(expr, cst.Call) and imports.qualify(expr.func) in _ACCELERATOR_DEVICES


# a tiny boolean algebra: enough to read `not args.no_cuda and torch.cuda.is_available()`
_Cond = Union[bool, tuple]


def _var(node: cst.BaseExpression) -> _Cond:
    return ("var", node)


def _not(x: _Cond) -> _Cond:
    if isinstance(x, bool):
        return not x
    if x[0] == "not":
        return x[1]
    return ("not", x)


def _and(*xs: _Cond) -> _Cond:
    items: list = []
    for x in xs:
        if x is False:
            return False
        if x is True:
            continue
        items.extend(x[1] if x[0] == "and" else [x])
    if not items:
        return True
    return items[0] if len(items) == 1 else ("and", items)


def _or(*xs: _Cond) -> _Cond:
    items: list = []
    for x in xs:
        if x is True:
            return True
        if x is False:
            continue
        items.extend(x[1] if x[0] == "or" else [x])
    if not items:
        return False
    return items[0] if len(items) == 1 else ("or", items)


def _render(x: _Cond, inner: bool = False) -> str:
    if isinstance(x, bool):
        return str(x)
    kind = x[0]
    if kind == "var":
        code = _EMPTY.code_for_node(x[1]).strip()
        needs_parens = inner and isinstance(x[1], (cst.BooleanOperation, cst.IfExp, cst.Comparison))
        return f"({code})" if needs_parens else code
    if kind == "not":
        operand = x[1]
        if operand[0] == "var" and isinstance(operand[1], cst.Comparison) and len(operand[1].comparisons) == 1:
            flipped = _flip(operand[1])
            if flipped is not None:
                return _render(("var", flipped), inner)
        return f"not {_render(operand, inner=True)}"
    joiner = " and " if kind == "and" else " or "
    text = joiner.join(_render(i, inner=True) for i in x[1])
    return f"({text})" if inner else text


_FLIPS = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal, cst.In: cst.NotIn, cst.NotIn: cst.In, cst.Is: cst.IsNot, cst.IsNot: cst.Is}


def _flip(comparison: cst.Comparison) -> cst.Comparison | None:
    target = comparison.comparisons[0]
    flipped = _FLIPS.get(type(target.operator))
    if flipped is None:
        return None
    return comparison.with_changes(comparisons=[target.with_changes(operator=flipped())])


class _Reader:
    """Reads tests into conditions, inlining flag variables (`use_cuda`, `args.cuda`)
    assigned once from an expression that checks availability."""

    def __init__(self, facts: Facts, scope: cst.CSTNode) -> None:
        self.facts = facts
        self.imports = facts.imports
        self.scope = scope
        self.seen: set[str] = set()

    def read(self, expr: cst.BaseExpression) -> _Cond:
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return _not(self.read(expr.expression))
        if isinstance(expr, cst.BooleanOperation):
            left, right = self.read(expr.left), self.read(expr.right)
            return _and(left, right) if isinstance(expr.operator, cst.And) else _or(left, right)
        if isinstance(expr, cst.Call) and self.imports.qualify(expr.func) in AVAILABILITY:
            return True
        if isinstance(expr, cst.Name) and expr.value in {"True", "False"}:
            return expr.value == "True"
        name = dotted_name(expr)
        if name is not None and name not in self.seen:
            flag = self._flag_value(name)
            if flag is not None:
                self.seen.add(name)
                try:
                    return self.read(flag)
                finally:
                    self.seen.discard(name)
        return _var(expr)

    def _flag_value(self, name: str) -> cst.BaseExpression | None:
        bound = [b for b in self.facts.bindings if b.name == name and b.element is None]
        local = [b for b in bound if b.scope is self.scope] or [b for b in bound if isinstance(b.scope, cst.Module)]
        if len(local) != 1 or local[0].value is None:
            return None
        value = local[0].value
        return value if _checks_availability(value, self.imports) else None


def _checks_availability(expr: cst.CSTNode, imports: ImportTable) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            found = found or imports.qualify(node.func) in AVAILABILITY

    walk(expr, _Find())
    return found


def _is_cpu(expr: cst.BaseExpression) -> bool | None:
    """True for "cpu" / torch.device("cpu"), False for another literal device, None when
    the value is not a literal (an IfExp is read by the caller)."""
    if isinstance(expr, cst.Call) and expr.args and dotted_name(expr.func) in {"torch.device", "device"}:
        return _is_cpu(expr.args[0].value)
    if isinstance(expr, cst.SimpleString):
        return str(expr.evaluated_value).split(":")[0] == "cpu"
    return None


def _value_cpu(expr: cst.BaseExpression, reader: _Reader, imports: ImportTable) -> _Cond | None:
    """When a device value is the CPU: a condition, or None when it cannot be read."""
    if isinstance(expr, cst.Call) and imports.qualify(expr.func) == "torch.device" and len(expr.args) == 1:
        return _value_cpu(expr.args[0].value, reader, imports)
    if is_accelerator_device(expr, imports):
        return False
    if isinstance(expr, cst.IfExp):
        test = reader.read(expr.test)
        body = _value_cpu(expr.body, reader, imports)
        orelse = _value_cpu(expr.orelse, reader, imports)
        if body is None or orelse is None:
            return None
        return _or(_and(test, body), _and(_not(test), orelse))
    if isinstance(expr, cst.FormattedString) and _leading_text(expr).startswith("cuda:"):
        return False  # f"cuda:{args.gpu}": a GPU by its index, never the CPU
    literal = _is_cpu(expr)
    if literal is not None:
        return literal
    name = dotted_name(expr)
    if name is not None and "." in name and name.endswith("device"):
        # `torch.device(args.device)`: a string flag such as --device cpu
        return _var(cst.parse_expression(f'{name} == "cpu"'))
    return None


def _leading_text(string: cst.FormattedString) -> str:
    """The literal text an f-string starts with (`cuda:` of `f"cuda:{args.gpu}"`)."""
    first = string.parts[0] if string.parts else None
    return first.value if isinstance(first, cst.FormattedStringText) else ""


def _cascade_cpu(node: cst.If, name: str, reader: _Reader, imports: ImportTable) -> tuple[_Cond | None, list]:
    """(the cpu condition, the device assignments) of `if/elif/else` whose branches only
    assign `name` (or hold such a cascade themselves); (None, []) when it is not one."""
    if not isinstance(node.orelse, (cst.If, cst.Else)):
        return None, []
    branches: list[tuple[_Cond, cst.BaseSuite]] = []
    path: _Cond = True
    current: cst.If | cst.Else | None = node
    while current is not None:
        if isinstance(current, cst.If):
            test = reader.read(current.test)
            branches.append((_and(path, test), current.body))
            path = _and(path, _not(test))
            current = current.orelse
        else:
            branches.append((path, current.body))
            current = None
    cpu: _Cond = False
    assigns: list = []
    for cond, suite in branches:
        lines = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
        if len(lines) != 1:
            return None, []
        line = lines[0]  # a SimpleStatementSuite (`if x: device = ...`) holds smalls like a line
        if isinstance(line, cst.If):
            inner, inner_assigns = _cascade_cpu(line, name, reader, imports)
            if inner is None:
                return None, []
            cpu = _or(cpu, _and(cond, inner))
            assigns += inner_assigns
            continue
        if not isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) or len(line.body) != 1:
            return None, []
        small = line.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and dotted_name(small.targets[0].target) == name):
            return None, []
        value_cpu = _value_cpu(small.value, reader, imports)
        if value_cpu is None:
            if "cpu" in _EMPTY.code_for_node(small.value):
                return None, []
            value_cpu = False
        cpu = _or(cpu, _and(cond, value_cpu))
        assigns.append(small)
    return cpu, assigns


def device_choices(facts: Facts, device_bindings: list[Binding], parent: Callable) -> tuple[DeviceChoice, ...]:
    """Every device choice of the module, in document order (one per cascade)."""
    out: list[DeviceChoice] = []
    done: set[int] = set()
    imports = facts.imports
    for binding in device_bindings:
        small = binding.target
        while small is not None and not isinstance(small, cst.BaseSmallStatement):
            small = parent(small)
        if not isinstance(small, cst.Assign) or id(small) in done:
            continue
        reader = _Reader(facts, binding.scope)
        top = _cascade_top(small, parent)
        while top is not None:
            cpu, assigns = _cascade_cpu(top, binding.name, reader, imports)
            if assigns and cpu is not None:
                done |= {id(a) for a in assigns}
                members = tuple(b for b in device_bindings if any(b.target is a.targets[0].target for a in assigns))
                out.append(DeviceChoice(binding.name, binding.scope, top, members, _render(cpu)))
                break
            top = _inner_cascade(top, small, parent)
        if id(small) in done:
            continue
        done.add(id(small))
        cpu = _value_cpu(small.value, reader, imports)
        if cpu is None and "cpu" not in _EMPTY.code_for_node(small.value):
            cpu = False  # `torch.device(f"cuda:{rank}")`: never the CPU
        if cpu is not False and _conditional(small, parent):
            cpu = None  # the CPU under a test that is not a device cascade
        reason = None if cpu is not None else "the device is computed in a way the migrator cannot read"
        out.append(DeviceChoice(binding.name, binding.scope, small, (binding,), _render(cpu) if cpu is not None else None, reason))
    out += _flag_choices(facts, parent, {c.scope for c in out})
    out += _helper_choices(facts, parent)
    return tuple(out)


def _helper_choices(facts: Facts, parent: Callable) -> list[DeviceChoice]:
    """`device = get_device(args)` where `get_device` is a function of this file that picks
    "cuda" or "cpu": a choice the migrator does not read (so it is reported, not
    overridden by `accelerator.device`)."""
    out = []
    for b in facts.bindings:
        name = b.name.split(".")[-1]
        if not (name in {"device", "dev"} or name.endswith("_device")) or not isinstance(b.value, cst.Call):
            continue
        func = b.value.func
        defs = facts.functions.get(func.value, []) if isinstance(func, cst.Name) else []
        if len(defs) != 1 or not _picks_device(defs[0]):
            continue
        small = b.target
        while small is not None and not isinstance(small, cst.BaseSmallStatement):
            small = parent(small)
        reason = f"the device comes from `{func.value}()`, which the migrator does not read"  # type: ignore[union-attr]
        out.append(DeviceChoice(b.name, b.scope, small or b.statement, (b,), None, reason))
    return out


def _picks_device(function: cst.FunctionDef) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            nonlocal found
            found = found or any(w in node.value for w in ("cuda", "cpu", "mps"))

    walk(function.body, _Find())
    return found


def _flag_choices(facts: Facts, parent: Callable, chosen: set) -> list[DeviceChoice]:
    """`args.cuda = not args.no_cuda and torch.cuda.is_available()` tested by an `if`
    that moves something (`if args.cuda: model.cuda()`), in a scope with no device
    variable: the user asked for the CPU when the flag is false."""
    lines = set()
    for c in facts.calls:  # the statements that check availability: few, found without a walk
        if c.qualified in AVAILABILITY:
            node = c.node
            while node is not None and not isinstance(node, cst.SimpleStatementLine):
                node = parent(node)
            lines.add(id(node))
    out = []
    for b in facts.bindings:
        if id(b.statement) not in lines or b.element is not None or b.value is None or b.scope in chosen:
            continue
        if not _gates_moves(facts, b.name):
            continue
        reader = _Reader(facts, b.scope)
        cpu = _not(reader.read(cst.parse_expression(b.name)))
        small = b.target
        while small is not None and not isinstance(small, cst.BaseSmallStatement):
            small = parent(small)
        out.append(DeviceChoice(b.name, b.scope, small or b.statement, (b,), _render(cpu), flag=True))
    out += _option_flag_choices(facts, parent, chosen | {c.scope for c in out})
    return out


def _option_flag_choices(facts: Facts, parent: Callable, chosen: set) -> list[DeviceChoice]:
    """`parser.add_argument("--gpu", action="store_true")` read as `args.gpu` by an `if`
    that moves something (`if args.gpu: x = x.cuda()`), with no device variable: the
    switch the user flips to train on the GPU, so `cpu=not args.gpu`. Only a
    store_true/store_false switch, or an option read as a bool (`type=str2bool`), counts
    (an option that holds a GPU index does not say "CPU" when it is 0), and only when the
    parsed namespace is bound once."""
    parsed = [b for b in facts.bindings if b.element is None and _is_parse_args(b.value) and "." not in b.name]
    if len(parsed) != 1 or parsed[0].scope in chosen:
        return []
    namespace = parsed[0]
    out = []
    for dest in sorted(_switches(facts)):
        name = f"{namespace.name}.{dest}"
        if any(b.name == name for b in facts.bindings):
            continue
        if _gates_moves(facts, name):
            cpu = f"not {name}"  # `if args.gpu: x = x.cuda()`
        elif _gates_moves(facts, name, negated=True):
            cpu = name  # `if not args.no_cuda: x = x.cuda()`
        else:
            continue
        small = namespace.target
        while small is not None and not isinstance(small, cst.BaseSmallStatement):
            small = parent(small)
        out.append(DeviceChoice(name, namespace.scope, small or namespace.statement, (namespace,), cpu, flag=True))
    return out[:1] if len(out) == 1 else []


def _is_parse_args(value: cst.BaseExpression | None) -> bool:
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "parse_args"
    )


def _switches(facts: Facts) -> set[str]:
    """The destinations of `add_argument(..., action="store_true"|"store_false")` and of
    options read as a bool (`type=str2bool`)."""
    out = set()
    for c in facts.calls:
        call = c.node
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"):
            continue
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        action = keywords.get("action")
        switch = isinstance(action, cst.SimpleString) and action.evaluated_value in {"store_true", "store_false"}
        if not switch and not _read_as_bool(keywords.get("type")):
            continue
        dest = keywords.get("dest")
        if isinstance(dest, cst.SimpleString):
            out.add(str(dest.evaluated_value))
            continue
        flags = [str(a.value.evaluated_value) for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        longs = [f for f in flags if f.startswith("--")] or flags
        if longs:
            out.add(longs[0].lstrip("-").replace("-", "_"))
    return out


def _read_as_bool(kind: cst.BaseExpression | None) -> bool:
    """`type=str2bool` (ssd.pytorch's `--cuda`, `default=True`), `type=strtobool`,
    `type=bool`: an option read as true or false is a switch too (`--cuda false`)."""
    name = (dotted_name(kind) or "").rpartition(".")[2].lower() if kind is not None else ""
    return "bool" in name


def _gates_moves(facts: Facts, name: str, negated: bool = False) -> bool:
    """An `if name:` (`if not name:` when `negated`) whose body moves something."""
    for node in facts.by_type.get("If", []):
        test = node.test
        if negated:
            if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
                continue
            test = test.expression
        if dotted_name(test) != name:
            continue
        found = False

        class _Find(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                nonlocal found
                found = found or (isinstance(call.func, cst.Attribute) and call.func.attr.value in {"cuda", "to"})

        walk(node.body, _Find())
        if found:
            return True
    return False


def _cascade_top(small: cst.Assign, parent: Callable) -> cst.If | None:
    """The outermost `if` of the if/elif chains (nested ones too) whose branch holds
    `small` alone; None when `small` is not the only statement of an if branch."""
    top = None
    node: cst.CSTNode = small
    while True:
        line = parent(node) if isinstance(node, cst.BaseSmallStatement) else node
        if isinstance(line, cst.SimpleStatementSuite):  # `if x: device = ...` on one line
            suite = line
        else:
            suite = parent(line) if line is not None else None
        if not isinstance(suite, (cst.IndentedBlock, cst.SimpleStatementSuite)) or len(suite.body) != 1:
            return top
        holder = parent(suite)
        if isinstance(holder, cst.Else):
            holder = parent(holder)
        if not isinstance(holder, cst.If):
            return top
        while isinstance(parent(holder), cst.If) and parent(holder).orelse is holder:
            holder = parent(holder)
        top = holder
        node = holder


def _inner_cascade(top: cst.If, small: cst.Assign, parent: Callable) -> cst.If | None:
    """The next cascade inside `top` on the way to `small`, when `top` is not one."""
    chain = []
    current = parent(small)
    while current is not None and current is not top:
        if isinstance(current, cst.If) and not (isinstance(parent(current), cst.If) and parent(current).orelse is current):
            chain.append(current)
        current = parent(current)
    return chain[-1] if chain else None


def _conditional(small: cst.Assign, parent: Callable) -> bool:
    """`small` runs only under some test (inside an if, a loop, a try)."""
    current = parent(small)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, (cst.If, cst.Else, cst.While, cst.For, cst.Try, cst.ExceptHandler)):
            return not is_main_guard(current)
        current = parent(current)
    return False


def training_cpu(choices: tuple[DeviceChoice, ...], scopes: tuple[cst.CSTNode, ...]) -> tuple[str | None, str | None]:
    """(the cpu condition for the Accelerator, why it cannot be mapped) from the choices
    made in `scopes` (the scope that trains, and the module). (None, None): nothing asks
    for the CPU."""
    relevant = [c for c in choices if any(c.scope is s for s in scopes)]
    unreadable = [c for c in relevant if c.cpu is None]
    if unreadable:
        return None, unreadable[0].reason
    asked = {c.cpu for c in relevant if c.cpu not in {None, "False"}}
    if not asked:
        return None, None
    if len(asked) > 1:
        return None, "the device is chosen in several places with different conditions"
    return asked.pop(), None


def options_guard(module: cst.Module, needs: frozenset[str], facts: Facts, devices: tuple[str, ...] = ()) -> cst.If | None:
    """The `if __name__ == "__main__":` block that binds every name the Accelerator's
    options read (`args = parser.parse_args()` for `cpu=args.backend != "gpu"`) where
    module-level code does not, and chooses again each module-level device variable in
    `devices`: the Accelerator is created there, after those names (a module global, seen
    by every function the guard calls after it), and the guard's choice becomes
    `accelerator.device`."""
    guards = [s for s in module.body if is_main_guard(s)]
    if not needs or not devices or len(guards) != 1 or not isinstance(guards[0].body, cst.IndentedBlock):
        return None
    guard = guards[0]
    in_guard = {id(s) for s in guard.body.body}
    at_top = {id(s) for s in module.body}
    bound = [b for b in facts.bindings if b.scope is module and b.name in needs]
    if any(id(b.statement) in at_top for b in bound):
        return None
    chosen = {b.name for b in facts.bindings if b.scope is module and id(b.statement) in in_guard}
    return guard if needs <= {b.name for b in bound if id(b.statement) in in_guard} and set(devices) <= chosen else None


def chosen_again_in(function: cst.CSTNode, devices: tuple[str, ...], facts: Facts) -> bool:
    """`function` declares each module-level device variable in `devices` `global` and
    chooses it again (`global DEVICE` ... `DEVICE = torch.device(... args.backend ...)`):
    the Accelerator can stay in that function, created after the arguments, and the
    module-level variable becomes `accelerator.device` there."""
    if not devices or not isinstance(function, cst.FunctionDef):
        return False
    declared: set[str] = set()
    for line in function.body.body:
        if isinstance(line, cst.SimpleStatementLine):
            for small in line.body:
                if isinstance(small, cst.Global):
                    declared |= {n.name.value for n in small.names}
    bound = {b.name for b in facts.bindings if b.scope is function}
    return set(devices) <= declared & bound


def superseded(analysis: "ScriptAnalysis", choice: DeviceChoice) -> str | None:
    """A module-level choice made before the Accelerator exists (`DEVICE = torch.device(
    "cuda" if ... else "cpu")` at the top) that the main guard makes again after it (from
    `--backend`). "" when nothing reads the first value (no module-level load of the name,
    no call of a function of this file before the second choice): it only gives the name
    a value no code sees, so it can go, and the second choice becomes
    `accelerator.device`. Otherwise why it cannot; None when the choice is not made again."""
    from migrator.analysis.reach import accelerator_home

    home = accelerator_home(analysis)
    module = analysis.module
    if home is None or choice.scope is not module or home.owner_class is not None:
        return None
    start = analysis.order(choice.statement)
    if not any(analysis.parent(choice.statement) is line for line in module.body):
        return None
    if home.scope is module and start >= home.line:
        return None
    facts = analysis.facts
    if home.scope is not module and not chosen_again_in(home.scope, (choice.name,), facts):
        return None
    later = [
        analysis.order(b.statement) for c in analysis.patterns.devices if c.name == choice.name
        for b in c.bindings if b.scope is home.scope and analysis.order(b.statement) >= home.line
    ]
    if not later:
        return None
    end = min(later)
    if home.scope is not module:
        return _read_only_after(analysis, choice.name, home.scope, end)
    if any(l.name == choice.name and l.scope is module and start < analysis.order(l.node) < end for l in facts.loads):
        return f"module-level code reads `{choice.name}` before the Accelerator, created after the arguments it needs, exists"
    for c in facts.calls:
        func = c.node.func
        if c.scope is module and isinstance(func, cst.Name) and func.value in facts.functions and analysis.order(c.node) < end:
            return f"`{func.value}()` runs before the Accelerator, created after the arguments it needs, exists"
    return ""


def _read_only_after(analysis: "ScriptAnalysis", name: str, home: cst.FunctionDef, end: int) -> str:
    """"" when the module-level `name` is read only by code that runs after `home` (the
    function that creates the Accelerator) chooses it again: no module-level read, none
    in `home` before, and every other function that reads it called only from `home`,
    after; otherwise why not."""
    facts = analysis.facts
    readers = set()
    for load in facts.loads:
        if load.name != name or isinstance(analysis.parent(load.node), cst.NameItem):
            continue  # `global DEVICE` declares, it does not read
        if load.scope is analysis.module or (load.scope is home and analysis.order(load.node) < end):
            return f"`{name}` is read before `{home.name.value}()` chooses it again after the Accelerator"
        if load.scope is not home and isinstance(load.scope, cst.FunctionDef):
            readers.add(load.scope.name.value)
    for c in facts.calls:
        func = c.node.func
        if isinstance(func, cst.Name) and func.value in readers:
            if c.scope is not home or analysis.order(c.node) < end:
                return f"`{func.value}()` reads `{name}` and may run before `{home.name.value}()` chooses it again"
    if any(l.name in readers and not isinstance(analysis.parent(l.node), cst.Call) for l in facts.loads):
        return f"a function that reads `{name}` is used as a value"
    return ""
