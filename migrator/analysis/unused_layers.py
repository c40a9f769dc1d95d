"""Layers a model class builds and never uses, whose parameters get no gradient.

SR-GNN's `GNN.__init__` builds `self.linear_edge_f = nn.Linear(...)` and no method reads
it: a leftover of an experiment. The layer is still a submodule, so its weights are in
`model.parameters()` and in the optimizer, and DistributedDataParallel waits for their
gradients, which never come: the second step stops with "Expected to have finished
reduction in the prior iteration". The wrap then needs `find_unused_parameters=True`
(analysis/ddp_options.py), and AM228 says why.

Only a layer with parameters of `torch.nn` (`nn.Linear`, convolutions, embeddings,
recurrent layers, norms, `nn.Parameter`), or of a module class of the file holding one,
bound once as `self.<name>` in `__init__` of a class with bases, whose name the file never
mentions again but to copy it there (`copy.deepcopy(self.encoder)`, the copies running in
its place): no read, no re-binding, no `getattr`, no walk over the class's children or
modules, no subclass in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name

_WITH_PARAMETERS = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "MultiheadAttention", "PReLU", "Parameter",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder", "Transformer",
})
# reaching submodules by name or all at once: a layer may be used without its name written
_DYNAMIC = ("getattr(", "__dict__", "_modules", ".children(", ".modules(", "named_modules", "named_children", "setattr(")


@dataclass(frozen=True)
class UnusedLayer:
    attribute: str  # `self.linear_edge_f`
    layer: str  # `Linear`
    built: cst.Call  # or, for a class of another file, the call here that builds the model
    where: str  # "of `GNN`", and the file for a class of another file
    owner: str = ""  # the model class


def unused_layers(facts: Facts, module: cst.Module, built_elsewhere: bool = False) -> list[UnusedLayer]:
    """The layers of this file's model classes that nothing uses. A class counts when this
    file builds it, or with `built_elsewhere` (another file does)."""
    candidates = [
        b for b in facts.bindings
        if b.name.startswith("self.") and b.name.count(".") == 1 and isinstance(b.value, cst.Call)
        and isinstance(b.scope, cst.FunctionDef) and b.scope.name.value == "__init__"
    ]
    if not candidates:
        return []
    mentions: dict[str, int] = {}

    class _Count(cst.CSTVisitor):
        # an attribute read or bound anywhere (`self.linear_edge_f`, `model.fc`); a bare name
        # is another variable (Transformer's `for encoder in self.encoders`)
        def visit_Attribute(self, node: cst.Attribute) -> None:
            mentions[node.attr.value] = mentions.get(node.attr.value, 0) + 1

    module.visit(_Count())
    copied = _templates(facts)
    text = module.code
    bases = {dotted_name(b.value) for c in facts.classes.values() for b in c.bases}
    out = []
    for b in candidates:
        cls = facts.method_of.get(id(b.scope))
        layer = _layer(facts, b.value)
        if cls is None or layer is None or not cls.bases or cls.name.value in bases:
            continue
        if not _on_torch_or_here(cls, facts):
            continue  # built on a model class of another file, whose forward may use it (3D-ResNets' ResNeXt(ResNet))
        if not (built_elsewhere or any(c.func == cls.name.value for c in facts.calls)):
            continue
        attribute = b.name.split(".", 1)[1]
        copies = copied.get((cls.name.value, attribute), 0)
        if mentions.get(attribute, 0) != 1 + copies or f"'{attribute}'" in text or f'"{attribute}"' in text:
            continue  # read, bound again, or named in a string (`getattr(self, "fc")`, a state-dict key)
        body = cst.Module([]).code_for_node(cls)
        if any(mark in body for mark in _DYNAMIC):
            continue
        where = f"of `{cls.name.value}`" + (", whose copies (`copy.deepcopy`) run in its place," if copies else "")
        out.append(UnusedLayer(b.name, layer, b.value, where, cls.name.value))
    return out


def _templates(facts: Facts) -> dict[tuple[str, str], int]:
    """(class, attribute) → how often its `__init__` copies `self.<attribute>`
    (`copy.deepcopy(self.encoder)`, Chinese-Text-Classification's Transformer stacking
    copies of a template encoder it keeps and never runs): reads that do not use it."""
    out: dict[tuple[str, str], int] = {}
    for c in facts.calls:
        if c.qualified != "copy.deepcopy" or len(c.node.args) != 1 or not isinstance(c.scope, cst.FunctionDef):
            continue
        cls = facts.method_of.get(id(c.scope))
        name = dotted_name(c.node.args[0].value) or ""
        if cls is not None and c.scope.name.value == "__init__" and name.startswith("self.") and name.count(".") == 1:
            key = (cls.name.value, name.split(".", 1)[1])
            out[key] = out.get(key, 0) + 1
    return out


def _on_torch_or_here(cls: cst.ClassDef, facts: Facts) -> bool:
    """Every base is torch's (`nn.Module`) or a class of this file, whose methods the count
    of mentions has read."""
    for base in cls.bases:
        name = dotted_name(base.value) or ""
        qualified = facts.imports.qualify(base.value) or ""
        if name in facts.classes or name.rpartition(".")[2] == "Module" or qualified.startswith("torch."):
            continue
        return False
    return True


_BOUND = re.compile(rb"self\.(\w+)\s*=\s*(?:torch\.)?(?:nn\.)?(\w+)\(")


def may_hold_one(data: bytes) -> bool:
    """A cheap look before a parse: some `self.<name> = nn.<Layer>(` whose name the text
    never mentions again, or a layer copied (a run reads every file another calls)."""
    return b"deepcopy(self." in data or any(
        layer.decode() in _WITH_PARAMETERS and len(re.findall(rb"\b" + name + rb"\b", data)) == 1
        for name, layer in _BOUND.findall(data)
    )


def _layer(facts: Facts, call: cst.Call) -> str | None:
    """`nn.Linear` for a layer of torch with parameters, or the name of a class of this
    file built on nn.Module that holds one (through its own classes, too)."""
    qualified = facts.imports.qualify(call.func) or ""
    if qualified.startswith("torch.nn."):
        name = qualified.rsplit(".", 1)[-1]
        return f"nn.{name}" if name in _WITH_PARAMETERS else None
    name = dotted_name(call.func) or ""
    return name if _holds_parameters(facts, name, depth=0) else None


def _holds_parameters(facts: Facts, name: str, depth: int) -> bool:
    cls = facts.classes.get(name)
    if cls is None or depth > 3 or not any(
        (dotted_name(b.value) or "").rpartition(".")[2] == "Module" for b in cls.bases
    ):
        return False
    for c in facts.calls:
        if facts.method_of.get(id(c.scope)) is not cls:
            continue
        qualified = c.qualified or ""
        if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in _WITH_PARAMETERS:
            return True
        if c.func != name and _holds_parameters(facts, c.func or "", depth + 1):
            return True
    return False
