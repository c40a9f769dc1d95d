"""Minimised inputs the property tests found, each with the bug it showed.

Every case runs as an explicit hypothesis `@example` and as its own test in
test_regressions.py. `bug` names a properties.KNOWN_BUGS entry while the bug is open.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Regression:
    name: str
    symptom: str
    script: str
    mode: str = "fix"
    bug: str | None = None  # the open KNOWN_BUGS key, None once fixed


REGRESSIONS = [
    Regression(
        "import-removed-from-a-semicolon-line-after-a-docstring",
        "line 2 changed but no fixed finding covers it: a docstring and imports joined by semicolons lost"
        " `clip_grad_value_`, unused once AM302 wrote accelerator.clip_grad_value_ (the import pass's right"
        " edit; the property only exempted lines starting with an import; found by CI's random run, session 16)",
        '\n"""A generated training script."""; import torch; from torch import nn; from torch.optim import lr_scheduler; from torch.utils.data import DataLoader, TensorDataset; from torch.nn.utils import clip_grad_value_; import time\nimport argparse\n\n\n# noqa\ndef main():\n    dev = "cuda" if torch.cuda.is_available() else "cpu"\n    EPOCHS = 5\n    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))\n    optim_main = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)\n    x_train = torch.randn(128, 20); y_train = torch.randint(0, 2, (128,))\n    train_dl = DataLoader(TensorDataset(x_train, y_train), batch_size=32)\n    val_loader = DataLoader(TensorDataset(torch.randn(32, 20), torch.randint(0, 2, (32,))), batch_size=32); lr_scheduler = lr_scheduler.ExponentialLR(optim_main, gamma=0.9)  # noqa\n\n\n    for epoch in range(EPOCHS):\n        model.train()\n        for x, y in train_dl:\n            # move to the GPU\n            x = x.to(dev)\n\n            y = y.to(dev); loss = torch.nn.functional.cross_entropy(model(x), y); sum([loss]).backward(); clip_grad_value_(model.parameters(), clip_value=0.5)\n            optim_main.step()\n            optim_main.zero_grad()\n\n        lr_scheduler.step(); model.eval(); correct = 0\n        with torch.no_grad():\n            for x, y in val_loader:\n                x, y = x.to(dev), y.to(dev); pred = model(x).argmax(dim=1)\n                correct += (pred == y).sum().item()\n        print(f"accuracy {correct / len(val_loader.dataset):.3f}")\n\n\nif __name__ == "__main__":\n    main()\n',
    ),
    Regression(
        "am510-save-in-a-one-line-def",
        "E999 internal error: TypeError: 'SimpleStatementSuite' object is not iterable (a torch.save"
        " in a one-line def body was given the suite as its barrier anchor; fixed in 5e0449b)",
        """\
import torch


class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(4, 2)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)

    def fit(self):
        for x in self.loader:
            self.model(x).sum().backward()
            self.opt.step()

    def save(self): torch.save(self.model.state_dict(), "model.pt")
""",
        mode="lint",
    ),
    Regression(
        "am302-clip-on-self-accelerator",
        "E999 internal error: CSTValidationError: Name 'self.accelerator' is not a valid identifier"
        " (AM302 built cst.Name from a dotted accelerator name; fixed in 97c9b09)",
        """\
import torch


class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(4, 2)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)

    def fit(self):
        for x in self.loader:
            self.model(x).sum().backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
""",
    ),
    Regression(
        "fixed-finding-columns-from-a-later-pass",
        "a fixed AM002 finding spans 4:1-7:45 but original line 7 is 33 characters: "
        "engine._at_original maps lines back to the original text but keeps the columns of "
        "the pass that found it (line 7 had already become `accelerator.backward(...)`)",
        """\
import torch


def train(model, opt, loader):
    for x in loader:
        opt.step()
        model(x).sum().backward()


def main():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=2)
    train(model, opt, loader)
""",
        bug="finding-columns",
    ),
    Regression(
        "device-rewritten-to-self-accelerator-outside-the-class",
        "`dev = \"cuda\"` in main() becomes `dev = self.accelerator.device` (NameError: self); "
        "the Accelerator went into Trainer.__init__ because `self.optimizer = optimizer` "
        "made it the training block, though no loop trains there (the unbound `self` was fixed "
        "upstream by 11:35 (bab639c..85a65fb); the Accelerator still goes into __init__, which no property checks)",
        """\
import torch


class Trainer:
    def __init__(self, optimizer):
        self.optimizer = optimizer

    def step(self):
        self.optimizer.zero_grad()


def main():
    dev = "cuda"
    model = torch.nn.Linear(2, 1)
    model.to(dev)
""",
    ),
    Regression(
        "backward-rewritten-where-accelerator-is-not-visible",
        "Trainer.fit's `loss.backward()` becomes `accelerator.backward(...)` though "
        "`accelerator` lives in main() (NameError at run time; AM002 reported it unfixed) "
        "(fixed in bab639c: the Accelerator is passed to Trainer.__init__ as self.accelerator)",
        """\
import torch


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model = model
        self.optimizer = optimizer
        self.loader = loader

    def fit(self):
        for x in self.loader:
            self.model(x).sum().backward()
            self.optimizer.step()


def main():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=2)
    trainer = Trainer(model, optimizer, loader)
    trainer.fit()
""",
    ),
    Regression(
        "comment-above-a-removed-statement-is-dropped",
        "removing `x = x.cuda()` (AM101) removed the comment line above it, which describes "
        "the lines after it (LibCST keeps own-line comments in the removed statement's "
        "leading_lines); fixed: edits.py moves them onto the next statement kept",
        """\
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=2)
for x in loader:
    # the forward and backward pass
    x = x.cuda()
    model(x).sum().backward()
    optimizer.step()
""",
    ),
    Regression(
        "comment-above-a-removed-import-is-dropped",
        "the import pass removes `from torch.nn.utils import clip_grad_norm_` once it is "
        "unused, and the comment line above it goes too (statement removals by rules keep "
        "theirs since edits.py moves them, through migrator/comments.py; carrying them in "
        "migrator/imports.py too moved them below inserted lines, which the untouched-lines "
        "property flags: not done yet)",
        """\
import torch
# helpers for the training step
from torch.nn.utils import clip_grad_norm_

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=2)
for x in loader:
    model(x).sum().backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
        bug="comment-dropped",
    ),
    Regression(
        "untouched-lines-check-anchored-on-a-blank-line",
        "not a migrator bug: the untouched-lines property called the unchanged "
        "`loss = criterion(model(x), y)` replaced, because difflib anchored on a kept blank "
        "line (found by the long profile; blank lines are now difflib junk)",
        """\
import torch
import torch.nn as nn
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset
from torch.nn.utils import clip_grad_norm_


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
epochs = 1
x_train = torch.randn(128, 4)
y_train = torch.randint(0, 2, (128,))
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=8, shuffle=True)
eval_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)
model = nn.Linear(4, 2)
model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scheduler = lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
criterion = nn.CrossEntropyLoss()

for epoch in range(epochs):
    for x, y in train_loader:
        x = x.to(device)

        y = y.to(device)
        loss = criterion(model(x), y)
        loss.backward()

        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in eval_loader:
            x, y = x.to(device), y.to(device)
            pred = model(x).argmax(dim=1)
            correct += (pred == y).sum().item()
    print(correct / len(eval_loader.dataset))
""",
    ),
]
