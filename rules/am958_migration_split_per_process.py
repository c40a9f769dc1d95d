"""AM958: the migration would split the data differently on every process."""

from __future__ import annotations

from migrator.rule import Example, Rule


class MigrationSplitPerProcess(Rule):
    """## What it does
    Reported by the engine. When the script splits its data set at random without a seed
    of its own (AM227: `random_split(data, lengths)` with no `generator=`,
    `train_test_split(...)` with no `random_state=`, and no seed alike on every process
    before it), the whole file is left as written and this finding says why; AM227
    beside it points at the split.

    ## Why is this bad?
    Every process runs the script and draws its own split. The processes then train on N
    different training sets (the prepared loader shards each process's own), and the
    validation samples of one are training samples of another: the gathered validation
    metrics score data the model was trained on. Nothing fails and nothing shows on one
    process, which is why the migration is not written: correct or untouched.

    ## Example
    ```python
    train_set, val_set = random_split(dataset, [n_train, n_val])
    ```

    Use instead: (then migrate)
    ```python
    train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
    ```
    """

    code = "AM958"
    name = "migration-split-per-process"
    message = "{reason}"
    reported_by_verifier = True
    examples = (
        Example(
            before=(
                "import torch\nfrom torch.utils.data import DataLoader, TensorDataset, random_split\n\n"
                "data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))\n"
                "train_set, val_set = random_split(data, [48, 16])\n"
                "loader = DataLoader(train_set, batch_size=8, shuffle=True)\n"
                "model = torch.nn.Linear(4, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x, y in loader:\n    optimizer.zero_grad()\n    ((model(x) - y) ** 2).mean().backward()\n"
                "    optimizer.step()\n"
            ),
            at=("5:22",),
        ),
    )
