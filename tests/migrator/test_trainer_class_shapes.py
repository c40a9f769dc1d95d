"""Trainer classes of real projects (monodepth2): where the Accelerator goes in `__init__`,
and a set-up whose models the migration cannot follow is refused, not half-written."""

from __future__ import annotations

import textwrap

from migrator.api import migrate_source
from migrator.config import Config

TRAINER = textwrap.dedent('''\
    import torch
    from torch.utils.data import DataLoader, TensorDataset


    class Trainer:
        def __init__(self, options):
            self.opt = options
            self.device = torch.device("cpu" if self.opt.no_cuda else "cuda")
            self.model = torch.nn.Linear(4, 1).to(self.device)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2)

        def train(self):
            for x, y in self.loader:
                x, y = x.to(self.device), y.to(self.device)
                loss = ((self.model(x) - y) ** 2).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()


    if __name__ == "__main__":
        import argparse

        Trainer(argparse.Namespace(no_cuda=True)).train()
''')


def test_the_accelerator_comes_after_the_attribute_its_cpu_choice_reads() -> None:
    result = migrate_source(TRAINER.encode(), "trainer.py", Config())
    assert result.after is not None
    assert "        self.opt = options\n        self.accelerator = Accelerator(cpu=self.opt.no_cuda)\n" in result.after


def test_an_optimizer_over_models_kept_in_a_dict_is_refused() -> None:
    """monodepth2: `self.models["encoder"]`, the optimizer over a list of their parameters;
    the migration would prepare the optimizer and the loaders but no model."""
    dict_models = TRAINER.replace(
        "        self.model = torch.nn.Linear(4, 1).to(self.device)\n"
        "        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)\n",
        "        self.models = {\"net\": torch.nn.Linear(4, 1).to(self.device)}\n"
        "        self.parameters_to_train = []\n"
        "        self.parameters_to_train += list(self.models[\"net\"].parameters())\n"
        "        self.optimizer = torch.optim.SGD(self.parameters_to_train, lr=0.1)\n",
    ).replace("self.model(x)", "self.models[\"net\"](x)")
    assert "self.models = {" in dict_models and 'self.models["net"](x)' in dict_models
    result = migrate_source(dict_models.encode(), "trainer.py", Config())
    assert result.after in (None, dict_models)
    assert any(f.code == "AM951" and "without the model it updates" in f.message for f in result.findings)
