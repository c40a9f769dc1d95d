"""Layers a model class builds and never uses, whose parameters get no gradient.

SR-GNN's `GNN.__init__` builds `self.linear_edge_f = nn.Linear(...)` and no method reads
it: a leftover of an experiment. The layer is still a submodule, so its weights are in
`model.parameters()` and in the optimizer, and DistributedDataParallel waits for their
gradients, which never come: the second step stops with "Expected to have finished
reduction in the prior iteration". The wrap then needs `find_unused_parameters=True`
(analysis/ddp_options.py), and AM228 says why.

Only a layer with parameters of `torch.nn` (`nn.Linear`, convolutions, embeddings,
recurrent layers, norms, `nn.Parameter`), bound once as `self.<name>` in `__init__` of a
class with bases, whose name the file never mentions again: no read, no re-binding, no
`getattr`, no walk over the class's children or modules, no subclass in the file.
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
        def visit_Name(self, node: cst.Name) -> None:  # a name, also the `attr` of `self.linear_edge_f`
            mentions[node.value] = mentions.get(node.value, 0) + 1

    module.visit(_Count())
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
        if mentions.get(attribute, 0) != 1 or f"'{attribute}'" in text or f'"{attribute}"' in text:
            continue  # read, bound again, or named in a string (`getattr(self, "fc")`, a state-dict key)
        body = cst.Module([]).code_for_node(cls)
        if any(mark in body for mark in _DYNAMIC):
            continue
        out.append(UnusedLayer(b.name, layer, b.value, f"of `{cls.name.value}`", cls.name.value))
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
    never mentions again (a run reads every file another calls)."""
    return any(
        layer.decode() in _WITH_PARAMETERS and len(re.findall(rb"\b" + name + rb"\b", data)) == 1
        for name, layer in _BOUND.findall(data)
    )


def _layer(facts: Facts, call: cst.Call) -> str | None:
    qualified = facts.imports.qualify(call.func) or ""
    if not qualified.startswith("torch.nn."):
        return None
    name = qualified.rsplit(".", 1)[-1]
    return name if name in _WITH_PARAMETERS else None
