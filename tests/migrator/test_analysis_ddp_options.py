"""analysis/ddp_options.py: the DDP options a script calls for, from its own wrap or from an
encoder whose pooler gets no gradient."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.options import setup_arguments


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


TRAIN = "\nmodel = Tagger()\nopt = torch.optim.AdamW(model.parameters(), lr=1e-5)\n"


def _encoder(built: str, forward: str, head: str = "import torch\nimport transformers\nfrom torch import nn\n") -> str:
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    return (
        f"{head}\nclass Tagger(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        self.enc = {built}\n        self.out = nn.Linear(768, 3)\n\n    def forward(self, ids):\n{body}\n" + TRAIN
    )


def _poolers(code: str) -> list[str]:
    return [f"{p.attribute} {p.family}" for p in _analyze(code).patterns.ddp.poolers]


BERT = 'transformers.BertModel.from_pretrained("bert-base-uncased")'


@pytest.mark.parametrize(
    "forward",
    [
        "o1, _ = self.enc(ids, return_dict=False)\nreturn self.out(o1)",
        "hidden, pooled = self.enc(ids, return_dict=False)\nreturn self.out(hidden)",
        "return self.out(self.enc(ids)[0])",
        "return self.out(self.enc(ids).last_hidden_state)",
        "out = self.enc(ids)\nx = out.last_hidden_state[:, 0]\nreturn self.out(x)",
        "out = self.enc(ids)\nreturn self.out(out['last_hidden_state'])",
    ],
)
def test_the_pooled_output_thrown_away(forward: str) -> None:
    assert _poolers(_encoder(BERT, forward)) == ["self.enc BertModel"]


@pytest.mark.parametrize(
    "forward",
    [
        "_, pooled = self.enc(ids, return_dict=False)\nreturn self.out(pooled)",
        "return self.out(self.enc(ids)[1])",
        "return self.out(self.enc(ids).pooler_output)",
        "out = self.enc(ids)\nreturn self.out(out[0] + out[1])",
        "out = self.enc(ids)\nreturn self.out(out)",
        "hidden, *rest = self.enc(ids, return_dict=False)\nreturn self.out(hidden)",
        "self.enc.pooler.requires_grad_(False)\nreturn self.out(self.enc(ids)[0])",
    ],
)
def test_the_pooled_output_read_or_the_pooler_handled(forward: str) -> None:
    assert _poolers(_encoder(BERT, forward)) == []


@pytest.mark.parametrize(
    "built,expected",
    [
        ('transformers.RobertaModel.from_pretrained("roberta-base")', ["self.enc RobertaModel"]),
        ('transformers.AutoModel.from_pretrained(name)', ["self.enc AutoModel"]),
        ("transformers.BertModel(config)", ["self.enc BertModel"]),
        ("transformers.AutoModel.from_config(config)", ["self.enc AutoModel"]),
        ("transformers.AutoModel(config)", []),
        ('transformers.BertModel.from_pretrained("b", add_pooling_layer=False)', []),
        ('transformers.DistilBertModel.from_pretrained("distilbert-base-uncased")', []),
        ('transformers.AutoModelForTokenClassification.from_pretrained("b")', []),
        ("nn.LSTM(768, 768, batch_first=True)", []),
    ],
)
def test_which_encoders_have_a_pooler(built: str, expected: list[str]) -> None:
    assert _poolers(_encoder(built, "o1, _ = self.enc(ids)\nreturn self.out(o1)")) == expected


def test_imported_by_name_and_the_option_written() -> None:
    head = "import torch\nfrom torch import nn\nfrom transformers import BertModel\n"
    code = _encoder('BertModel.from_pretrained("bert-base-uncased")', "return self.out(self.enc(ids)[0])", head)
    analysis = _analyze(code)
    assert [p.family for p in analysis.patterns.ddp.poolers] == ["BertModel"]
    assert setup_arguments(analysis) == "kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]"


def test_a_class_never_built_is_not_the_model() -> None:
    code = _encoder(BERT, "return self.out(self.enc(ids)[0])").replace("model = Tagger()", "model = nn.Linear(2, 2)")
    assert _poolers(code) == []


WRAPS = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
def main(args):
    g = DDP(Gen(), device_ids=[0], {g})
    d = DDP(Disc(), device_ids=[0], {d})
    og = torch.optim.Adam(g.parameters())
    od = torch.optim.Adam(d.parameters())
    for x in loader:
        og.step()
"""


@pytest.mark.parametrize(
    "g,d,expected",
    [
        ("broadcast_buffers=False", "broadcast_buffers=False", (("broadcast_buffers", "False"),)),
        ("broadcast_buffers=False", "dim=0", ()),  # the wraps disagree: AM918 says so
        ("find_unused_parameters=True", "static_graph=False", (("find_unused_parameters", "True"),)),
        ("bucket_cap_mb=args.mb", "bucket_cap_mb=args.mb", (("bucket_cap_mb", "args.mb"),)),
    ],
)
def test_options_of_two_wraps(g: str, d: str, expected: tuple) -> None:
    assert _analyze(WRAPS.format(g=g, d=d)).patterns.ddp.carried == expected


def test_a_value_read_in_another_scope_is_not_carried() -> None:
    code = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    def wrap(model, args):
        return DDP(model, find_unused_parameters=args.unused, broadcast_buffers=False)
    def main(args):
        model = wrap(Net(), args)
        opt = torch.optim.Adam(model.parameters())
        for x in loader:
            opt.step()
    """
    assert _analyze(code).patterns.ddp.carried == (("broadcast_buffers", "False"),)
