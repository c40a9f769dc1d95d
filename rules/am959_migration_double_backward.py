"""AM959: the migration would run a second backward through a prepared model."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationDoubleBackward(Rule):
    """## What it does
    Reported by the engine. When a training step of the migrated script differentiates
    through a prepared model twice (`torch.autograd.grad(..., create_graph=True)`, the
    gradient penalty of WGAN-GP, then a backward of the penalty), the whole file is left
    as written and this finding says why.

    ## Why is this bad?
    The prepared model is a DistributedDataParallel wrapper on N processes. It
    synchronises gradients in the backward of its own forward, and waits for a gradient
    of every parameter it tracks. The penalty's backward goes through the gradient of
    the output with respect to the input, which leaves some parameters (a last bias)
    without one: the next forward stops with "Expected to have finished reduction in the
    prior iteration", and `find_unused_parameters=True` does not help. On one process
    nothing is wrapped, which is why it passes testing.

    ## Example
    ```python
    d_out = D(x_hat)
    grad = torch.autograd.grad(outputs=d_out, inputs=x_hat, grad_outputs=torch.ones_like(d_out),
                               create_graph=True, retain_graph=True)[0]
    penalty = ((grad.view(grad.size(0), -1).norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward()
    ```

    Use instead: compute the penalty on the unwrapped model
    (`accelerator.unwrap_model(D)(x_hat)`), then average the discriminator's gradients
    across processes by hand before the optimizer's step, or keep the script on one
    process.

    The same holds for two backwards of losses computed by one forward of a prepared
    model (one module returning a generator's and a discriminator's loss, each stepped by
    its own optimizer): DistributedDataParallel synchronises the gradients of the first
    backward after a forward only; those of the second stay per process, with no error.
    Run a forward for each backward. Adding the losses into one backward is offered only
    when no gradients are cleared between the two: a generator's loss that reaches the
    discriminator leaves it gradients the script threw away with `opt_D.zero_grad()`.
    """

    code = "AM959"
    name = "migration-double-backward"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\n\n\ndef main():\n"
                "    D = torch.nn.Linear(2, 1)\n"
                "    opt = torch.optim.SGD(D.parameters(), lr=0.1)\n"
                "    data = torch.utils.data.TensorDataset(torch.randn(8, 2))\n"
                "    loader = torch.utils.data.DataLoader(data, batch_size=4)\n"
                "    for (x,) in loader:\n"
                "        x.requires_grad_(True)\n"
                "        out = D(x)\n"
                "        grad = torch.autograd.grad(outputs=out.sum(), inputs=x, create_graph=True)[0]\n"
                "        penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()\n"
                "        opt.zero_grad()\n"
                "        penalty.backward()\n"
                "        opt.step()\n"
            ),
            at=("12:16",),
        ),
    )
