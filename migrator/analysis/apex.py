"""NVIDIA apex.amp: the mixed precision of scripts written before `torch.amp`.

apex's O1/O2 levels are what `Accelerator(mixed_precision="fp16")` does: fp16 compute
with fp32 weights and a dynamic loss scale. Two calls carry them:
`model, optimizer = amp.initialize(model, optimizer, opt_level="O1")` (which has to
see the model before any DDP wrap, so it cannot stay after prepare()) and
`with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()`. This
module finds both, reads the precision they ask for, and names every other use of amp
that has no Accelerator counterpart (each one keeps the whole of it as written).
Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name

_PREFIX = "apex.amp."
_LEVELS = {"O0": '"no"', "O1": '"fp16"', "O2": '"fp16"'}
# Keywords of amp.initialize the Accelerator's fp16 makes no difference to.
_HARMLESS = {"opt_level", "verbosity", "enabled", "loss_scale"}
_OTHER = {
    "master_params": "reads `amp.master_params(...)` other than as the first argument of a torch clip of an "
    "optimizer this file's `amp.initialize` was given: clip with `accelerator.clip_grad_norm_(model.parameters(), "
    "...)` by hand",
    "state_dict": "keeps amp's loss scale in checkpoints (`amp.state_dict()`), which has no Accelerator "
    "counterpart: `accelerator.save_state` saves the Accelerator's own scaler",
    "load_state_dict": "restores amp's loss scale from a checkpoint (`amp.load_state_dict`), which has no "
    "Accelerator counterpart",
}


@dataclass(frozen=True, eq=False)
class AmpInitialize:
    """`model, optimizer = amp.initialize(model, optimizer, ...)`: the statement goes."""

    call: cst.Call
    statement: cst.Assign
    value: str  # the code of the mixed_precision it asks for
    model: str = ""
    optimizer: str = ""
    option: str = ""  # `args.fp16_opt_level`: the level comes from the command line (its default read)
    level: str = "O1"


@dataclass(frozen=True, eq=False)
class MasterParams:
    """`amp.master_params(optimizer)` handed to a clip: the parameters of the model
    initialized with that optimizer (O1/O2 keep fp32 weights there, as the Accelerator's
    fp16 does): `model.parameters()`."""

    call: cst.Call
    model: str


@dataclass(frozen=True, eq=False)
class ScaledBackward:
    """`with amp.scale_loss(loss, optimizer) as scaled: scaled.backward(...)`: the `with`
    becomes `accelerator.backward(loss, ...)`."""

    statement: cst.With
    loss: cst.BaseExpression
    backward: cst.Call
    # `if args.fp16: <the with> else: loss.backward()`: the whole `if` becomes the one
    # backward, and this is the plain one of its `else`.
    branch: cst.If | None = None
    plain: cst.Call | None = None


@dataclass(frozen=True, eq=False)
class ApexAmp:
    initializes: tuple[AmpInitialize, ...]
    backwards: tuple[ScaledBackward, ...]
    blockers: tuple[tuple[cst.CSTNode, str], ...]  # uses the Accelerator cannot take over, and why
    master_params: tuple[MasterParams, ...] = ()

    @property
    def value(self) -> str | None:
        values = {i.value for i in self.initializes}
        value = next(iter(values)) if len(values) == 1 and not self.blockers else None
        return None if value == '"no"' else value  # O0: full precision, nothing to ask for

    @property
    def convertible(self) -> bool:
        return not self.blockers


def apex_amp(facts: Facts, parent) -> ApexAmp | None:
    """The file's apex.amp calls, or None when it uses none."""
    initializes: list[AmpInitialize] = []
    backwards: list[ScaledBackward] = []
    masters: list[MasterParams] = []
    blockers: list[tuple[cst.CSTNode, str]] = []
    amp_calls = [(c, (c.qualified or "")[len(_PREFIX):]) for c in facts.calls if (c.qualified or "").startswith(_PREFIX)]
    for c, name in amp_calls:
        if name == "initialize":
            found = _initialize(c.node, parent, facts)
            if isinstance(found, str):
                blockers.append((c.node, found))
            else:
                initializes.append(found)
    models = {i.optimizer: i.model for i in initializes}
    for c, name in amp_calls:
        if name == "initialize":
            continue
        if name == "master_params" and _clipped(c.node, parent, facts) and _optimizer_of(c.node) in models:
            masters.append(MasterParams(c.node, models[_optimizer_of(c.node)]))
        elif name == "scale_loss":
            found = _scaled_backward(c.node, parent)
            if isinstance(found, str):
                blockers.append((c.node, found))
            else:
                backwards.append(found)
        else:
            reason = _OTHER.get(name, f"calls `amp.{name}(...)`, which has no Accelerator counterpart")
            blockers.append((c.node, reason))
    if not (initializes or backwards or blockers):
        return None
    if len({i.value for i in initializes}) > 1:
        blockers.append((initializes[1].call, "its `amp.initialize` calls ask for different precisions"))
    return ApexAmp(tuple(initializes), tuple(backwards), tuple(blockers), tuple(masters))


_CLIPS = ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad.clip_grad_norm_")


def _clipped(call: cst.Call, parent, facts: Facts) -> bool:
    """`amp.master_params(optimizer)` is the first argument of a torch clip."""
    arg = parent(call)
    clip = parent(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(clip, cst.Call) and clip.args[0] is arg and (facts.imports.qualify(clip.func) or "") in _CLIPS


def _optimizer_of(call: cst.Call) -> str | None:
    return dotted_name(call.args[0].value) if len(call.args) == 1 and call.args[0].keyword is None else None


def _initialize(call: cst.Call, parent, facts: Facts) -> AmpInitialize | str:
    assign = parent(call)
    if not isinstance(assign, cst.Assign) or assign.value is not call or len(assign.targets) != 1:
        return "uses `amp.initialize(...)` other than as `model, optimizer = amp.initialize(model, optimizer, ...)`"
    positional = [a.value for a in call.args if a.keyword is None and a.star == ""]
    target = assign.targets[0].target
    targets = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
    names = [dotted_name(t) for t in targets]
    if len(positional) != 2 or len(targets) != 2 or None in names or names != [dotted_name(p) for p in positional]:
        return "`amp.initialize` is given something other than one model and one optimizer, rebound to the same names"
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    odd = sorted(k for k in keywords if k not in _HARMLESS)
    if odd:
        return f"`amp.initialize(..., {odd[0]}=...)` sets what the Accelerator's fp16 does not"
    scale = keywords.get("loss_scale")
    if scale is not None and not (isinstance(scale, cst.SimpleString) and scale.evaluated_value == "dynamic"):
        return "`amp.initialize(..., loss_scale=...)` fixes a loss scale; the Accelerator's fp16 scales it dynamically"
    level = keywords.get("opt_level")
    text = level.evaluated_value if isinstance(level, cst.SimpleString) else ("O1" if level is None else _option_default(level, facts))
    if text not in _LEVELS:
        shown = cst.Module([]).code_for_node(level).strip() if level is not None else ""
        why = "trains in pure fp16" if text == "O3" else "cannot be read"
        return f"its opt_level `{shown}` {why}; the Accelerator's fp16 is O1/O2's fp16 compute with fp32 weights"
    conditions = _conditions(assign, parent)
    if conditions is None:
        return "`amp.initialize` is called under an `else`, a loop or a `try`, so when it applies cannot be read"
    enabled = keywords.get("enabled")
    if enabled is not None and not (isinstance(enabled, cst.Name) and enabled.value == "True"):
        conditions.append(cst.Module([]).code_for_node(enabled).strip())
    value = _LEVELS[text]
    if conditions and value != '"no"':
        test = " and ".join(f"({c})" if len(conditions) > 1 and " " in c else c for c in conditions)
        value = f'{value} if {test} else "no"'
    option = cst.Module([]).code_for_node(level).strip() if level is not None and not isinstance(level, cst.SimpleString) else ""
    return AmpInitialize(call, assign, value, names[0], names[1], option, text)


def _option_default(level: cst.BaseExpression, facts: Facts) -> str | None:
    """`opt_level=args.fp16_opt_level`, an option of the script's own parser declared
    `add_argument("--fp16_opt_level", default="O1")` with no `choices` (Hugging Face's
    scripts of the apex era): its default, when O1 or O2 is all it can be short of a
    command line asking for more."""
    name = dotted_name(level)
    if name is None or "." not in name:
        return None
    option = name.rsplit(".", 1)[1]
    for c in facts.calls:
        func = c.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument" and c.node.args):
            continue
        flags = [a.value.evaluated_value for a in c.node.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        keywords = {a.keyword.value: a.value for a in c.node.args if a.keyword is not None}
        dest = keywords.get("dest")
        names = {f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")}
        if isinstance(dest, cst.SimpleString):
            names = {dest.evaluated_value}
        if option not in names:
            continue
        default = keywords.get("default")
        if "choices" in keywords or not isinstance(default, cst.SimpleString):
            return None
        return default.evaluated_value if default.evaluated_value in ("O1", "O2") else None
    return None


def _conditions(statement: cst.CSTNode, parent) -> list[str] | None:
    """The tests of the `if`s the statement is under, up to its function (outermost
    first), or None when it sits under anything else that decides whether it runs."""
    out: list[str] = []
    node = parent(statement)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.Module)):
        if isinstance(node, (cst.Else, cst.For, cst.While, cst.Try, cst.ExceptHandler, cst.Finally, cst.With)):
            return None
        if isinstance(node, cst.If):
            out.insert(0, cst.Module([]).code_for_node(node.test).strip())
        node = parent(node)
    return out


def _scaled_backward(call: cst.Call, parent) -> ScaledBackward | str:
    item = parent(call)
    statement = parent(item) if isinstance(item, cst.WithItem) else None
    shape = "uses `amp.scale_loss(...)` other than as `with amp.scale_loss(loss, optimizer) as scaled: scaled.backward()`"
    if not isinstance(statement, cst.With) or len(statement.items) != 1 or item.asname is None:
        return shape
    scaled = dotted_name(item.asname.name)
    body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
    smalls = [s for line in body if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) for s in line.body]
    if len(body) != 1 or len(smalls) != 1 or not isinstance(smalls[0], cst.Expr):
        return shape
    backward = smalls[0].value
    if not (
        isinstance(backward, cst.Call) and isinstance(backward.func, cst.Attribute)
        and backward.func.attr.value == "backward" and dotted_name(backward.func.value) == scaled
    ):
        return shape
    if any(a.keyword is not None for a in call.args) or len(call.args) != 2:
        return "`amp.scale_loss(...)` is given more than the loss and the optimizer (delay_unscale, loss_id)"
    loss = call.args[0].value
    branch, plain = _plain_alternative(statement, loss, backward, parent)
    return ScaledBackward(statement, loss, backward, branch, plain)


def _plain_alternative(statement: cst.With, loss, backward: cst.Call, parent) -> tuple[cst.If | None, cst.Call | None]:
    """The `if` whose body is the `with` alone and whose `else` is `loss.backward()`
    with the same arguments, and that plain call."""
    block = parent(statement)
    branch = parent(block) if isinstance(block, cst.IndentedBlock) and len(block.body) == 1 else None
    if not isinstance(branch, cst.If) or not isinstance(branch.orelse, cst.Else):
        return None, None
    body = branch.orelse.body
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if len(lines) != 1 or not isinstance(lines[0], (cst.SimpleStatementLine, cst.SimpleStatementSuite)) or len(lines[0].body) != 1:
        return None, None
    plain = lines[0].body[0].value if isinstance(lines[0].body[0], cst.Expr) else None
    code = cst.Module([]).code_for_node
    if (
        isinstance(plain, cst.Call) and isinstance(plain.func, cst.Attribute) and plain.func.attr.value == "backward"
        and code(plain.func.value).strip() == code(loss).strip()
        and [code(a).strip().rstrip(",") for a in plain.args] == [code(a).strip().rstrip(",") for a in backward.args]
    ):
        return branch, plain
    return None, None
