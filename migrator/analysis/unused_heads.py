"""Torchvision classifiers used as backbones, whose classification head gets no gradient.

A model class holds a whole classifier (`self.base = torchvision.models.resnet50(...)`,
also picked from a table of constructors, `resnets[depth](pretrained)`) and calls only
its layers: `self.base.layer1(x)`, or a walk over `self.base._modules` that breaks
before `avgpool`. The head (`fc`, `classifier`, `head`) stays registered, so the
optimizer holds it and DDP waits for its gradients, which never come: the second step
stops with "Expected to have finished reduction in the prior iteration".

The backbone counts as whole (nothing unused) where it is called itself, its head is
called, replaced by a module without parameters (`nn.Identity()`), deleted, or frozen.
A backbone handed on (`IntermediateLayerGetter(self.base, ...)`) is not recognised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]

# torchvision.models families (constructor prefix) and the child that classifies.
_HEADS = (
    ("resnet", "fc"), ("resnext", "fc"), ("wide_resnet", "fc"), ("regnet", "fc"), ("shufflenet", "fc"),
    ("googlenet", "fc"), ("inception", "fc"), ("vgg", "classifier"), ("alexnet", "classifier"),
    ("densenet", "classifier"), ("mobilenet", "classifier"), ("efficientnet", "classifier"),
    ("mnasnet", "classifier"), ("squeezenet", "classifier"), ("convnext", "classifier"),
    ("maxvit", "classifier"), ("swin", "head"), ("vit", "heads"),
)
_NAMED = ("alexnet", "googlenet")  # constructors named like their family; `resnet` alone is a module
_MODULE = "torchvision.models."
_CHILDREN = ("_modules", "children", "named_children")
_EMPTY = ("Identity", "Sequential", "None")  # a head replaced by these has no parameters


@dataclass(frozen=True)
class UnusedHead:
    attribute: str  # `self.base`
    family: str  # `resnet50`
    head: str  # `fc`
    built: cst.Call  # or, for a class of another file, the call here that builds the model
    where: str  # "of `ReID`", and the file for a class of another file
    owner: str = ""  # the model class


def classifier_head(qualified: str | None) -> tuple[str, str] | None:
    """(`resnet50`, `fc`) for `torchvision.models.resnet50` (also through a submodule,
    `torchvision.models.resnet.resnet50`)."""
    if not qualified or not qualified.startswith(_MODULE):
        return None
    family = qualified.rsplit(".", 1)[-1]
    for prefix, head in _HEADS:
        rest = family[len(prefix):]
        if family.startswith(prefix) and (rest[:1] in ("_", *"0123456789") or (not rest and prefix in _NAMED)):
            return family, head
    return None


def unused_heads(facts: Facts, parent: Parent, built_elsewhere: bool = False) -> list[UnusedHead]:
    """The backbones of this file's model classes whose head is never used. A class counts
    when this file builds it, or with `built_elsewhere` (another file does)."""
    out = []
    seen: set[tuple[str, str]] = set()
    for b in facts.bindings:
        if not b.name.startswith("self.") or b.name.count(".") != 1 or not isinstance(b.value, cst.Call):
            continue
        cls = facts.method_of.get(id(b.scope))
        found = _constructor(facts, b.value)
        if found is None or cls is None or (cls.name.value, b.name) in seen:
            continue
        if not (built_elsewhere or any(c.func == cls.name.value for c in facts.calls)):
            continue
        seen.add((cls.name.value, b.name))
        family, head = found
        if _head_unused(cls, b.name, head, parent):
            out.append(UnusedHead(b.name, family, head, b.value, f"of `{cls.name.value}`", cls.name.value))
    return out


def _constructor(facts: Facts, call: cst.Call) -> tuple[str, str] | None:
    """The classifier a call builds: `models.resnet50(...)`, or a table of constructors
    subscripted, `resnets[depth](...)` / `ResNet.__factory[depth](...)`, whose values
    all build classifiers with the same head."""
    if not isinstance(call.func, cst.Subscript):
        return classifier_head(facts.imports.qualify(call.func))
    table = dotted_name(call.func.value)
    if table is None:
        return None
    last = table.rsplit(".", 1)[-1]
    for b in facts.bindings:
        if b.name in (table, last) and isinstance(b.value, cst.Dict) and b.element is None:
            found = [classifier_head(facts.imports.qualify(e.value)) for e in b.value.elements if isinstance(e, cst.DictElement)]
            heads = {f[1] if f else None for f in found}
            if found and len(heads) == 1 and None not in heads:
                return "/".join(dict.fromkeys(f[0] for f in found if f)), heads.pop()
    return None


def _head_unused(cls: cst.ClassDef, attribute: str, head: str, parent: Parent) -> bool:
    """Every use of `attribute` in its class is known, and none runs the whole model or
    the head, or takes the head's parameters out of training."""
    for node in _uses(cls, attribute):
        up = parent(node)
        if isinstance(up, cst.Call) and up.func is node:
            return False  # the whole model runs
        if isinstance(up, cst.AssignTarget):
            continue  # its binding
        if not (isinstance(up, cst.Attribute) and up.value is node):
            return False  # handed on: not recognised
        child = up.attr.value
        if child == head and not _head_left_idle(up, parent):
            return False
        if child in _CHILDREN and _walked_whole(up, parent):
            return False
        if child in ("requires_grad_", "parameters", "named_parameters") and _frozen(up, parent):
            return False
    return True


def _uses(cls: cst.ClassDef, attribute: str) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if dotted_name(node) == attribute:
                found.append(node)
                return False
            return True

    cls.visit(_Find())
    return found


def _head_left_idle(head: cst.Attribute, parent: Parent) -> bool:
    """`self.base.fc` read for its size (`.in_features`) or re-bound to a module with
    parameters: anything but a call, a freeze, or a replacement without parameters."""
    up = parent(head)
    if isinstance(up, cst.Call) and up.func is head:
        return False
    if isinstance(up, cst.AssignTarget):
        assign = parent(up)
        value = assign.value if isinstance(assign, cst.Assign) else None
        return not (isinstance(value, (cst.Call, cst.Name)) and (dotted_name(value.func if isinstance(value, cst.Call) else value) or "").rsplit(".", 1)[-1] in _EMPTY)
    if isinstance(up, cst.Del):
        return False
    if isinstance(up, cst.Attribute) and up.value is head:
        if up.attr.value in ("requires_grad_", "parameters", "named_parameters"):
            return not _frozen(up, parent)
    return True


def _walked_whole(children: cst.Attribute, parent: Parent) -> bool:
    """A `for` over the backbone's children that never breaks runs every child, head
    included; one that breaks (`if name == 'avgpool': break`) stops before it."""
    node: cst.CSTNode | None = children
    while node is not None and not isinstance(node, cst.For):
        node = parent(node)
    if node is None:
        return False
    return not _contains(node.body, cst.Break)


def _frozen(attribute: cst.Attribute, parent: Parent) -> bool:
    """`x.requires_grad_(False)`, or a `for p in x.parameters():` whose body sets
    `requires_grad`."""
    call = parent(attribute)
    if attribute.attr.value == "requires_grad_":
        return isinstance(call, cst.Call)
    node: cst.CSTNode | None = call
    while node is not None and not isinstance(node, cst.For):
        node = parent(node)
    return node is not None and "requires_grad" in cst.Module([]).code_for_node(node.body)


def _contains(node: cst.CSTNode, kind: type) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kind):
                found.append(n)
            return not found and not isinstance(n, (cst.For, cst.While, cst.FunctionDef)) or n is node

    node.visit(_Find())
    return bool(found)
