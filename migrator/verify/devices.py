"""A device move is removed only where the Accelerator places the object.

prepare() places the model it is given and the batches a prepared loader yields; nothing
else. A move removed from a model built after prepare() (a fresh one for inference), from
a model moved off the device mid-training, or from tensors that do not come from a
prepared loader leaves two objects on different devices: a crash on the GPU, and none on
a CPU-only machine, which is why it slips through tests.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Iterator

from migrator.analysis.names import LIBRARY_ROOTS
from migrator.verify.pair import Pair, Problem
from migrator.verify.program import Program, call_name, dotted, fed_prepared, last

CODE = "AM953"
_DEVICE_WORDS = ("device", "cuda", "gpu", "rank", "DEVICE")


def check(pair: Pair) -> list[Problem]:
    if not pair.after.prepares:
        return []
    return (
        list(_removed_moves(pair)) + list(_never_placed(pair)) + list(_two_devices(pair)) + list(_flag_emptied(pair))
        + list(_batches_data_parallel_moved(pair))
    )




def _batches_data_parallel_moved(pair: Pair) -> Iterator[Problem]:
    """`nn.DataParallel` moved every batch onto the GPU inside the model's forward. With it
    gone, code of another file that gets no Accelerator and is handed a loader left
    unprepared (open-reid's `evaluator.evaluate(val_loader, ...)`, the evaluator built with
    the model) feeds the model batches that stay on the CPU: a crash on the GPU."""
    before, after = pair.before, pair.after
    if not any(last(call_name(c)) == "DataParallel" for c in before.calls):
        return
    if any(last(call_name(c)) == "DataParallel" for c in after.calls):
        return
    project = _project_names(after)
    if not project:
        return
    built = {a.target: a.value for a in after.assigns if isinstance(a.value, ast.Call) and call_name(a.value) in project}
    for call in after.calls:
        name = call_name(call)
        owner = name.rsplit(".", 1)[0] if "." in name else ""
        if name not in project and owner not in built and name.split(".")[0] not in project:
            continue
        if any(k.arg == "accelerator" for k in call.keywords):
            continue
        maker = call_name(built[owner]) if owner in built else name
        if name in pair.placing or maker in pair.placing:
            continue  # that code moves its tensors to a device itself
        loaders = [
            dotted(a) for a in [*call.args, *(k.value for k in call.keywords)]
            if dotted(a) and (after.is_loader(dotted(a)) or "loader" in last(dotted(a)).lower() and not last(dotted(a))[:1].isupper())
            and not after.is_prepared(dotted(a))  # not a class such as `yaml.FullLoader`
        ]
        if loaders:
            yield pair.at_after(
                CODE, call,
                f"left as written: `nn.DataParallel` moved every batch onto the GPU inside the model's "
                f"forward; `{name}` (another file's code, which gets no Accelerator) is handed "
                f"`{loaders[0]}`, left unprepared, so its batches would reach the model on the CPU; move "
                "them to `accelerator.device` there, or migrate that file with this one",
            )
            return


def _project_names(program: Program) -> set[str]:
    """Names this file imports from modules of its own project (not a library, not the
    standard library): `Evaluator` of `from reid.evaluators import Evaluator`."""
    import sys

    out: set[str] = set()
    for node in program.nodes:
        if isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if node.level or (root and root not in LIBRARY_ROOTS and root not in sys.stdlib_module_names):
                out |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root not in LIBRARY_ROOTS and root not in sys.stdlib_module_names:
                    out.add(alias.asname or alias.name)
    return out


def _flag_emptied(pair: Pair) -> Iterator[Problem]:
    """`if args.gpu: x = x.cuda()` whose moves the migration removed (`if args.gpu: pass`)
    while the Accelerator is created without `cpu=`: the flag no longer chooses the
    device (the Accelerator takes the GPU whatever the user asks, and code still reading
    the flag puts other tensors elsewhere)."""
    after = pair.after
    accelerators = [c for c in after.calls if last(call_name(c)) == "Accelerator"]
    if not accelerators or any(k.arg == "cpu" for c in accelerators for k in c.keywords):
        return
    emptied = [
        n for n in after.nodes
        if isinstance(n, ast.If) and len(n.body) == 1 and isinstance(n.body[0], ast.Pass) and not n.orelse
        and _option_test(n.test)
    ]
    moved_before = {
        ast.unparse(n.test) for n in pair.before.nodes
        if isinstance(n, ast.If) and _option_test(n.test) and any(
            isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr in ("cuda", "to")
            for s in n.body for m in ast.walk(s)
        )
    }
    for node in emptied:
        flag = ast.unparse(node.test)
        if flag in moved_before:
            yield pair.at_after(
                CODE, node,
                f"left as written: the moves under `if {flag}:` would go, but the Accelerator would be "
                f"created without `cpu=`, so `{flag}` would no longer choose the device; create it after "
                f"the arguments are read, as `Accelerator(cpu={_negated(flag)})`, then migrate",
            )
            return


def _negated(test: str) -> str:
    if test.startswith("not "):
        return test[4:]
    return f"not ({test})" if " " in test else f"not {test}"


def _option_test(test: ast.expr) -> bool:
    """`args.gpu`, `not args.no_cuda`, `args.gpu is not None`, `args.gpu >= 0`: a test of
    what the user asked for."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Compare) and len(test.comparators) == 1:
        test = test.left if isinstance(test.comparators[0], ast.Constant) else test
    return isinstance(test, (ast.Name, ast.Attribute))


def _two_devices(pair: Pair) -> Iterator[Problem]:
    """A device name bound to the Accelerator's device in one place and to a device chosen
    by hand in another: whatever reads it after the second binding moves tensors off the
    device the prepared model is on."""
    after = pair.after
    for acc in [a for a in after.assigns if _is_accelerator_device(after, a.value)]:
        name, scope = acc.target, _binding_scope(after, acc)
        for a in after.assigns:
            if a.target == name and a.value is not None and _chosen_by_hand(a.value) and _binding_scope(after, a) is scope:
                yield pair.at_after(
                    CODE, a.node,
                    f"left as written: `{name}` would be the Accelerator's device in one place and a "
                    "device chosen here by hand in another; tensors moved to it would miss the prepared "
                    "model's device (map the choice to `Accelerator(cpu=...)`)",
                )
                return


def _binding_scope(program: Program, assign) -> ast.AST:
    """The scope whose name `assign` binds: the module for a `global` name."""
    scope = assign.scope
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, ast.Global) and assign.target in n.names for n in ast.walk(scope)
    ):
        return program.tree
    return scope


def _is_accelerator_device(program: Program, value: ast.AST | None) -> bool:
    return isinstance(value, ast.Attribute) and value.attr == "device" and program.is_accelerator(value.value)


def _chosen_by_hand(value: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and last(call_name(n)) == "device" for n in ast.walk(value)) or (
        isinstance(value, ast.Constant) and isinstance(value.value, str)
    )


def is_device_move(call: ast.Call) -> bool:
    """`x.cuda()`, `x.to(device)`, `x.to("cuda")`, `x.to(device, dtype)` (not a dtype-only cast)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "cuda":
        return True
    if func.attr != "to":
        return False
    candidates = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "device"]
    for arg in candidates:
        text = ast.unparse(arg)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value.startswith(("cuda", "mps", "xpu"))
        if any(w in text for w in _DEVICE_WORDS) and "dtype" not in text and not text.startswith("torch.float"):
            return True
    return False


def moves(program: Program) -> list[tuple[str, ast.Call]]:
    """(what is moved, the call) for every device move; what is moved is the name the
    result is assigned to when the receiver is an expression (`model = Net().to(device)`)."""
    found = []
    for call in program.calls:
        if not is_device_move(call):
            continue
        receiver = _root(call.func.value)
        statement = program.statement_of(call)
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and dotted(statement.targets[0]):
            if receiver is None or _in_chain(statement.value, call):
                receiver = dotted(statement.targets[0])  # `self.model = model.to(device)`
        found.append((receiver or ast.unparse(call.func.value), call))
    return found


def _in_chain(value: ast.AST, call: ast.Call) -> bool:
    """`call` is `value` itself or a link of its method chain (`Net().to(d).train()`)."""
    while isinstance(value, ast.Call):
        if value is call:
            return True
        value = value.func.value if isinstance(value.func, ast.Attribute) else None
    return False


def _root(expr: ast.AST) -> str | None:
    """`x` for `x`, `x[0]`, `x["a"]`; `self.model` for `self.model`; chains of calls
    such as `model.eval().to(d)` give `model`."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("train", "eval", "float", "half", "double", "detach", "contiguous", "long", "squeeze", "unsqueeze", "view", "reshape"):
            expr = expr.func.value
        else:
            return dotted(expr)


def _removed_moves(pair: Pair) -> Iterator[tuple]:
    kept = Counter((what, pair.original_line(call.lineno)) for what, call in moves(pair.after))
    for what, call in moves(pair.before):
        key = (what, call.lineno)
        if kept[key] > 0:
            kept[key] -= 1
            continue
        lost = _lost_arguments(pair, call)
        if lost:
            yield Pair.at_before(
                CODE, call,
                f"left as written: the move of `{what}` here also sets `{lost}`, which would be lost with "
                f"the move; keep that part (`.to({lost})`)",
            )
            continue
        if _placed_by_prepare(pair, what, call) or _from_prepared_loader(pair, what, call):
            continue
        if _move_of_a_dropped_wrap(call) and any(w == what for w, _ in moves(pair.after)):
            continue  # `criterion = nn.DataParallel(criterion).cuda()` gone; `criterion` is moved where it is built
        if _parameter_fed_prepared(pair, what, call) and not _moved_off_device(pair.after, what):
            continue  # `model.to(device)` in `train(model, ...)`, every caller passing the prepared model
        yield Pair.at_before(
            CODE, call,
            f"left as written: the move of `{what}` to the device would be removed here, but "
            "prepare() does not place it (it is not prepared, or not this binding of it, or it "
            "is moved off the device later); keep the move with `accelerator.device`",
        )


def _move_of_a_dropped_wrap(call: ast.Call) -> bool:
    """`nn.DataParallel(criterion).cuda()`: the move of a hand-made wrap (which the migration
    removes with its move), not of the object it wraps."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    return isinstance(receiver, ast.Call) and last(call_name(receiver)) in ("DataParallel", "DistributedDataParallel")


def _lost_arguments(pair: Pair, call: ast.Call) -> str | None:
    """A keyword of a removed move other than the device (`dtype=`, `memory_format=`)
    whose value no longer appears on the migrated line."""
    kept = "\n".join(
        line for number, line in enumerate(pair.after_text.splitlines(), 1)
        if pair.original_line(number) in range(call.lineno, (call.end_lineno or call.lineno) + 1)
    )
    for kw in call.keywords:
        if kw.arg in (None, "device", "non_blocking", "copy"):
            continue
        text = ast.unparse(kw.value)
        if text not in kept:
            return f"{kw.arg}={text}"
    return None


def _placed_by_prepare(pair: Pair, what: str, call: ast.Call) -> bool:
    """`what` is given to a prepare() later in the same scope with no rebinding between,
    and nothing moves the prepared model off the device afterwards."""
    before, after = pair.before, pair.after
    scope = before.scope_of.get(call)
    scope_name = getattr(scope, "name", None)
    for p in after.prepares:
        if what not in p.args:
            continue
        prepare_scope = getattr(p.scope, "name", None)
        at = pair.original_line(p.call.lineno)
        if prepare_scope != scope_name and not (scope_name is None or what.startswith("self.")):
            continue
        if prepare_scope != scope_name or at >= call.lineno:
            # placed by the prepare() that follows, unless rebound in between
            if not _rebound(pair, what, p.scope, call.lineno, at, after_side=True):
                return True
        elif not _rebound(pair, what, scope, at, call.lineno + 1, after_side=False) and not _moved_off_device(after, what):
            return True  # a second move of the prepared model, which never leaves the device
    return False


def _rebound(pair: Pair, what: str, scope, start: int, end: int, *, after_side: bool) -> bool:
    """`what` is assigned in `scope` between original lines `start` and `end` (exclusive
    of `start`): in the migrated text (a wrap the migration removed no longer counts) or
    in the original (a fresh object built where the move was)."""
    if after_side:
        moved = [a.node for a in pair.after.assigns if a.target == what and pair.original_line(a.node.lineno) == start]
        return any(
            a.scope is scope and a.target == what and not _is_prepare(a) and not _handed_back(a, what)
            and start < pair.original_line(a.node.lineno) < end
            and not any(_exclusive(pair.after, m, a.node) for m in moved)
            for a in pair.after.assigns
        )
    return any(a.scope is scope and a.target == what and start < a.node.lineno < end for a in pair.before.assigns)


def _handed_back(assign, what: str) -> bool:
    """`model, optimizer, epoch = load_checkpoint(model, optimizer, path)`: the object is
    handed to a checkpoint loader whose result rebinds it, so what the later prepare()
    places is that object, its state loaded (load_state_dict copies across devices). Other
    calls may need the object on its device first (apex's `amp.initialize`)."""
    value = getattr(assign.node, "value", None)
    if not isinstance(value, ast.Call) or not _LOADER.search(last(call_name(value)) or ""):
        return False
    given = [*value.args, *(k.value for k in value.keywords)]
    return any(dotted(_unwrapped(g)) == what for g in given)


_LOADER = re.compile(r"load|resume|restore", re.IGNORECASE)


def _unwrapped(expr: ast.AST) -> ast.AST:
    """`accelerator.unwrap_model(model)` → `model`."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "unwrap_model" and expr.args:
        return expr.args[0]
    return expr


def _exclusive(program: Program, one: ast.AST, other: ast.AST) -> bool:
    """`one` and `other` sit in different branches of one `if` (`if transformer: model =
    A(...) else: model = B(...)`): only one of them runs, so neither rebinds the other."""
    others = {id(a): a for a in program.ancestors(other)}
    below = one
    for above in program.ancestors(one):
        if isinstance(above, ast.If) and id(above) in others:
            mine = _branch(above, below)
            below_other = next(b for b in [other, *program.ancestors(other)] if program.parents.get(b) is above)
            theirs = _branch(above, below_other)
            return mine is not None and theirs is not None and mine != theirs
        below = above
    return False


def _branch(node: ast.If, child: ast.AST) -> str | None:
    if any(child is s for s in node.body):
        return "body"
    if any(child is s for s in node.orelse):
        return "orelse"
    return None


def _is_prepare(assign) -> bool:
    value = getattr(assign.node, "value", None)
    return isinstance(value, ast.Call) and last(call_name(value)) == "prepare"


def _moved_off_device(program: Program, what: str) -> bool:
    for call in program.calls:
        if isinstance(call.func, ast.Attribute) and _root(call.func.value) == what:
            if call.func.attr == "cpu":
                return True
            if call.func.attr == "to" and call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == "cpu":
                return True
    return False


def _from_prepared_loader(pair: Pair, what: str, call: ast.Call) -> bool:
    """A batch (or something unpacked from one) inside a loop over a prepared loader."""
    before = pair.before
    for loop in (a for a in before.ancestors(call) if isinstance(a, (ast.For, ast.AsyncFor))):
        loader = before.drawn_from(loop)
        if not loader or what.split(".")[0] not in _batch_names(before, loop):
            continue
        if pair.after.is_prepared(loader) or _parameter_fed_prepared(pair, loader, loop):
            return True
    return False


def _batch_names(program: Program, loop: ast.AST) -> set[str]:
    """The loop's targets and the names assigned in its body from them, unpacked too
    (`images, labels = data`: the names get no value of their own, the statement has one)."""
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    body = [
        (a.target, value) for a in program.assigns
        if (value := a.value if a.value is not None else _assigned(a.node)) is not None
        and any(x is loop for x in program.ancestors(a.node))
    ]
    comprehensions = [n for n in ast.walk(loop) if isinstance(n, ast.comprehension)]
    for _ in range(3):
        for target, value in body:
            if _mentions(value, names):
                names.add(target.split(".")[0])
        for c in comprehensions:  # `{k: v.to(device) for k, v in batch.items()}`
            if _mentions(c.iter, names):
                names |= {n.id for n in ast.walk(c.target) if isinstance(n, ast.Name)}
    return names


def _assigned(node: ast.AST) -> ast.AST | None:
    """The value of an assignment statement (None for loop and `with` targets)."""
    return node.value if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) else None


def _mentions(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _parameter_fed_prepared(pair: Pair, name: str, node: ast.AST) -> bool:
    """`name` is a parameter of the function holding `node`, and every call of that
    function in the migrated text passes a prepared name for it (program.fed_prepared)."""
    before, after = pair.before, pair.after
    function = before.scope_of.get(node)
    fname = getattr(function, "name", None)
    if fname is None or name.split(".")[0] not in {a.arg for a in function.args.args}:
        return False
    twin = next((d for d in after.functions.get(fname, []) if d.lineno and pair.original_line(d.lineno) == function.lineno), None)
    return twin is not None and fed_prepared(after, name, twin)


def _never_placed(pair: Pair) -> Iterator[Problem]:
    """A model the script never put on a device, prepared (so moved to accelerator.device)
    and then fed a tensor the script builds itself, not a batch of a prepared loader: the
    model is on the GPU, its input on the CPU. `Accelerator(cpu=True)` keeps both there."""
    after = pair.after
    if _cpu_only(after):
        return
    moved = {what for what, _ in moves(pair.before)}
    moved |= {last(m) for m in moved}
    moved |= pair.before.prepared  # prepared already: the script's own doing
    for p in after.prepares:
        for arg in p.args:
            if not arg or after.kind_of(arg) != "other" or arg in moved or last(arg) in moved:
                continue
            call = _fed_from_elsewhere(pair, arg)
            if call is not None:
                yield pair.at_after(
                    CODE, call,
                    f"left as written: the script never puts `{arg}` on a device; prepare() would move it "
                    "to accelerator.device while this input, built here and not drawn from a prepared "
                    "loader, stays on the CPU",
                )
                break


def _placed(values: list[ast.AST]) -> bool:
    """A value made on a device (`device=...`) or moved to one."""
    return any(
        isinstance(n, ast.Call) and (any(k.arg == "device" for k in n.keywords) or is_device_move(n))
        for v in values for n in ast.walk(v)
    )


def _cpu_only(program: Program) -> bool:
    return any(
        last(call_name(c)) == "Accelerator"
        and any(k.arg == "cpu" and isinstance(k.value, ast.Constant) and k.value.value is True for k in c.keywords)
        for c in program.calls
    )


def _fed_from_elsewhere(pair: Pair, model: str) -> ast.Call | None:
    """The first call `model(x, ...)` whose `x` is a name bound in the script outside any
    loop over a prepared loader (a tensor it builds itself)."""
    after = pair.after
    for call in after.calls:
        if dotted(call.func) != model or not call.args:
            continue
        root = _root(call.args[0])
        if root is None or "." in root or not after.values_of(root) or _placed(after.values_of(root)):
            continue
        from_loader = any(
            isinstance(loop, (ast.For, ast.AsyncFor)) and root in _batch_names(after, loop)
            and after.is_prepared(after.drawn_from(loop) or "")
            for loop in after.ancestors(call)
        )
        if not from_loader:
            return call
    return None
