"""analysis/unused_heads.py: a torchvision classifier run only through its layers leaves its
head without gradients, so DDP needs find_unused_parameters."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import analyze
from migrator.analysis.options import setup_arguments
from migrator.analysis.unused_heads import classifier_head

HEAD = "import torch\nimport torchvision\nfrom torch import nn\n"
TRAIN = "\nmodel = Encoder()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
LAYERS = "return self.base.layer1(self.base.conv1(x))"


def _model(built: str, forward: str, init: str = "", head: str = HEAD) -> str:
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    extra = textwrap.indent(textwrap.dedent(init).strip(), " " * 8) + "\n" if init else ""
    return (
        f"{head}\nclass Encoder(nn.Module):\n    def __init__(self, depth=18):\n        super().__init__()\n"
        f"        self.base = {built}\n{extra}\n    def forward(self, x):\n{body}\n" + TRAIN
    )


def _heads(code: str) -> list[str]:
    module = cst.parse_module(code)
    analysis = analyze(MetadataWrapper(module, unsafe_skip_copy=True))
    return [f"{h.attribute} {h.family} {h.head}" for h in analysis.patterns.ddp.heads]


@pytest.mark.parametrize(
    "qualified,expected",
    [
        ("torchvision.models.resnet50", ("resnet50", "fc")),
        ("torchvision.models.resnet.resnet18", ("resnet18", "fc")),
        ("torchvision.models.wide_resnet50_2", ("wide_resnet50_2", "fc")),
        ("torchvision.models.vgg16_bn", ("vgg16_bn", "classifier")),
        ("torchvision.models.efficientnet_b0", ("efficientnet_b0", "classifier")),
        ("torchvision.models.vit_b_16", ("vit_b_16", "heads")),
        ("torchvision.models.swin_t", ("swin_t", "head")),
        ("torchvision.models.resnet", None),  # the module, not a constructor
        ("torchvision.models.detection.fasterrcnn_resnet50_fpn", None),
        ("timm.create_model", None),
        (None, None),
    ],
)
def test_which_constructors_build_a_classifier(qualified, expected) -> None:
    assert classifier_head(qualified) == expected


@pytest.mark.parametrize(
    "built",
    [
        "torchvision.models.resnet18(pretrained=True)",
        "resnets[depth](pretrained=True)",
    ],
)
@pytest.mark.parametrize(
    "forward",
    [
        LAYERS,
        # open-reid's walk over the children, stopped before the pooling
        "for name, module in self.base._modules.items():\n    if name == 'avgpool':\n        break\n    x = module(x)\nreturn x",
    ],
)
def test_the_head_never_runs(built: str, forward: str) -> None:
    code = _model(built, forward)
    if "resnets" in built:
        code = code.replace(
            "        self.base = ",
            "        resnets = {18: torchvision.models.resnet18, 50: torchvision.models.resnet50}\n        self.base = ",
        )
    family = "resnet18" if "resnets" not in built else "resnet18/resnet50"
    assert _heads(code) == [f"self.base {family} fc"]


@pytest.mark.parametrize(
    "forward,init",
    [
        ("return self.base(x)", ""),  # the whole model runs
        ("return self.base.fc(self.base.layer1(x).mean((2, 3)))", ""),
        ("for module in self.base.children():\n    x = module(x)\nreturn x", ""),  # walked whole
        (LAYERS, "self.base.fc = nn.Identity()"),
        (LAYERS, "self.base.fc = None"),
        (LAYERS, "del self.base.fc"),
        (LAYERS, "self.base.fc.requires_grad_(False)"),
        (LAYERS, "self.base.requires_grad_(False)"),
        (LAYERS, "for p in self.base.parameters():\n    p.requires_grad = False"),
        (LAYERS, "self.body = IntermediateLayerGetter(self.base, {'layer4': 'out'})"),  # handed on
    ],
)
def test_the_head_runs_or_is_handled(forward: str, init: str) -> None:
    assert _heads(_model("torchvision.models.resnet18(pretrained=True)", forward, init)) == []


def test_a_head_read_for_its_size_or_replaced_by_a_layer_is_still_unused() -> None:
    init = "width = self.base.fc.in_features\nself.base.fc = nn.Linear(width, 7)"
    assert _heads(_model("torchvision.models.resnet18()", LAYERS, init)) == ["self.base resnet18 fc"]


def test_a_table_of_different_heads_is_not_recognised() -> None:
    code = _model("nets[depth]()", LAYERS).replace(
        "        self.base = ", "        nets = {1: torchvision.models.resnet18, 2: torchvision.models.vgg16}\n        self.base = "
    )
    assert _heads(code) == []


def test_imported_constructor_and_the_option_written() -> None:
    head = "import torch\nfrom torch import nn\nfrom torchvision.models import vgg16\n"
    code = _model("vgg16(pretrained=True)", "return self.base.features(x)", head=head)
    module = cst.parse_module(code)
    analysis = analyze(MetadataWrapper(module, unsafe_skip_copy=True))
    assert [f"{h.family} {h.head}" for h in analysis.patterns.ddp.heads] == ["vgg16 classifier"]
    assert setup_arguments(analysis) == "kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]"


def test_a_class_never_built_is_not_the_model() -> None:
    code = _model("torchvision.models.resnet18()", LAYERS).replace("model = Encoder()", "model = nn.Linear(2, 2)")
    assert _heads(code) == []
