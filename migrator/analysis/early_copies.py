"""Copies of a model's weights taken before prepare(), in a run that does not seed torch
alike on every process: `ema = copy.deepcopy(model)`, `ema.register(name, param.data)` in a
loop over `model.named_parameters()`, `best = copy.deepcopy(model.state_dict())`.

Each process builds its model from its own random initialisation; prepare() then hands
every process process 0's weights (DDP broadcasts them), but a copy taken before it keeps
the process's own. Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.random_draws import SEEDS, per_process_seed
from migrator.analysis.roles import EMA_CLASS, Role, peel_moves
from migrator.analysis.walk import descendants

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

_COPIES = {"copy.deepcopy", "torch.optim.swa_utils.AveragedModel"}
_WEIGHTS = {"parameters", "named_parameters", "state_dict"}
# methods that keep a copy of what they are handed (`ema.register(name, param.data)`, an EMA's
# convention; `shadow[name].copy_(param.data)`); `groups.append(param)` keeps the parameter itself,
# which prepare() then overwrites in place like the model's
_KEEPERS = {"register", "copy_"}
_TORCH_SEEDS = {"torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all"}


@dataclass(frozen=True, eq=False)
class EarlyCopy:
    node: cst.CSTNode  # the copy, where it is reported
    model: str


def early_copies(analysis: "ScriptAnalysis") -> list[EarlyCopy]:
    """The copies of a model the file prepares (or the migration will), above its
    prepare(), in the scope that prepares, when nothing seeds torch alike on every process
    and the weights were not loaded (from a file, or `from_pretrained`) before the copy."""
    if not analysis.migrating or seeded_alike(analysis):
        return []
    out: list[EarlyCopy] = []
    for model, prepared_at in _prepared_models(analysis):
        scope = analysis.scope_of(prepared_at)
        built = [b for b in analysis.facts.bindings if b.name == model and analysis.scope_of(b.statement) is scope]
        built = [b for b in built if analysis.order(b.statement) < analysis.order(prepared_at)]
        if not built or any(_loaded(b.value) for b in built):
            continue
        born = min(analysis.order(b.statement) for b in built)
        for copy in _copies_of(analysis, model, scope):
            at = analysis.order(copy)
            if born < at <= analysis.order(prepared_at) and not _weights_loaded_between(analysis, model, born, at):
                out.append(EarlyCopy(copy, model))
    return out


def _prepared_models(analysis: "ScriptAnalysis") -> list[tuple[str, cst.CSTNode]]:
    """(model, the statement that prepares it or that its planned prepare() follows)."""
    out = []
    for p in analysis.prepare_calls:
        out += [(t, p.statement) for t in p.targets if t and analysis.roles.of(t) is Role.MODEL]
    if analysis.plan is not None:
        for group in analysis.plan.groups:
            out += [(n, group.after) for n in group.names if analysis.roles.of(n) is Role.MODEL]
    return out


def seeded_alike(analysis: "ScriptAnalysis") -> bool:
    """A seed of torch's generator (or a helper named for seeding: `set_seed(args.seed)`)
    that does not differ per process, anywhere in the file."""
    for c in analysis.facts.calls:
        qualified = c.qualified or dotted_name(c.node.func) or ""
        last = qualified.rsplit(".", 1)[-1].lower()
        if qualified in SEEDS or (qualified not in _TORCH_SEEDS and "seed" not in last):
            continue
        if "seed" in last and not c.node.args:
            continue
        if not per_process_seed(c.node):
            return True
    return False


def _copies_of(analysis: "ScriptAnalysis", model: str, scope: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    for c in analysis.facts.calls:
        if c.scope is not scope and analysis.scope_of(c.node) is not scope:
            continue
        qualified = c.qualified or dotted_name(c.node.func) or ""
        copying = qualified in _COPIES or bool(EMA_CLASS.search(qualified.rsplit(".", 1)[-1]))
        if copying and c.node.args and c.node.args[0].keyword is None and _of_model(c.node.args[0].value, model):
            found.append(c.node)
    for loop in analysis.facts.loops:
        node = loop.node
        if analysis.scope_of(node) is scope and _weights_of(node.iter, model) and _keeps(node.body, _names(node.target)):
            found.append(node)
    return found


def _of_model(expr: cst.BaseExpression, model: str) -> bool:
    """`model`, `model.to(device)`, or its `state_dict()`."""
    expr = peel_moves(expr)
    if dotted_name(expr) == model:
        return True
    return isinstance(expr, cst.Call) and _weights_of(expr, model)


def _weights_of(expr: cst.BaseExpression, model: str) -> bool:
    """`model.parameters()`, `model.named_parameters()`, `model.state_dict().items()`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in _WEIGHTS and dotted_name(expr.func.value) == model:
            return True
        if expr.func.attr.value in ("items", "values"):
            return _weights_of(expr.func.value, model)
    return False


def _names(target: cst.BaseExpression) -> set[str]:
    return {n.value for n in descendants(target) if isinstance(n, cst.Name)} | (
        {target.value} if isinstance(target, cst.Name) else set()
    )


def _keeps(body: cst.CSTNode, params: set[str]) -> bool:
    """The loop keeps a copy of a weight: clones it, or hands it to a keeper's method
    (`ema.register(name, param.data)`)."""
    for node in descendants(body):
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            continue
        method = node.func.attr.value
        owner = node.func.value
        if method == "clone" and _root(owner) in params:
            return True
        if method in _KEEPERS and _root(owner) not in params:
            if any(_root(a.value) in params for a in node.args):
                return True
    return False


def _root(expr: cst.BaseExpression) -> str | None:
    """The name a chain of attributes and calls starts from: `param` of `param.data.clone()`."""
    while True:
        if isinstance(expr, cst.Call):
            expr = expr.func
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            return expr.value if isinstance(expr, cst.Name) else None


def _loaded(value: cst.BaseExpression | None) -> bool:
    """`Model.from_pretrained(...)` or `torch.load(...)`: the weights come from a file, the
    same on every process."""
    if not isinstance(value, cst.Call):
        return False
    callee = dotted_name(peel_moves(value).func) if isinstance(peel_moves(value), cst.Call) else None
    return bool(callee) and callee.rsplit(".", 1)[-1] in ("from_pretrained", "load")


def _weights_loaded_between(analysis: "ScriptAnalysis", model: str, start: int, end: int) -> bool:
    """`model.load_state_dict(...)` between the model's making and the copy."""
    for c in analysis.facts.calls:
        func = c.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict" and dotted_name(func.value) == model:
            if start < analysis.order(c.node) < end:
                return True
    return False
