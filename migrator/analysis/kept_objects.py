"""A loss object a class keeps, not a loss tensor.

pytorch-seq2seq's trainer keeps `self.loss = loss` (an `NLLLoss()` of its own making,
handed to `__init__`) and trains with `loss = self.loss; loss.eval_batch(...);
loss.backward()`: the object's own `backward()` calls `self.acc_loss.backward()`.
`accelerator.backward(loss)` would hand the Accelerator the object, which it scales or
divides as a tensor once mixed precision or accumulation is on (reader R7, 28th session).
"""

from __future__ import annotations

import libcst as cst

from migrator.analysis.names import dotted_name


def kept_object(analysis, backward: cst.Call, scope: cst.CSTNode) -> str | None:
    """`self.loss` when the receiver of a bare `.backward()` is that attribute (or a name
    of `scope` bound only to it), and the class sets it only in `__init__`, from a
    parameter or a constructor call: an object with a `backward()` of its own. None
    otherwise: a tensor stored by another method (`self.loss_G = ...` in `backward_G`) is
    a tensor, and an object's `backward(loss)` handed the loss (guided-diffusion's
    `self.mp_trainer.backward(loss)`) is AM301's to rewrite."""
    if backward.args or not isinstance(backward.func, cst.Attribute):
        return None
    facts = analysis.facts
    name = dotted_name(backward.func.value) or ""
    if "." not in name:
        values = [b.value for b in facts.bindings if b.name == name and b.scope is scope]
        attrs = {dotted_name(v) for v in values if v is not None}
        name = attrs.pop() if values and len(attrs) == 1 and None not in attrs else ""
    cls = facts.method_of.get(id(scope))
    if not name.startswith("self.") or name.count(".") != 1 or cls is None:
        return None
    methods = {id(m): m for m in cls.body.body if isinstance(m, cst.FunctionDef)}
    sets = [b for b in facts.bindings if b.name == name and id(b.scope) in methods]
    params = {
        p.name.value for b in sets for p in (*b.scope.params.params, *b.scope.params.kwonly_params)
    }
    return name if sets and all(
        b.scope.name.value == "__init__" and b.element is None and _made_or_handed(b.value, params) for b in sets
    ) else None


def _made_or_handed(value: cst.BaseExpression | None, params: set[str]) -> bool:
    """A parameter of `__init__` (`self.loss = loss`) or a class built there (`NLLLoss()`)."""
    if isinstance(value, cst.Name):
        return value.value in params
    if isinstance(value, cst.Call):
        last = (dotted_name(value.func) or "").rsplit(".", 1)[-1]
        return last[:1].isupper()
    return False


def kept_note(receiver: str, kept: str) -> str:
    """What to hand `accelerator.backward` instead of such an object."""
    held = " is" if receiver == kept else f" is `{kept}`,"
    return (
        f"`{receiver}`{held} an object the class keeps from `__init__`, with a `backward()` of its own, not a loss "
        "tensor: hand `accelerator.backward` the tensor that method differentiates"
    )
