"""AM919: the model's forward spreads its batch over GPUs itself."""

from __future__ import annotations

from migrator.rule import Example, Rule


class DataParallelInForward(Rule):
    """## What it does
    Reported by the engine's verifier beside a migration it writes: a model whose
    `forward` calls `nn.parallel.data_parallel(self.main, input, range(self.ngpu))` (the
    DCGAN example's shape). The migration keeps it, since with one GPU per process it is a
    plain call; the finding says what happens with more.

    ## Why is this bad?
    On N processes each process owns one GPU. A forward that spreads its batch over
    `range(ngpu)` GPUs puts work on devices other processes own, and on every process but
    the first the parameters are not on `cuda:0`, where `data_parallel` expects them: it
    raises.

    ## Example
    ```python
    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            return nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        return self.main(input)
    ```

    Use instead: one device per process (`--ngpu 1`), and let the launcher start one
    process per GPU:
    ```python
    def forward(self, input):
        return self.main(input)
    ```
    """

    code = "AM919"
    name = "data-parallel-in-forward"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\nfrom torch import nn\n\n\nclass G(nn.Module):\n    def forward(self, x):\n"
                "        return nn.parallel.data_parallel(self.main, x, range(2))\n\n\n"
                "model = G()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            refused=(
                "import torch\nfrom torch import nn\nfrom runtime import Accelerator\n\n\nclass G(nn.Module):\n"
                "    def forward(self, x):\n        return nn.parallel.data_parallel(self.main, x, range(2))\n\n\n"
                "accelerator = Accelerator()\nmodel = G()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("7:16",),
        ),
    )
