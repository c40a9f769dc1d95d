"""AM226: a torchvision classifier used as a backbone keeps a head that gets no gradient."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.ddp_options import unused_option_action
from migrator.rule import Example, Rule


class BackboneHeadUnused(Rule):
    """## What it does
    Finds a model that holds a whole torchvision classifier as a backbone
    (`self.base = torchvision.models.resnet50(pretrained=True)`, also picked from a
    table, `resnets[depth](pretrained)`) and runs only its layers: `self.base.conv1(x)`
    ... `self.base.layer4(x)`, or a walk over `self.base._modules` that breaks before
    `avgpool`. Its head (`fc` for ResNets, `classifier` for VGG, DenseNet, MobileNet,
    EfficientNet, ConvNeXt, `head`/`heads` for Swin and ViT) never runs. The Accelerator
    is then created with `kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]`
    (AM001 writes it), and this note says why. An Accelerator the script already creates
    is its author's: the note then asks for the option.

    ## Why is this bad?
    The head is still a submodule, so its weights are in `model.parameters()` and in
    the optimizer, but they take no part in the loss and never get a gradient. On one
    process that is harmless; under DistributedDataParallel every process waits for all
    gradients of a step before the next, and the second step stops with "Expected to
    have finished reduction in the prior iteration ... find_unused_parameters=True".

    ## Example
    ```python
    class DepthEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torchvision.models.resnet18(pretrained=True)

        def forward(self, x):
            x = self.encoder.relu(self.encoder.bn1(self.encoder.conv1(x)))
            return self.encoder.layer4(self.encoder.layer3(self.encoder.layer2(self.encoder.layer1(x))))
    ```

    Use instead: (what the migration writes)
    ```python
    accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    ```
    or, cheaper (DDP then need not search for unused parameters at every step), drop the
    head: `self.encoder.fc = nn.Identity()`, or keep only the layers,
    `nn.Sequential(*list(resnet.children())[:-2])` on a local `resnet`.

    ## Known limits
    The backbone counts as whole where the class calls it (`self.base(x)`), calls its
    head, replaces the head with `nn.Identity()`/`nn.Sequential()`/`None`, deletes it,
    or freezes it (`requires_grad_(False)`, or a loop over its `parameters()` setting
    `requires_grad`). A backbone handed to another module (`IntermediateLayerGetter(self.base)`)
    is not followed. Only torchvision's classifiers are known; other models whose
    parameters go unused need the option by hand. A model class of another file of the
    run is reported at the call that builds it.
    """

    code = "AM226"
    name = "backbone-head-unused"
    message = (
        "`{attribute}` {where} ({family}) runs only its layers, so its head `{attribute}.{head}` gets no gradient "
        "and DDP would stop at the second step: {action} `DistributedDataParallelKwargs(find_unused_parameters=True)`; "
        "cheaper, where no checkpoint needs its keys: `{attribute}.{head} = nn.Identity()`"
    )
    examples = (
        Example(
            before=(
                "import torch\nimport torchvision\nfrom torch import nn\n\n\nclass Encoder(nn.Module):\n"
                "    def __init__(self):\n        super().__init__()\n"
                "        self.base = torchvision.models.resnet18(pretrained=True)\n\n"
                "    def forward(self, x):\n        return self.base.layer1(self.base.conv1(x))\n\n\n"
                "model = Encoder()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            after=None,
            at=("9:21",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating or not patterns.ddp.heads:
            return
        action = unused_option_action(analysis)
        for unused in patterns.ddp.heads:
            self.report(
                unused.built, attribute=unused.attribute, where=unused.where, family=unused.family,
                head=unused.head, action=action,
            )
