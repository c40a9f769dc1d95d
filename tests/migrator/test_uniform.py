"""analysis/uniform.py: which `if` tests every process evaluates alike (a barrier may sit
inside them), and which it may not (a barrier there would hang the others)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import analyze
from migrator.analysis.uniform import same_everywhere


def _alike(code: str) -> bool:
    """Whether the test of the `if` marked `# here` is alike on every process."""
    code = textwrap.dedent(code)
    analysis = analyze(MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True))
    marked = [i for i in analysis.nodes("If") if "# here" in analysis.module.code_for_node(i).splitlines()[0]]
    assert len(marked) == 1
    return same_everywhere(analysis, marked[0].test)


ALIKE = {
    "enumerate index and a parsed setting": """
        import argparse
        args = argparse.ArgumentParser().parse_args()
        for i, (x, y) in enumerate(loader):
            if (i + 1) % args.save_every == 0:  # here
                pass
        """,
    "counter and a settings parameter": """
        def train(args, loader):
            step = 0
            for batch in loader:
                step += 1
                if step % args.ckpt_every == 0 and step > 0:  # here
                    pass
        """,
    "loaded config subscript": """
        import yaml
        cfg = yaml.safe_load(open("c.yml"))
        i = 0
        while i < cfg["train_iters"]:
            for batch in loader:
                i += 1
                if (i + 1) % cfg["training"]["val_interval"] == 0 or (i + 1) == cfg["training"]["train_iters"]:  # here
                    pass
        """,
    "attribute set from the config in __init__": """
        class Solver:
            def __init__(self, config):
                self.save_step = config.save_step
                self.num_iters = config.num_iters
            def train(self):
                for i in range(0, self.num_iters):
                    if (i + 1) % self.save_step == 0:  # here
                        pass
        """,
    "range index and a loader's length": """
        for epoch in range(10):
            for i, batch in enumerate(loader):
                if i == len(loader) - 1:  # here
                    pass
        """,
    "a parameter every caller passes alike": """
        def run_epoch(loader, epoch, save_every):
            for batch in loader:
                if epoch % save_every == 0:  # here
                    pass
        for epoch in range(5):
            run_epoch(loader, epoch, 2)
        """,
}

DIFFERENT = {
    "this process's metric": """
        for epoch in range(10):
            acc = evaluate(model, loader)
            is_best = acc > best
            if is_best:  # here
                pass
        """,
    "the rank": """
        import torch.distributed as dist
        r = dist.get_rank()
        for batch in loader:
            if r == 0:  # here
                pass
        """,
    "the clock": """
        import time
        start = time.time()
        for batch in loader:
            if time.time() - start > 3600:  # here
                pass
        """,
    "a counter counted under a test of this process's loss": """
        step = 0
        for batch in loader:
            loss = model(batch)
            if loss.item() < 1.0:
                step += 1
            if step % 100 == 0:  # here
                pass
        """,
    "an attribute updated from a metric": """
        class Trainer:
            def __init__(self, config):
                self.best = 0.0
            def validate(self):
                self.best = max(self.best, self.evaluate())
            def train(self):
                for epoch in range(3):
                    if self.best > 0.9:  # here
                        pass
        """,
    "the environment (RANK differs)": """
        import os
        for batch in loader:
            if os.environ.get("RANK") == "0":  # here
                pass
        """,
    "a parameter with no caller in the file": """
        def train(loader, is_best):
            for batch in loader:
                if is_best:  # here
                    pass
        """,
    "a setting overwritten with a metric": """
        import argparse
        args = argparse.ArgumentParser().parse_args()
        for epoch in range(3):
            args.best = evaluate()
            if args.best > 0.5:  # here
                pass
        """,
    "a list appended this process's losses (its first binding is empty)": """
        val_losses = []
        for epoch in range(3):
            for x, y in loader:
                loss = model(x)
            val_losses.append(loss.item())
            if val_losses[-1] <= min(val_losses):  # here
                pass
        """,
    "the length of a list filled on a test of this process's loss": """
        bad = []
        for x, y in loader:
            loss = model(x)
            if loss.item() > 1.0:
                bad.append(loss.item())
            if len(bad) > 3:  # here
                pass
        """,
    "a counter counted after a continue on this process's loss": """
        step = 0
        for x, y in loader:
            loss = model(x)
            if loss.item() > 1.0:
                continue
            step += 1
            if step % 5 == 0:  # here
                pass
        """,
    "a value the loop hands each step": """
        for i, (x, y) in enumerate(loader):
            if y.sum() > 0:  # here
                pass
        """,
}


@pytest.mark.parametrize("case", sorted(ALIKE))
def test_tests_every_process_evaluates_alike(case: str) -> None:
    assert _alike(ALIKE[case])


@pytest.mark.parametrize("case", sorted(DIFFERENT))
def test_tests_that_may_differ_between_processes(case: str) -> None:
    assert not _alike(DIFFERENT[case])
