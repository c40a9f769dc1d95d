"""analysis/step_skips.py: ways out of a training step that one process may take alone."""

from __future__ import annotations

import textwrap

import libcst as cst

from migrator.analysis.step_skips import skipped_steps


def _skips(code: str, shared: frozenset[str] = frozenset()) -> list[str]:
    module = cst.parse_module(textwrap.dedent(code))
    values: dict[str, list[cst.CSTNode]] = {}
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
            assign = statement.body[0]
            values.setdefault(cst.Module([]).code_for_node(assign.targets[0].target), []).append(assign.value)
    loop = next(s for s in module.body if isinstance(s, (cst.For, cst.While)))

    def trains(node: cst.CSTNode) -> bool:
        code = module.code_for_node(node)
        return "backward(" in code or "train_epoch(" in code  # a function of the file that runs one

    return [why for _, why in skipped_steps(loop, trains, lambda name: values.get(name, []), shared)]


def test_a_skip_on_this_process_s_loss_before_the_backward() -> None:
    (why,) = _skips(
        """
        for images, targets in loader:
            loss = criterion(model(images), targets)
            if bool(loss == 0):
                continue
            loss.backward()
        """
    )
    assert "`if bool(loss == 0):`" in why


def test_skips_every_process_takes_together_are_not_named() -> None:
    """A resume skip on the enumerate index, a count derived from a range, a logging
    `continue` after the backward."""
    assert _skips(
        """
        pbar = range(args.iter)
        pbar = tqdm(pbar, initial=args.start)
        for idx in pbar:
            i = idx + args.start
            if i > args.iter:
                break
            loss = model(next(loader)).sum()
            loss.backward()
            if i % 10:
                continue
            print(loss.item())
        """
    ) == []
    assert _skips(
        """
        for step, batch in enumerate(loader):
            if step < args.resume_step:
                continue
            model(batch).sum().backward()
        """
    ) == []


def test_a_break_on_this_process_s_value_after_the_backward() -> None:
    (why,) = _skips(
        """
        while True:
            batch = next(iterator)
            loss = model(batch).sum()
            loss.backward()
            if loss.item() < 1e-3:
                break
        """
    )
    assert "loss.item() < 1e-3" in why


def test_an_error_swallowed_around_the_backward() -> None:
    assert len(_skips(
        """
        for batch in loader:
            try:
                model(batch).sum().backward()
            except Exception as error:
                print(error)
                continue
        """
    )) == 1
    assert _skips(
        """
        for batch in loader:
            try:
                model(batch).sum().backward()
            except RuntimeError:
                torch.cuda.empty_cache()
                raise
        """
    ) == []


_EARLY_STOP = """
    for epoch in range(epochs):
        train_epoch(model, loader, optimizer)
        val = validate(model, val_loader)
        waited += 1
        if val["iou"] > best:
            best = val["iou"]
            waited = 0
        if waited >= patience:
            break
    """


def test_an_early_stop_counted_under_a_test_of_this_process_s_validation() -> None:
    """UNet++: `waited` is only ever a constant or a count, but it is reset under a test of
    the validation's figure: each process's own, so each stops at its own epoch."""
    (why,) = _skips(_EARLY_STOP)
    assert "`if waited >= patience:`" in why


def test_an_early_stop_on_a_validation_the_migration_makes_global() -> None:
    """A validation whose figures the migration adds up across processes (analysis/meters.py
    `returns_synced_meters`) is the same everywhere: the stop is every process's at once."""
    assert _skips(_EARLY_STOP, shared=frozenset({"validate"})) == []


_WHOLE_DATA_STOP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Batches:
    def __init__(self, data, size):
        self.data, self.size = data, size

    def __iter__(self):
        for start in range(0, len(self.data[0]), self.size):
            yield self.data[0][start:start + self.size], self.data[1][start:start + self.size]


def evaluate(model, data_iter):
    total = 0.0
    with torch.no_grad():
        for x, y in data_iter:
            total += torch.nn.functional.cross_entropy(model(x), y).item()
    return total


def main():
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)
    dev = Batches((torch.randn(16, 4), torch.randint(0, 2, (16,))), 4)
    best, waited = float("inf"), 0
    for epoch in range(50):
        for x, y in train_loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        loss = evaluate(model, {dev})
        if loss < best:
            best, waited = loss, 0
        else:
            waited += 1
        if waited > 3:
            break


main()
"""


def test_an_early_stop_on_data_every_process_reads_whole_is_migrated() -> None:
    """Chinese-Text-Classification: the validation runs over a batch iterator of the
    project's own, never prepared, so every process reads all of it with the same model
    and stops at the same step (reader R2, eighteenth session: a false AM915/AM956)."""
    from migrator.api import migrate_source
    from migrator.config import Config

    whole = migrate_source(_WHOLE_DATA_STOP.format(dev="dev"), "train.py", Config())
    assert "accelerator.backward(" in whole.after, whole.findings
    assert not [f for f in whole.findings if f.code in ("AM915", "AM956")], whole.findings
    shared = migrate_source(_WHOLE_DATA_STOP.format(dev="train_loader"), "train.py", Config())  # a prepared share
    assert [f.code for f in shared.findings if f.code in ("AM915", "AM956")] == ["AM915", "AM956"], shared.findings


def test_a_step_budget_counted_under_a_test_of_the_enumerate_index_is_shared() -> None:
    """JointBERT: `global_step += 1` under `if (step + 1) % accumulation == 0:`, then
    `if 0 < max_steps < global_step: break`. The enumerate index counts alike on every
    process (reader R3, eighteenth session: a false AM915/AM956)."""
    assert _skips(
        """
        for _ in range(epochs):
            for step, batch in enumerate(loader):
                loss = model(batch).sum()
                loss.backward()
                if (step + 1) % accumulation == 0:
                    optimizer.step()
                    global_step += 1
                if 0 < max_steps < global_step:
                    break
            if 0 < max_steps < global_step:
                break
        """
    ) == []


def test_an_early_stop_an_object_decides_from_this_process_s_loss() -> None:
    """ConvLSTM: `early_stopping(valid_loss.item(), ...)`, then `if early_stopping.early_stop:
    break`: the object keeps this process's loss, and its flag ends the run on some
    processes only (reader R3: rank 0 stopped, rank 1 hung). Handed only what every
    process shares, it decides alike."""
    loop = """
        for epoch in range(epochs):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                valid_losses.append(loss.item())
            valid_loss = np.average(valid_losses)
            {call}
            if early_stopping.early_stop:
                break
        """
    (why,) = _skips(loop.format(call="early_stopping(valid_loss.item(), epoch)"))
    assert "`if early_stopping.early_stop:`" in why
    assert _skips(loop.format(call="early_stopping(epoch)")) == []
    # a score over the whole data (no batch of a loop) is the same on every process
    whole = loop.format(call="score = criterion(model(inputs), targets).item()\n            early_stopping(score, epoch)")
    assert _skips(whole) == []
