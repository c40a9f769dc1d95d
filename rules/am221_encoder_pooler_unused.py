"""AM221: a Hugging Face encoder's pooler gets no gradient, and DDP waits for it."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.ddp_options import unused_option_action
from migrator.rule import Example, Rule


class EncoderPoolerUnused(Rule):
    """## What it does
    Finds a model that holds a Hugging Face encoder built with a pooler
    (`self.bert = transformers.BertModel.from_pretrained(...)`; RoBERTa, XLM-RoBERTa,
    ALBERT, Longformer and the other encoders with `add_pooling_layer`, or `AutoModel`)
    and only ever reads the hidden states it returns: `o1, _ = self.bert(...)`,
    `self.bert(...)[0]`, `self.bert(...).last_hidden_state`, or a result read only that
    way. The Accelerator is then created with
    `kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]`
    (AM001 writes it), and this note says why. An Accelerator the script already
    creates is its author's: the note then asks for the option.

    ## Why is this bad?
    The pooler's weights take no part in the loss, so they never get a gradient. On one
    process that is harmless; under DistributedDataParallel every process waits for all
    gradients of a step before the next, and the second step stops with "Expected to
    have finished reduction in the prior iteration ... find_unused_parameters=True".

    ## Example
    ```python
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel.from_pretrained("bert-base-uncased")
            self.out = nn.Linear(768, 9)

        def forward(self, ids, mask):
            hidden, _ = self.bert(ids, attention_mask=mask, return_dict=False)
            return self.out(hidden)
    ```

    Use instead: (what the migration writes)
    ```python
    accelerator = Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    ```
    or, cheaper (DDP then need not search for unused parameters at every step), build
    the encoder without its pooler, `BertModel.from_pretrained(..., add_pooling_layer=False)`,
    or freeze it (`self.bert.pooler.requires_grad_(False)`).

    ## Known limits
    Only this well-known shape is recognised: in the file that trains, or in a model
    class of another file of the run that the training file builds (reported there, at
    the call that builds the model). Other models whose parameters go unused (a head
    used every other step) need the option by hand. An `AutoModel` checkpoint without a
    pooler (DistilBERT) gets the option too: it only costs a little speed. Recurrent
    layers (`out, _ = self.lstm(x)`) are not this: all their parameters feed `out`.
    """

    code = "AM221"
    name = "encoder-pooler-unused"
    message = (
        "`{attribute}` {where} ({family}) is only read through its hidden states, so its pooler's parameters get no "
        "gradient and DDP would stop at the second step: {action} "
        "`DistributedDataParallelKwargs(find_unused_parameters=True)`; cheaper: build it with "
        "`add_pooling_layer=False` or freeze `{attribute}.pooler`"
    )
    examples = (
        Example(
            before=(
                "import torch\nimport transformers\nfrom torch import nn\n\n\nclass Tagger(nn.Module):\n"
                "    def __init__(self):\n        super().__init__()\n"
                "        self.bert = transformers.BertModel.from_pretrained(\"bert-base-uncased\")\n"
                "        self.out = nn.Linear(768, 9)\n\n    def forward(self, ids):\n"
                "        hidden, _ = self.bert(ids, return_dict=False)\n        return self.out(hidden)\n\n\n"
                "model = Tagger()\nopt = torch.optim.AdamW(model.parameters(), lr=1e-5)\n"
            ),
            after=None,
            at=("9:21",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        patterns = analysis.patterns
        if patterns is None or not analysis.migrating or not patterns.ddp.poolers:
            return
        action = unused_option_action(analysis)
        for pooler in patterns.ddp.poolers:
            family = pooler.family if pooler.family != "AutoModel" else "AutoModel, a BERT-like checkpoint"
            self.report(pooler.built, attribute=pooler.attribute, where=pooler.where, family=family, action=action)
