"""The options of the DDP wrap the Accelerator needs, from what the script shows.

Two sources, read once per pass:

- a hand-made `DistributedDataParallel(model, ..., find_unused_parameters=True)` (the wrap
  AM210 removes): its options that `DistributedDataParallelKwargs` takes are carried over;
- a model whose parameters get no gradient in a well-known way: a Hugging Face encoder
  with a pooler (`transformers.BertModel.from_pretrained(...)` held as `self.bert`) whose
  pooled output `forward` throws away (`o1, _ = self.bert(...)`, `self.bert(...)[0]`,
  `.last_hidden_state`). DDP then waits at the second step for the pooler's gradients,
  so the wrap needs `find_unused_parameters=True` (`UnusedPooler`, reported by AM221);
- a torchvision classifier held as a backbone whose head is never run (`UnusedHead`,
  analysis/unused_heads.py, reported by AM226);
- a layer a model class builds and never uses (`UnusedLayer`, analysis/unused_layers.py,
  reported by AM228).

The result is one `kwargs_handlers=[DistributedDataParallelKwargs(...)]` option, which
AM001 writes into the Accelerator it creates. Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import dotted_name
from migrator.analysis.unused_heads import UnusedHead, unused_heads
from migrator.analysis.unused_layers import UnusedLayer, unused_layers

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]

HANDLER = "DistributedDataParallelKwargs"
_UNKNOWN = "<unknown>"  # a value that cannot be carried
_BUILDERS = ("from_pretrained", "from_config")
# What DistributedDataParallelKwargs takes (Accelerate's fields), with DDP's defaults.
DEFAULTS = {
    "dim": "0", "broadcast_buffers": "True", "bucket_cap_mb": "25", "find_unused_parameters": "False",
    "check_reduction": "False", "gradient_as_bucket_view": "False", "static_graph": "False",
}
_DDP = {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
# transformers encoders built with a pooler unless `add_pooling_layer=False`; AutoModel
# resolves to one of them for BERT-like checkpoints (and to a model without a pooler,
# for which the option only costs a little speed, for the others).
POOLED_ENCODERS = frozenset({
    "BertModel", "RobertaModel", "XLMRobertaModel", "CamembertModel", "AlbertModel", "LongformerModel",
    "MPNetModel", "BigBirdModel", "ErnieModel", "MegatronBertModel", "Data2VecTextModel", "RemBertModel",
    "AutoModel",
})


@dataclass(frozen=True, eq=False)
class UnusedPooler:
    """`self.<attribute> = transformers.<family>.from_pretrained(...)` (the `built` call),
    only ever called with its pooled output discarded. For a model class of another file
    of the run, `built` is the call here that builds the model, and `where` names the
    class and its file."""

    attribute: str
    family: str
    built: cst.Call
    where: str = ""
    owner: str = ""  # the model class holding the encoder


@dataclass(frozen=True, eq=False)
class DdpOptions:
    carried: tuple[tuple[str, str], ...]  # (keyword, code) for DistributedDataParallelKwargs
    poolers: tuple[UnusedPooler, ...]
    heads: tuple[UnusedHead, ...] = ()
    layers: tuple[UnusedLayer, ...] = ()

    @property
    def handler_code(self) -> str | None:
        return _handler(self.carried)

    @property
    def literal_code(self) -> str | None:
        """The handler with the options written as literals only (`True`, `25`): what can
        still be carried where a name another option reads is not bound."""
        return _handler(tuple((k, v) for k, v in self.carried if _literal(v)))


def _handler(carried: tuple[tuple[str, str], ...]) -> str | None:
    if not carried:
        return None
    return f"[{HANDLER}(" + ", ".join(f"{k}={v}" for k, v in carried) + ")]"


def _literal(code: str) -> bool:
    try:
        expression = cst.parse_expression(code)
    except cst.ParserSyntaxError:
        return False
    return isinstance(expression, (cst.Integer, cst.Float)) or (isinstance(expression, cst.Name) and expression.value in ("True", "False"))


def ddp_options(
    facts: Facts, parent: Parent, models: Mapping[str, str] | None = None, training_scope: cst.CSTNode | None = None,
    module: cst.Module | None = None,
) -> DdpOptions:
    """`models`: calls of model classes of other files of the run (`model.EntityModel`)
    that hold an unused pooler or head, each described as project/unused.py writes it;
    `training_scope`: where the Accelerator is created (see _wrap_options)."""
    carried = dict(_wrap_options(facts, training_scope))
    elsewhere = built_here(facts, models or {})
    poolers = tuple(unused_poolers(facts, parent)) + tuple(p for p in elsewhere if isinstance(p, UnusedPooler))
    heads = tuple(unused_heads(facts, parent)) + tuple(h for h in elsewhere if isinstance(h, UnusedHead))
    layers = tuple(unused_layers(facts, module)) if module is not None else ()
    layers += tuple(u for u in elsewhere if isinstance(u, UnusedLayer))
    if poolers or heads or layers:
        carried["find_unused_parameters"] = "True"
    return DdpOptions(tuple(carried.items()), poolers, heads, layers)


def _wrap_options(facts: Facts, training_scope: cst.CSTNode | None) -> dict[str, str]:
    """The non-default options the script's DDP wraps agree on. Where two wraps disagree
    (one sets an option, the other leaves the default) the option is not carried and the
    verifier's AM918 says so; `find_unused_parameters=True` is carried whenever one wrap
    sets it, since it only costs the others a little speed. A value that reads names
    (`args.unused`) is carried only from a wrap in the scope that trains, where the
    Accelerator goes: elsewhere the same name may mean something else."""
    per_wrap = []
    for c in facts.calls:
        if c.qualified not in _DDP:
            continue
        options = {}
        for arg in c.node.args:
            if arg.keyword is not None and arg.keyword.value in DEFAULTS:
                code = cst.Module([]).code_for_node(arg.value).strip()
                options[arg.keyword.value] = code if _literal(code) or c.scope is training_scope else _UNKNOWN
        per_wrap.append(options)
    out: dict[str, str] = {}
    written = dict.fromkeys(k for options in per_wrap for k in options)  # in the order the script writes them
    for keyword in written:
        default = DEFAULTS[keyword]
        values = {options.get(keyword, default) for options in per_wrap}
        if keyword == "find_unused_parameters" and "True" in values:
            out[keyword] = "True"
        elif len(values) == 1 and values != {default} and _UNKNOWN not in values:
            (out[keyword],) = values
    return out


def describe(unused: UnusedPooler | UnusedHead | UnusedLayer, where: str) -> str:
    """How Config.project_unused carries an unused part of another file's model class."""
    if isinstance(unused, UnusedLayer):
        return f"layer {unused.attribute} {unused.layer} {unused.where} in {where}"
    if isinstance(unused, UnusedHead):
        return f"head {unused.attribute} {unused.family} {unused.head} {unused.where} in {where}"
    return f"pooler {unused.attribute} {unused.family} {unused.where} in {where}"


def built_here(facts: Facts, models: Mapping[str, str]) -> list[UnusedPooler | UnusedHead | UnusedLayer]:
    """The unused parts of other files' model classes (Config.project_unused, as `describe`
    writes them), at the calls of this file that build those models."""
    out: list[UnusedPooler | UnusedHead | UnusedLayer] = []
    for c in facts.calls:
        described = models.get(c.func or "")
        if described is None:
            continue
        kind, rest = described.split(" ", 1)
        if kind == "layer":
            attribute, layer, where = rest.split(" ", 2)
            out.append(UnusedLayer(attribute, layer, c.node, where))
        elif kind == "head":
            attribute, family, head, where = rest.split(" ", 3)
            out.append(UnusedHead(attribute, family, head, c.node, where))
        else:
            attribute, family, where = rest.split(" ", 2)
            out.append(UnusedPooler(attribute, family, c.node, where))
    return out


def unused_poolers(facts: Facts, parent: Parent, built_elsewhere: bool = False) -> list[UnusedPooler]:
    """The encoders of this file's model classes that lose their pooled output. A class
    counts when this file builds it, or with `built_elsewhere` (another file does)."""
    out = []
    for b in facts.bindings:
        if not b.name.startswith("self.") or b.name.count(".") != 1 or not isinstance(b.value, cst.Call):
            continue
        family = _pooled_encoder(facts, b.value)
        cls = facts.method_of.get(id(b.scope))
        if family is None or cls is None or not (built_elsewhere or _instantiated(facts, cls.name.value)):
            continue
        uses = [c.node for c in facts.calls if c.func == b.name and facts.method_of.get(id(c.scope)) is cls]
        if uses and _only_called(facts, cls, b.name, len(uses)) and all(_pooled_discarded(u, facts, parent) for u in uses):
            out.append(UnusedPooler(b.name, family, b.value, f"of `{cls.name.value}`", cls.name.value))
    return out


def _pooled_encoder(facts: Facts, call: cst.Call) -> str | None:
    """`BertModel` for `transformers.BertModel.from_pretrained(...)`, `.from_config(...)` or
    `BertModel(config)` (through any import spelling), unless built with `add_pooling_layer=...`."""
    qualified = next((c.qualified for c in facts.calls if c.node is call), None) or ""
    parts = qualified.split(".")
    if parts[0] != "transformers" or len(parts) < 2:
        return None
    built = parts[-1] in _BUILDERS and len(parts) >= 3
    family = parts[-2] if built else parts[-1]
    if family not in POOLED_ENCODERS or (family == "AutoModel" and not built):
        return None
    if any(a.keyword is not None and a.keyword.value == "add_pooling_layer" for a in call.args):
        return None
    return family


def _instantiated(facts: Facts, class_name: str) -> bool:
    return any(c.func == class_name for c in facts.calls)


def _only_called(facts: Facts, cls: cst.ClassDef, attribute: str, calls: int) -> bool:
    """`self.bert` appears in its class only where it is bound and where it is called:
    `self.bert.pooler`, `self.bert.parameters()` or passing it on may use the pooler
    or change what trains, so the pattern is not recognised there."""
    seen = 0
    for node in _attributes(cls):
        if dotted_name(node) == attribute:
            seen += 1
    bindings = sum(1 for b in facts.bindings if b.name == attribute and facts.method_of.get(id(b.scope)) is cls)
    return seen == calls + bindings


def _attributes(node: cst.CSTNode) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            found.append(n)

    node.visit(_Find())
    return found


def _pooled_discarded(call: cst.Call, facts: Facts, parent: Parent) -> bool:
    """The call's result is used only through its first element (the hidden states):
    `o1, _ = call`, `call[0]`, `call.last_hidden_state`, or a name read only that way."""
    up = parent(call)
    if isinstance(up, (cst.Subscript, cst.Attribute)):
        return _first_element(up, call)
    if isinstance(up, cst.Assign) and up.value is call and len(up.targets) == 1:
        target = up.targets[0].target
        scope = next((c.scope for c in facts.calls if c.node is call), None)
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if len(elements) < 2 or any(isinstance(e, cst.StarredElement) for e in target.elements):
                return False
            pooled = elements[1]
            return isinstance(pooled, cst.Name) and not _read(facts, pooled.value, scope)
        if isinstance(target, cst.Name):
            loads = [n.node for n in facts.loads if n.name == target.value and n.scope is scope]
            return bool(loads) and all(_first_element(parent(n), n) for n in loads)
    return False


def _first_element(up: cst.CSTNode | None, value: cst.CSTNode) -> bool:
    if isinstance(up, cst.Attribute) and up.value is value:
        return up.attr.value == "last_hidden_state"
    if isinstance(up, cst.Subscript) and up.value is value and len(up.slice) == 1:
        index = up.slice[0].slice
        if isinstance(index, cst.Index):
            key = index.value
            if isinstance(key, cst.Integer):
                return key.value == "0"
            if isinstance(key, cst.SimpleString):
                return key.evaluated_value == "last_hidden_state"
    return False


def _read(facts: Facts, name: str, scope) -> bool:
    return any(n.name == name and n.scope is scope for n in facts.loads)


def unused_option_action(analysis) -> str:
    """How AM221/AM226 ask for `find_unused_parameters=True`: AM001 writes it into the
    Accelerator it creates; one the script creates itself is the user's to change."""
    from migrator.analysis.options import option_status

    call, _, _ = option_status(analysis, "kwargs_handlers")
    return "give the script's Accelerator" if call is not None else "the Accelerator needs"
