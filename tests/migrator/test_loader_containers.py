"""A training loop drawing from a container of loaders: never migrated half-way."""

from __future__ import annotations

import textwrap

from migrator.api import migrate_source
from migrator.config import Config


def test_a_training_loop_over_a_container_of_loaders_is_not_written() -> None:
    """The transfer-learning tutorial's `dataloaders = {x: DataLoader(...) for x in [...]}`
    and `for inputs, labels in dataloaders[phase]:` (pytorch-3dunet's `self.loaders["train"]`):
    the migration prepares the model and its optimizer but takes no container apart, so
    every process trained on the whole data set, with no finding at all."""
    source = textwrap.dedent('''\
        import torch


        def main():
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            dataloaders = {x: torch.utils.data.DataLoader(data, batch_size=8, shuffle=True) for x in ["train", "val"]}
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(4, 1).to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for phase in ["train", "val"]:
                for x, y in dataloaders[phase]:
                    x, y = x.to(device), y.to(device)
                    optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
    ''')
    result = migrate_source(source, "tutorial.py", Config())
    assert result.after == source
    refusal = [f for f in result.findings if f.code == "AM951"]
    assert refusal and "`dataloaders[phase]`, a loader kept in a container" in refusal[0].message, result.findings
    assert refusal[0].start.line == 11
    prepared = source.replace(
        "for x in [\"train\", \"val\"]}\n",
        "for x in [\"train\", \"val\"]}\n    dataloaders = {k: accelerator.prepare(v) for k, v in dataloaders.items()}\n",
    ).replace("import torch\n", "import torch\nfrom runtime import Accelerator\n").replace(
        "def main():\n", "def main():\n    accelerator = Accelerator()\n"
    )
    assert "accelerator.prepare(v)" in prepared
    assert not any("a loader kept in a container" in f.message for f in migrate_source(prepared, "tutorial.py", Config()).findings)
