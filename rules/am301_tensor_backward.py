"""AM301: `loss.backward()` instead of `accelerator.backward(loss)`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.branches import is_accelerator_receiver
from migrator.analysis.kept_objects import kept_note, kept_object
from migrator.analysis.reach import unreachable_note
from migrator.cst import attr_call, with_clean_commas
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule

_POSITIONAL = ("gradient", "retain_graph", "create_graph", "inputs")


class TensorBackward(Rule):
    """## What it does
    Rewrites `loss.backward(...)` to `accelerator.backward(loss, ...)`, keeping keyword
    arguments and any expression: `(loss / accum).backward(retain_graph=True)` becomes
    `accelerator.backward(loss / accum, retain_graph=True)`. Positional arguments of
    `Tensor.backward` become keywords.

    ## Why is this bad?
    The Accelerator's `backward` scales the loss under fp16 mixed precision and divides
    it for gradient accumulation; a plain `backward()` skips both, so fp16 gradients
    underflow and accumulated gradients are too large.

    ## Example
    ```python
    loss.backward()
    ```

    Use instead:
    ```python
    accelerator.backward(loss)
    ```

    `torch.autograd.backward(loss, grad_tensors=g)` becomes
    `accelerator.backward(loss, gradient=g)` the same way.

    ## Known limits
    `torch.autograd.backward` of several tensors at once is reported, not rewritten.
    Where no Accelerator can reach the code (a function also called from module level,
    a method of a class that does not hold one), the backward is left as it is and
    reported; AM002 says why. `self.backward()` in a class not built on `Tensor` calls a
    method of the class (a model object's `backward()` holding the loss's own backward),
    and is not reported. Nor is the `backward()` of an object a class keeps from its
    `__init__` (`loss = self.loss`, a loss object of the project's own holding the tensor):
    it is reported, left as written, since `accelerator.backward` takes the tensor.
    """

    code = "AM301"
    name = "tensor-backward"
    message = "`{receiver}.backward()` bypasses the Accelerator{note}"
    fix_title = "Use `accelerator.backward(loss)`"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "def step(loss):\n    (loss / 2).backward(retain_graph=True)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "def step(loss):\n    accelerator.backward(loss / 2, retain_graph=True)\n"
            ),
            at=("6:5",),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "backward":
            return
        analysis = self.analysis
        if not analysis.migrating:
            return
        receiver = func.value
        name = dotted_name(receiver)
        if (analysis.imports.qualify(func) or "") == "torch.autograd.backward":
            self._autograd_backward(node)
            return
        if is_accelerator_receiver(name, analysis.accelerator_names) or (analysis.imports.qualify(receiver) or "").startswith("torch"):
            return
        if name == "self" and not self._in_tensor_class(node) or self._own_instance(receiver):
            return  # `self.backward()`, `learner.backward(x)`: a method of a class (Attention-Gated's models), not a tensor's
        kept = kept_object(analysis, node, analysis.scope_of(node))
        if kept is not None:
            shown = cst.Module([]).code_for_node(receiver)
            self.report(node, receiver=shown, note=f" (left as written: {kept_note(shown, kept)})")
            return
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "scale":
            return  # scaler.scale(loss).backward() belongs to the mixed-precision rules
        apex = analysis.patterns.precision.apex if analysis.patterns is not None else None
        if apex is not None and apex.convertible and any(node in (b.backward, b.plain) for b in apex.backwards):
            return  # so does `scaled_loss.backward()` under apex's `amp.scale_loss` and its `else` (AM405)
        args = [cst.Arg(receiver.with_changes(lpar=[], rpar=[]))]
        for i, arg in enumerate(node.args):
            if arg.keyword is None and arg.star == "" and i < len(_POSITIONAL):
                arg = arg.with_changes(keyword=cst.Name(_POSITIONAL[i]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            args.append(arg)
        shown = cst.Module([]).code_for_node(receiver)
        fields = {"receiver": shown if len(shown) < 40 else "loss", "note": ""}
        reach = analysis.accelerator_at(node)
        if reach is None:  # no Accelerator reaches this code: leave it and say why
            self.report(node, **{**fields, "note": unreachable_note(analysis, node)})
            return
        new = attr_call(reach, "backward", with_clean_commas(_with_commas(args)))
        self.report(node, edits=[replace(node, new)], **fields)


    def _in_tensor_class(self, node: cst.Call) -> bool:
        """Inside a class built on `Tensor`, where `self` is a tensor."""
        current = self.analysis.parent(node)
        while current is not None and not isinstance(current, cst.ClassDef):
            current = self.analysis.parent(current)
        return current is not None and any("Tensor" in (dotted_name(b.value) or "") for b in current.bases)

    def _own_instance(self, receiver: cst.BaseExpression) -> bool:
        """A name bound only to instances of this file's classes that define `backward`
        (`learner = Learner(model)`): its `backward(x)` is that method."""
        if not isinstance(receiver, cst.Name):
            return False
        classes = {
            name for name, c in self.analysis.facts.classes.items()
            if any(isinstance(s, cst.FunctionDef) and s.name.value == "backward" for s in c.body.body)
        }
        values = [b.value for b in self.analysis.facts.bindings if b.name == receiver.value]
        return bool(values) and all(isinstance(v, cst.Call) and dotted_name(v.func) in classes for v in values)

    def _autograd_backward(self, node: cst.Call) -> None:
        """`torch.autograd.backward(loss, grad_tensors=g, retain_graph=True)` is
        `accelerator.backward(loss, gradient=g, retain_graph=True)`; a list of tensors is
        left as written (the Accelerator's backward takes one loss)."""
        analysis = self.analysis
        shown = cst.Module([]).code_for_node(node.func).strip()
        receiver = shown.rpartition(".")[0]
        first = node.args[0] if node.args and node.args[0].keyword is None and node.args[0].star == "" else None
        reach = analysis.accelerator_at(node)
        if first is None or isinstance(first.value, (cst.List, cst.Tuple)) or any(a.star for a in node.args):
            note = " (left as written: several tensors at once; call `accelerator.backward` on their sum, or on each)"
            self.report(node, receiver=receiver, note=note)
            return
        if reach is None:
            self.report(node, receiver=receiver, note=unreachable_note(analysis, node))
            return
        args = [cst.Arg(first.value)]
        for i, arg in enumerate(node.args[1:]):
            if arg.keyword is None and i < len(_AUTOGRAD_POSITIONAL):
                arg = arg.with_changes(keyword=cst.Name(_AUTOGRAD_POSITIONAL[i]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            elif arg.keyword is not None and arg.keyword.value in ("grad_tensors", "grad_variables"):
                arg = arg.with_changes(keyword=cst.Name("gradient"))
            args.append(arg)
        new = attr_call(reach, "backward", with_clean_commas(_with_commas(args)))
        self.report(node, edits=[replace(node, new)], receiver=receiver, note="")


# torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph): after the tensors
_AUTOGRAD_POSITIONAL = ("gradient", "retain_graph", "create_graph")


def _with_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [a.with_changes(comma=comma) for a in args]
