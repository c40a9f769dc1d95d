"""Several files of one run migrated as one program (migrator/project/): a set-up file
hands its model, optimizer and loaders to training functions of another file of the run.

Real command-line runs on a temporary project, so the reading, ordering, caching and
writing of the run are what users get."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrator.api import migrate_paths
from migrator import project
from migrator.config import Config
from migrator.findings import FileStatus, is_refusal

TRAIN = textwrap.dedent('''\
    import torch
    import engine


    def main():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        train_loader = torch.utils.data.DataLoader(data, batch_size=8)
        valid_loader = torch.utils.data.DataLoader(data, batch_size=8)
        model = torch.nn.Linear(4, 1)
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            engine.train_one_epoch(train_loader, model, optimizer, device)
            outputs, targets = engine.evaluate(valid_loader, model, device)
            print(epoch, len(outputs))


    if __name__ == "__main__":
        main()
''')

ENGINE = textwrap.dedent('''\
    import torch
    from tqdm import tqdm


    def train_one_epoch(loader, model, optimizer, device):
        model.train()
        for x, y in tqdm(loader):
            x = x.to(device)
            y = y.to(device)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()


    def evaluate(loader, model, device):
        model.eval()
        outputs = []
        targets = []
        with torch.no_grad():
            for x, y in loader:
                x = x.to(device)
                y = y.to(device)
                out = model(x)
                outputs.extend(out.cpu().numpy().tolist())
                targets.extend(y.cpu().numpy().tolist())
        return outputs, targets
''')


def _project(tmp_path, **files: str) -> str:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def _cli(cwd: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _results(paths: list[str], **kwargs) -> dict[str, object]:
    return {os.path.basename(r.path): r for r in migrate_paths(paths, Config(), **kwargs)}


def test_setup_and_engine_migrate_together(tmp_path) -> None:
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE})
    results = _results([root])
    train, engine = results["train.py"].after, results["engine.py"].after
    assert "engine.train_one_epoch(train_loader, model, optimizer, device, accelerator=accelerator)" in train
    assert "engine.evaluate(valid_loader, model, device, accelerator=accelerator)" in train
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in engine
    assert "def evaluate(loader, model, device, *, accelerator):" in engine
    assert "accelerator.backward(loss)" in engine and "loss.backward()" not in engine
    assert "accelerator.clip_grad_norm_(model.parameters(), 1.0)" in engine
    assert "disable=not accelerator.is_local_main_process" in engine
    assert "_accel_migrate_callers" not in engine  # the callers' stub never shows
    # the caller prepares the loaders: the engine's batches arrive placed, and what the
    # evaluation collects is gathered from every process first
    assert "x = x.to(device)" not in engine
    assert "out, y = accelerator.gather_for_metrics((out, y))" in engine
    assert not [f for f in results["engine.py"].findings if f.code.startswith("AM95") or f.code == "AM913"]
    assert not [f for f in results["train.py"].findings if f.code == "AM914" and not f.fixed]
    for text in (train, engine):
        compile(text, "x.py", "exec")


def test_alone_the_engine_is_reported_not_changed(tmp_path) -> None:
    root = _project(tmp_path, **{"engine.py": ENGINE})
    result = _results([os.path.join(root, "engine.py")])["engine.py"]
    assert result.after == ENGINE
    assert {f.code for f in result.findings} == {"AM913"}


def test_alias_and_from_imports(tmp_path) -> None:
    train = TRAIN.replace("import engine\n", "import engine as eng\nfrom engine import evaluate as ev\n")
    train = train.replace("engine.train_one_epoch(", "eng.train_one_epoch(").replace("engine.evaluate(", "ev(")
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE})
    results = _results([root])
    assert "eng.train_one_epoch(train_loader, model, optimizer, device, accelerator=accelerator)" in results["train.py"].after
    assert "ev(valid_loader, model, device, accelerator=accelerator)" in results["train.py"].after
    assert "def evaluate(loader, model, device, *, accelerator):" in results["engine.py"].after


def test_package_with_relative_import(tmp_path) -> None:
    train = TRAIN.replace("import engine\n", "from . import engine\n")
    root = _project(tmp_path, **{"pkg/__init__.py": "", "pkg/train.py": train, "pkg/engine.py": ENGINE})
    results = _results([root])
    assert "accelerator=accelerator" in results["train.py"].after
    assert "*, accelerator)" in results["engine.py"].after


def test_a_caller_without_an_accelerator_keeps_both_as_alone(tmp_path) -> None:
    """Whole or nothing: a third file calls the engine at module level, where no
    Accelerator exists; nothing crosses files, and the findings stay."""
    other = (
        "import torch\nimport engine\n\nmodel = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters())\n"
        "engine.evaluate([], model, 'cpu')\nengine.train_one_epoch([], model, opt, 'cpu')\n"
    )
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE, "other.py": other})
    together = _results([root])
    alone = {name: _results([os.path.join(root, name)])[name] for name in ("train.py", "engine.py")}
    assert together["engine.py"].after == ENGINE
    assert "engine.evaluate(valid_loader, model, device)\n" in together["train.py"].after
    for name in ("train.py", "engine.py"):
        assert together[name].after == alone[name].after
        assert [f.code for f in together[name].findings] == [f.code for f in alone[name].findings]


def test_whole_or_nothing_is_per_function(tmp_path) -> None:
    """Only `evaluate` has a caller with no Accelerator: `train_one_epoch` is threaded,
    `evaluate` stays as written, and its per-process metrics are reported, not silent."""
    other = "import torch\nimport engine\n\nmodel = torch.nn.Linear(4, 1)\nengine.evaluate([], model, 'cpu')\n"
    # its own parameter names: the engine's analysis reads names, not scopes (see below)
    evaluate = ENGINE[ENGINE.index("def evaluate"):]
    renamed = evaluate.replace("loader", "batches").replace("model", "net").replace("device", "where")
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE.replace(evaluate, renamed), "other.py": other})
    results = _results([root])
    engine, train = results["engine.py"], results["train.py"]
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in engine.after
    assert engine.after.endswith(renamed)
    # what the engine alone says about `evaluate` it says here too (alone: nothing, since
    # `batches` is not known as a loader); the set-up's call is reported
    alone = _results([os.path.join(root, "engine.py")])["engine.py"]
    assert [f for f in engine.findings if not f.fixed] == [f for f in alone.findings if f.start.line > 15]
    assert "engine.evaluate(valid_loader, model, device)\n" in train.after
    # the loader only `evaluate` reads stays whole: every process evaluates all of it
    assert "accelerator.prepare(model, optimizer, train_loader)" in train.after
    reported = [f for f in train.findings if f.code == "AM914" and not f.fixed]
    assert [f.start.line for f in reported] == [17]
    assert "it reads `valid_loader` unprepared" in reported[0].message


def test_the_functions_left_alone_keep_their_advice(tmp_path) -> None:
    """The AM913 findings the engine alone gives in a function that is not threaded stay,
    moved to where the function now is."""
    from migrator import project
    from migrator.findings import FileResult, FileStatus, Finding, Position

    before = "def a(x):\n    x.to(1)\n    x.to(2)\n\n\ndef b(loader):\n    loss.backward()\n"
    after = "def a(x, *, accelerator):\n    pass\n\n\ndef b(loader):\n    loss.backward()\n"
    at = lambda line: Position(line, 5)  # noqa: E731
    advice = Finding("e.py", at(7), at(7), "AM913", "training-function-without-accelerator", "`b` calls ...")
    other = Finding("e.py", at(2), at(2), "AM913", "training-function-without-accelerator", "`a` ...")
    result = FileResult("e.py", FileStatus.CHANGED, before, after)
    alone = FileResult("e.py", FileStatus.UNCHANGED, before, before, (other, advice))
    merged = project.with_unthreaded(result, alone, {"a"})
    assert [(f.start.line, f.message) for f in merged.findings] == [(6, "`b` calls ...")]


def test_an_engine_function_used_as_a_value_is_not_threaded(tmp_path) -> None:
    train = TRAIN.replace("    for epoch in range(2):\n", "    step = engine.train_one_epoch\n    for epoch in range(2):\n")
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE})
    results = _results([root])
    assert "def train_one_epoch(loader, model, optimizer, device):" in results["engine.py"].after


def test_jobs_give_the_same_output(tmp_path) -> None:
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE, "notes.py": "x = 1\n"})
    one = _cli(root, ".", "--diff", "-j", "1")
    two = _cli(root, ".", "--diff", "-j", "2")
    assert one.stdout == two.stdout and one.returncode == two.returncode
    assert "accelerator=accelerator" in one.stdout and "*, accelerator)" in one.stdout


def test_changing_only_the_engine_recomputes_the_setup(tmp_path) -> None:
    """The cache keys a file of a run by its context (what the other files decide): when
    the engine changes so that it can no longer take the Accelerator, the set-up's
    cached result is not reused."""
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE})
    cache = str(tmp_path / "cache")
    first = _results([root], cache_dir=cache)
    assert "accelerator=accelerator" in first["train.py"].after
    again = _results([root], cache_dir=cache)
    assert again["train.py"].after == first["train.py"].after
    (tmp_path / "engine.py").write_text(
        ENGINE.replace("def train_one_epoch(loader, model, optimizer, device):", "def train_one_epoch(loader, model, optimizer, device, **kw):")
        .replace("def evaluate(loader, model, device):", "def evaluate(loader, model, device, **kw):")
    )
    changed = _results([root], cache_dir=cache)
    assert "accelerator=accelerator" not in changed["train.py"].after
    assert any(f.code == "AM914" and not f.fixed for f in changed["train.py"].findings)


@pytest.mark.parametrize("name", ["train.py", "engine.py"])
def test_second_run_changes_nothing(tmp_path, name) -> None:
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE})
    list(migrate_paths([root], Config(), write=True))
    again = _results([root])
    assert again[name].after == again[name].before
    assert not again[name].findings  # the engine has its Accelerator; the set-up passes it


def test_a_second_run_still_reports_what_the_first_left_for_a_human(tmp_path) -> None:
    """The engine's training metric is this process's figure (AM524, known only with the
    callers' context): a run over the migrated project decides again as the first run
    did, so it, and its lint (the pre-commit hook), still say so."""
    engine = ENGINE.replace(
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n",
        "        out = model(x)\n        loss = torch.nn.functional.mse_loss(out, y)\n",
    ).replace(
        "        optimizer.step()\n", "        optimizer.step()\n        metric.add(out.detach(), y)\n",
    ).replace("def train_one_epoch(loader, model, optimizer, device):", "def train_one_epoch(loader, model, optimizer, device, metric):")
    train = TRAIN.replace("engine.train_one_epoch(train_loader, model, optimizer, device)", "engine.train_one_epoch(train_loader, model, optimizer, device, metric)")
    train = train.replace("    model = torch.nn.Linear(4, 1)\n", "    model = torch.nn.Linear(4, 1)\n    metric = engine.Meter()\n")
    engine += "\n\nclass Meter:\n    def add(self, out, y):\n        self.last = (out - y).abs().mean().item()\n"
    root = _project(tmp_path, **{"train.py": train, "engine.py": engine})
    first = _results([root])
    told = sorted((name, f.code) for name, r in first.items() for f in r.findings if not f.fixed)
    assert ("engine.py", "AM524") in told
    list(migrate_paths([root], Config(), write=True))
    again = _results([root])
    assert all(r.after == r.before for r in again.values())
    assert sorted((name, f.code) for name, r in again.items() for f in r.findings) == told
    lint = {os.path.basename(r.path): r for r in migrate_paths([root], Config(fix=False))}
    assert sorted((name, f.code) for name, r in lint.items() for f in r.findings) == told


def test_calls_threaded_by_an_earlier_run_are_not_told_they_lack_the_accelerator(tmp_path) -> None:
    """A migrated project grows a new engine function: the run threads it, and the calls
    an earlier run gave `accelerator=` are not reported as left without one."""
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE})
    list(migrate_paths([root], Config(), write=True))
    engine, train = tmp_path / "engine.py", tmp_path / "train.py"
    engine.write_text(engine.read_text() + "\n\ndef count(loader, model):\n    for x, _ in loader:\n        print(model(x).sum().item())\n")
    train.write_text(train.read_text().replace("print(epoch, len(outputs))", "print(epoch, len(outputs), engine.count(valid_loader, model))"))
    again = _results([root])
    lines = again["train.py"].after.splitlines()
    told = [f.message for f in again["train.py"].findings if f.code == "AM914" and "accelerator=" in lines[f.start.line - 1]]
    assert told == [next(f.message for f in again["train.py"].findings if "engine.count" in f.message)]
    assert "the Accelerator is passed in" in told[0]  # the new function is threaded


HELPERS = textwrap.dedent('''\
    import json
    import os


    def save_metrics(metrics, json_path):
        with open(json_path, "w") as f:
            json.dump({k: float(v) for k, v in metrics.items()}, f, indent=4)


    def save_config(config):
        path = os.path.join(config["out"], "params.json")
        print("[*] params at {}".format(path))
        with open(path, "w") as f:
            json.dump(config, f)


    def save_and_count(metrics, json_path):
        with open(json_path, "w") as f:
            json.dump(metrics, f)
        return len(metrics)


    def save_in_new_folder(metrics, folder):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "m.json"), "w") as f:
            json.dump(metrics, f)
''')


def test_a_checkpoint_helper_that_torch_saves_what_it_is_given_only_writes() -> None:
    """SRGAN's utils.save_checkpoint(state, name, ...): torch.save, then a copy to the best
    file. Called by every process where the run cannot give it the Accelerator, N processes
    write (and copy) one file at once: it is a writer its callers put on the main process."""
    from migrator.project.writers import only_writes

    helper = ast.parse(textwrap.dedent(
        """
        def save_checkpoint(state, name, best):
            path = os.path.join("out", name)
            torch.save(state, path)
            if best:
                shutil.copyfile(path, os.path.join("out", "best.pt"))
        """
    )).body[0]
    assert only_writes(helper) == -1  # the path is built inside
    given = ast.parse("def save(state, path):\n    torch.save(state, path)\n").body[0]
    assert only_writes(given) == 1
    used = ast.parse("def save(model, path):\n    torch.save(model.state_dict(), path)\n    model.train()\n").body[0]
    assert only_writes(used) is None  # it does more than write


def test_a_helper_of_another_file_that_only_writes_a_file_is_called_on_the_main_process(tmp_path) -> None:
    train = TRAIN.replace("import engine\n", "import engine\nimport helpers\n").replace(
        "        print(epoch, len(outputs))\n",
        "        print(epoch, len(outputs))\n"
        "        helpers.save_metrics({\"n\": len(outputs)}, \"last.json\")\n"
        "        helpers.save_config({\"out\": \".\"})\n"
        "        n = helpers.save_and_count({\"n\": 1}, \"count.json\")\n"
        "        helpers.save_in_new_folder({\"n\": n}, \"out\")\n",
    )
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "helpers.py": HELPERS})
    results = _results([root])
    after = results["train.py"].after
    assert (
        "        if accelerator.is_main_process:\n"
        "            helpers.save_metrics({\"n\": len(outputs)}, \"last.json\")\n"
        "            helpers.save_config({\"out\": \".\"})\n"
    ) in after
    # a value the others read, or a folder they may write into next: every process calls it
    assert "        n = helpers.save_and_count(" in after
    assert "        helpers.save_in_new_folder(" in after and "is_main_process:\n            helpers.save_in_new_folder" not in after
    told = [f.message for f in results["train.py"].findings if f.code == "AM517"]
    assert "`helpers.save_metrics()` writes `\"last.json\"` on every process" in told[0]
    assert "`helpers.save_config()` writes a file on every process" in told[1]
    assert results["helpers.py"].after == HELPERS


@pytest.mark.parametrize("built", ["engine.Params(0.1)", "engine.Params(0.1).cuda()"])
def test_only_the_methods_other_files_call_are_read_as_run_on_every_process(tmp_path, built) -> None:
    """`params = engine.Params(...)` then `params.dump(path)` in the training loop: `dump`
    runs on every process and writes one file (AM517 says so); `save`, which no file of
    the run calls, is its callers' business."""
    params = textwrap.dedent('''\


        class Params:
            def __init__(self, lr):
                self.lr = lr

            def save(self, path):
                with open(path, "w") as f:
                    f.write(str(self.lr))

            def dump(self, path):
                with open(path, "w") as f:
                    f.write(str(self.lr))
    ''')
    train = TRAIN.replace("    for epoch in range(2):\n", f"    params = {built}\n    for epoch in range(2):\n").replace(
        "        print(epoch, len(outputs))\n", "        print(epoch, len(outputs))\n        params.dump(\"params.json\")\n"
    )
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE + params})
    results = _results([root])
    after = results["engine.py"].after
    told = {f.start.line: f.message for f in results["engine.py"].findings if f.code == "AM517"}
    lines = after.splitlines()
    assert [lines[n - 1].strip() for n in told] == ['with open(path, "w") as f:']
    assert next(iter(told)) == lines.index("    def dump(self, path):") + 2  # the one in `dump`


def test_a_scheduler_the_engine_steps_per_batch_is_prepared(tmp_path) -> None:
    """Alone, the set-up cannot see how the scheduler steps (AM206 leaves it out); in the
    run, the engine steps it in its batch loop, so the set-up prepares it."""
    train = TRAIN.replace(
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=16)\n",
    ).replace("engine.train_one_epoch(train_loader, model, optimizer, device)", "engine.train_one_epoch(train_loader, model, optimizer, device, scheduler)")
    engine = ENGINE.replace("def train_one_epoch(loader, model, optimizer, device):", "def train_one_epoch(loader, model, optimizer, device, scheduler):")
    engine = engine.replace("        optimizer.step()\n", "        optimizer.step()\n        scheduler.step()\n")
    root = _project(tmp_path, **{"train.py": train, "engine.py": engine})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    assert any(f.code == "AM206" for f in alone.findings)
    together = _results([root])
    assert "valid_loader, scheduler = accelerator.prepare(" in together["train.py"].after
    assert not any(f.code == "AM206" for f in together["train.py"].findings)
    assert "def train_one_epoch(loader, model, optimizer, device, scheduler, *, accelerator):" in together["engine.py"].after


def test_a_caller_beside_the_run_that_the_run_leaves_out_keeps_the_function(tmp_path) -> None:
    """`accel-migrate train.py engine.py` while `report.py` beside them also calls
    `engine.evaluate`: it would not be updated, so `evaluate` is not threaded."""
    report = "import engine\n\n\ndef run(loader, model):\n    return engine.evaluate(loader, model, 'cpu')\n"
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE, "report.py": report})
    results = _results([os.path.join(root, "train.py"), os.path.join(root, "engine.py")])
    # `train_one_epoch` is threaded alone: `evaluate`, which no stand-in caller calls, keeps
    # its moves (they share the name `loader`, but only the threaded function is fed the
    # prepared one), and the loader only `evaluate` reads stays unprepared
    engine_after = results["engine.py"].after
    assert engine_after[engine_after.index("def evaluate"):] == ENGINE[ENGINE.index("def evaluate"):]
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in engine_after
    assert "engine.evaluate(valid_loader, model, device)\n" in results["train.py"].after
    assert "accelerator.prepare(model, optimizer, train_loader)" in results["train.py"].after
    with_report = _results([root])
    assert "def evaluate(loader, model, device, *, accelerator):" not in with_report["engine.py"].after  # report.run has no Accelerator


def test_a_file_beside_the_run_that_only_mentions_the_function_does_not_hold_it_back(tmp_path) -> None:
    """`data.py` beside the run says "evaluate" in a docstring but never imports `engine`:
    it cannot call `engine.evaluate`, which is threaded."""
    data = '"""Splits for train, evaluate and test; see engine.py."""\nSPLITS = ("train", "evaluate")\n'
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE, "data.py": data})
    results = _results([os.path.join(root, "train.py"), os.path.join(root, "engine.py")])
    assert "def evaluate(loader, model, device, *, accelerator):" in results["engine.py"].after


def test_a_function_re_exported_by_an_assignment_is_not_threaded(tmp_path) -> None:
    """`evaluate = engine.evaluate` in a package: a route the index does not follow (an
    import re-exporting it is followed)."""
    train = TRAIN.replace("import engine\n", "import engine\nfrom pkg import evaluate\n")
    root = _project(tmp_path, **{
        "train.py": train, "engine.py": ENGINE, "pkg/__init__.py": "import engine\nevaluate = engine.evaluate\n",
    })
    results = _results([root])
    assert "def evaluate(loader, model, device):" in results["engine.py"].after


def test_a_notebook_of_the_run_that_calls_the_function_keeps_it(tmp_path) -> None:
    import json

    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["import engine\n", "engine.evaluate(loader, model, 'cpu')\n"]}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE, "explore.ipynb": json.dumps(notebook)})
    results = _results([root])
    engine_after = results["engine.py"].after
    assert engine_after[engine_after.index("def evaluate"):] == ENGINE[ENGINE.index("def evaluate"):]
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in engine_after
    assert "engine.evaluate(valid_loader, model, device)\n" in results["train.py"].after


def test_the_index_follows_imports_and_keeps_what_it_cannot_follow_out(tmp_path) -> None:
    from migrator import project

    root = tmp_path
    sources = {
        str(root / "a" / "engine.py"): "def fit(model, loader):\n    for x in loader:\n        model(x).backward()\n",
        str(root / "a" / "run.py"): "from . import engine as e\n\ndef go(m, l):\n    e.fit(m, l)\n",
        str(root / "b" / "other.py"): "import a.engine\n\ndef go(m, l):\n    a.engine.fit(m, l)\n",
    }
    files = project.index(sources)
    run = files[str(root / "a" / "run.py")]
    assert [(c.spelling, c.target) for c in run.calls] == [("e.fit", (str(root / "a" / "engine.py"), "fit"))]
    assert files[str(root / "b" / "other.py")].calls == []  # a dotted import without alias is not followed...
    assert project.candidates(files) == set()  # ...so `fit`, named there, is not threaded
    del sources[str(root / "b" / "other.py")]
    assert project.candidates(project.index(sources)) == {(str(root / "a" / "engine.py"), "fit")}


def test_a_file_calling_only_dropped_candidates_may_have_its_own_threaded(tmp_path) -> None:
    """WZMIAOMIAO's DeepLabV3: train_and_eval.py's engine calls `utils.MetricLogger` of a
    third file. A file calling a candidate is not threaded itself, so only MetricLogger
    was; once the run dropped it, nothing was left to decide and the engine never got its
    turn. A later round asks again, without what was dropped."""
    from migrator import project

    helpers, engine = str(tmp_path / "helpers.py"), str(tmp_path / "engine.py")
    sources = {
        helpers: "class Meter:\n    def __init__(self, model):\n        self.model = model\n\n    def log(self, x):\n        print(self.model(x).backward())\n",
        engine: "import helpers\n\ndef fit(model, loader):\n    meter = helpers.Meter(model)\n    for x in loader:\n        model(x).backward()\n",
        str(tmp_path / "run.py"): "import engine\n\ndef go(m, l):\n    engine.fit(m, l)\n",
    }
    files = project.index(sources)
    assert project.candidates(files) == {(helpers, "Meter")}
    assert project.candidates(files, dropped=frozenset({(helpers, "Meter")})) == {(engine, "fit")}


def test_a_name_bound_again_is_not_taken_for_the_module(tmp_path) -> None:
    from migrator import project

    sources = {
        str(tmp_path / "engine.py"): "def fit(model, loader):\n    for x in loader:\n        model(x).backward()\n",
        str(tmp_path / "train.py"): "import engine\n\ndef go(engine, m, l):\n    engine.fit(m, l)\n",
    }
    files = project.index(sources)
    assert files[str(tmp_path / "train.py")].calls == []
    assert project.candidates(files) == set()


def test_lint_reports_what_the_run_would_write(tmp_path) -> None:
    """--lint (no fix) decides as --write would, then reports: the engine's backward and
    gathers are fixable findings, not AM913 advice, and nothing changes."""
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": ENGINE})
    results = {os.path.basename(r.path): r for r in migrate_paths([root], Config(fix=False))}
    engine = results["engine.py"]
    assert engine.after == ENGINE
    assert {"AM301", "AM302", "AM513"} <= {f.code for f in engine.findings if f.fixable}
    assert not [f for f in engine.findings if f.code == "AM913"]
    assert all(f.start.line <= ENGINE.count("\n") for f in engine.findings)
    assert [f.fixable for f in results["train.py"].findings if f.code == "AM914"] == [True, True]


def test_what_is_prepared_is_read_in_the_calling_function(tmp_path) -> None:
    """`check()` builds a loader of its own (not prepared) and hands it to `evaluate`,
    while `train_one_epoch` gets the prepared one under the same parameter name `loader`.
    The engine's analysis knows names, not scopes, but only the threaded function is called
    by the stand-in of its callers: `train_one_epoch` is threaded, and `evaluate` keeps its
    moves (its batches come from `check()`'s own loader). That loader is whole on every
    process, so the engine's share-of-the-data advice for `evaluate` (AM913, AM513) would
    describe a run that does not happen: it goes (migrator/project/whole.py)."""
    train = TRAIN.replace(
        "def main():\n",
        "def check(model, device):\n"
        "    data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1))\n"
        "    loader = torch.utils.data.DataLoader(data, batch_size=4)\n"
        "    return engine.evaluate(loader, model, device)\n\n\n"
        "def main():\n",
    ).replace("        outputs, targets = engine.evaluate(valid_loader, model, device)\n", "        outputs, targets = check(model, device)\n")
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE})
    results = _results([root])
    engine_after = results["engine.py"].after
    assert engine_after[engine_after.index("def evaluate"):] == ENGINE[ENGINE.index("def evaluate"):]
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in engine_after
    assert {f.code for f in results["engine.py"].findings if not f.fixed} == set()
    assert "return engine.evaluate(loader, model, device)\n" in results["train.py"].after


def test_linked_reads_no_file_that_imports_no_other_file_of_the_run(tmp_path):
    sources = {
        str(tmp_path / "train.py"): b"import torch\nimport engine\nengine.train_fn(model)\n",
        str(tmp_path / "engine.py"): b"import torch\n\ndef train_fn(model):\n    pass\n",
        str(tmp_path / "plot.py"): b"import matplotlib\nfrom torch import nn\n",
        str(tmp_path / "other.py"): b"import numpy as np  # mentions engine only in a comment\n",
    }
    assert project.linked(sources) == {str(tmp_path / "train.py"), str(tmp_path / "engine.py")}
    del sources[str(tmp_path / "train.py")]
    assert project.linked(sources) == set()


def test_linked_takes_the_package_a_relative_import_climbs_to(tmp_path):
    sources = {
        str(tmp_path / "pkg" / "train.py"): b"from . import helpers  # the folder's files\n",
        str(tmp_path / "pkg" / "engine.py"): b"def train_fn(model):\n    pass\n",
        str(tmp_path / "pkg" / "sub" / "loop.py"): b"from .. import engine\n",
        str(tmp_path / "plot.py"): b"import matplotlib\n",
    }
    assert project.linked(sources) == set(sources) - {str(tmp_path / "plot.py")}


FIXTURES_HELPERS = Path(__file__).resolve().parents[2] / "fixtures" / "project-distribution-helpers" / "input" / "utils.py"


def test_changing_only_a_distribution_helper_recomputes_its_caller(tmp_path) -> None:
    """The caller of `utils.init_distributed_mode(args)` is migrated from what the helper's
    body sets; when the helper starts setting something whose meaning cannot be read (and
    the caller reads it), the cached result is not reused: the caller is refused."""
    helpers = FIXTURES_HELPERS.read_text()
    files = {p.name: p.read_text() for p in FIXTURES_HELPERS.parent.glob("*.py")}
    root = _project(tmp_path, **files)
    cache = str(tmp_path / "cache")
    first = _results([root], cache_dir=cache)
    assert "utils.init_distributed_mode(args)\n" not in first["main.py"].after
    assert _results([root], cache_dir=cache)["main.py"].after == first["main.py"].after
    (tmp_path / "utils.py").write_text(helpers.replace('args.gpu = int(os.environ["LOCAL_RANK"])', 'args.gpu = pick_gpu()'))
    changed = _results([root], cache_dir=cache)
    assert changed["main.py"].after == changed["main.py"].before
    assert any(f.code == "AM955" and "init_distributed_mode" in f.message for f in changed["main.py"].findings)


LOGGER = '''\
import logging


def set_logger(log_path):
    logger = logging.getLogger()
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.FileHandler(log_path))
'''


def test_a_log_file_helper_of_another_file_is_set_up_on_the_main_process(tmp_path) -> None:
    """`utils.set_logger(path)` opens a file handler: called by every process, each record
    is appended N times. The caller calls it on the main process only, and the helper's
    own file handler is then not reported (every caller of the run gates it)."""
    train = TRAIN.replace("import engine\n", "import engine\nimport utils\n", 1).replace(
        "def main():\n", "def main():\n    utils.set_logger('train.log')\n"
    )
    assert "utils.set_logger('train.log')" in train
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "utils.py": LOGGER})
    results = _results([root])
    assert "    if accelerator.is_main_process:\n        utils.set_logger('train.log')\n" in results["train.py"].after
    assert not [f for f in results["utils.py"].findings if f.code == "AM519"]
    alone = _results([str(tmp_path / "utils.py")])
    assert alone["utils.py"].after == LOGGER  # nothing trains here: nothing migrated, nothing said


def test_an_engines_autocast_stays_while_its_precision_cannot_reach_the_callers_accelerator(tmp_path) -> None:
    """The engine sees a stand-in Accelerator for its callers; a precision given to that
    stand-in would be lost with it, so the engine's autocast region is kept and reported
    (AM404) instead of becoming `accelerator.autocast()` under an Accelerator without it."""
    engine = ENGINE.replace(
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n",
        "        with torch.autocast(\"cuda\", dtype=torch.float16):\n"
        "            loss = torch.nn.functional.mse_loss(model(x), y)\n",
    )
    assert engine != ENGINE
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": engine})
    results = _results([root])
    after = results["engine.py"].after
    assert 'with torch.autocast("cuda", dtype=torch.float16):' in after
    assert "accelerator.autocast()" not in after
    assert "mixed_precision" not in results["train.py"].after
    held = [f for f in results["engine.py"].findings if f.code == "AM404"]
    assert held and "comes from the caller in another file" in held[0].message


def test_a_class_reached_through_a_package_chain_is_the_run_s_own(tmp_path) -> None:
    """deep-person-reid: `import torchreid`, then `torchreid.engine.ImageSoftmaxEngine(...)`,
    the class re-exported by torchreid/engine/__init__.py from engine/image/softmax.py. The
    index follows the chain to the file defining it (before, the call was nobody's: the
    set-up had no finding of its own)."""
    from migrator.project.index import index

    sources = {
        "main.py": b"import torchreid\n\ndef main(model, optimizer):\n    torchreid.engine.ImageSoftmaxEngine(model, optimizer).run()\n",
        "torchreid/__init__.py": b"from torchreid import engine\n",
        "torchreid/engine/__init__.py": b"from .image import ImageSoftmaxEngine\n",
        "torchreid/engine/image/__init__.py": b"from .softmax import ImageSoftmaxEngine\n",
        "torchreid/engine/image/softmax.py": b"class ImageSoftmaxEngine:\n    def __init__(self, model, optimizer):\n        self.model = model\n",
    }
    for path, data in sources.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(data)
    files = index({str(tmp_path / p): d for p, d in sources.items()})
    calls = files[str(tmp_path / "main.py")].calls
    assert [(c.spelling, os.path.relpath(c.target[0], tmp_path), c.target[1]) for c in calls] == [
        ("torchreid.engine.ImageSoftmaxEngine", os.path.join("torchreid", "engine", "image", "softmax.py"), "ImageSoftmaxEngine"),
    ]


def test_a_set_up_alone_prepares_the_loader_a_helper_beside_it_returns(tmp_path) -> None:
    """The hook's case: train.py alone, its loader from data.py's `make_loader()` and its
    training in engine.py. The helper is read: the loader is prepared with the model (before,
    only the model and optimizer were, and the engine trained on all the data on every process)."""
    data = textwrap.dedent('''\
        import torch


        def make_loader(batch_size):
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            return torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=True)
    ''')
    train = TRAIN.replace("import engine\n", "import engine\nfrom data import make_loader\n").replace(
        "    train_loader = torch.utils.data.DataLoader(data, batch_size=8)\n", "    train_loader = make_loader(8)\n",
    )
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "data.py": data})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    assert "model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)" in alone.after, alone.after


def test_objects_built_by_helpers_get_their_roles_from_the_engine_that_uses_them(tmp_path) -> None:
    """`model = build_model(cfg)` and `optimizer = build_optimizer(cfg, model)` come from a
    helper module the set-up cannot read; the engine zeroes the optimizer's gradients and
    puts the model in train mode, so the set-up knows them, prepares them and passes the
    Accelerator in (alone, the set-up would not look like training code at all)."""
    helpers = textwrap.dedent('''\
        import torch


        def build_model(cfg):
            return torch.nn.Linear(cfg["width"], 1)


        def build_optimizer(cfg, model):
            return torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    ''')
    train = textwrap.dedent('''\
        import torch
        import engine
        from helpers import build_model, build_optimizer


        def main():
            cfg = {"width": 4, "lr": 0.1}
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            train_loader = torch.utils.data.DataLoader(data, batch_size=8)
            model = build_model(cfg)
            model = model.cuda()
            optimizer = build_optimizer(cfg, model)
            for epoch in range(2):
                engine.train_one_epoch(train_loader, model, optimizer, "cuda")


        if __name__ == "__main__":
            main()
    ''')
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "helpers.py": helpers})
    results = _results([root])
    after = results["train.py"].after
    assert "model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)" in after
    assert 'engine.train_one_epoch(train_loader, model, optimizer, "cuda", accelerator=accelerator)' in after
    assert "model = model.cuda()" not in after
    assert "accelerator.backward(loss)" in results["engine.py"].after
    assert results["helpers.py"].after is None or results["helpers.py"].after == helpers


def test_the_index_reads_what_a_function_does_with_its_parameters() -> None:
    import ast

    from migrator.project.index import _functions

    source = textwrap.dedent('''\
        def fit(loader, net, opt, crit, log):
            net.train()
            for x, y in enumerate(loader):
                opt.zero_grad()
                crit(net(x), y).backward()
                opt.step()
            for line in log:
                print(line)


        def score(heads):
            for head in heads:
                print(head)
    ''')
    functions = _functions(ast.parse(source))
    assert dict(functions["fit"].param_roles) == {"loader": "dataloader", "net": "model", "opt": "optimizer"}
    assert functions["fit"].updates
    assert functions["score"].param_roles == () and not functions["score"].updates


def test_the_index_reads_a_class_through_the_attributes_its_init_keeps() -> None:
    """An evaluator class (`Test(model, loader, ...)`, ENet) is read like an evaluation
    function: its loader and model by what its methods do with `self.data_loader` and
    `self.model`, and it does not train; a trainer class does."""
    import ast

    from migrator.project.index import _functions

    source = textwrap.dedent('''\
        class Test:
            def __init__(self, model, data_loader, criterion, device):
                self.model = model.to(device)
                self.data_loader = data_loader
                self.criterion = criterion

            def run_epoch(self):
                self.model.eval()
                for x, y in self.data_loader:
                    self.criterion(self.model(x), y)


        class Train:
            def __init__(self, model, data_loader, criterion):
                self.model = model
                self.data_loader = data_loader
                self.criterion = criterion

            def run_epoch(self):
                for x, y in self.data_loader:
                    self.criterion(self.model(x), y).backward()
    ''')
    functions = _functions(ast.parse(source))
    assert dict(functions["Test"].param_roles) == {"data_loader": "dataloader", "model": "model"}
    assert not functions["Test"].updates
    assert functions["Train"].updates


def test_a_download_in_a_helper_of_another_file_runs_on_the_main_process_first(tmp_path) -> None:
    data = textwrap.dedent('''\
        import torch
        from torchvision import datasets, transforms


        def make_loader(root, batch_size):
            images = datasets.MNIST(root, train=True, download=True, transform=transforms.ToTensor())
            return torch.utils.data.DataLoader(images, batch_size=batch_size, shuffle=True)
    ''')
    train = TRAIN.replace("import engine\n", "import engine\nfrom data import make_loader\n").replace(
        "    train_loader = torch.utils.data.DataLoader(data, batch_size=8)\n",
        "    train_loader = make_loader(\"mnist\", 8)\n",
    )
    assert "make_loader(" in train.split("def main")[1]
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "data.py": data})
    results = _results([root])
    after = results["train.py"].after
    assert "    with accelerator.main_process_first():\n        train_loader = make_loader(\"mnist\", 8)\n" in after, after
    assert results["data.py"].after in (None, data)
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    assert "with accelerator.main_process_first():" in alone.after  # alone, the helper beside it is read
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (tmp_path / "train.py").rename(moved / "train.py")
    away = _results([str(moved / "train.py")])["train.py"]
    assert "main_process_first" not in (away.after or "")  # nothing imports a data.py from there


@pytest.mark.parametrize("weights, fetched", [
    ("weights=models.VGG19_Weights.IMAGENET1K_V1", True), ("pretrained=True", True),
    ("weights=None", False), ("pretrained=False", False),
])
def test_pretrained_weights_fetched_in_another_file_are_fetched_on_the_main_process_first(
    tmp_path, weights: str, fetched: bool,
) -> None:
    """SRGAN's `ContentLoss()` builds a pretrained VGG19 in its `__init__`: every process would
    download it into the same torch hub cache at once."""
    losses = textwrap.dedent(f'''\
        import torch
        from torchvision import models


        class ContentLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.features = models.vgg19({weights}).features
    ''')
    train = TRAIN.replace("import engine\n", "import engine\nfrom losses import ContentLoss\n").replace(
        "    model = torch.nn.Linear(4, 1)\n",
        "    model = torch.nn.Linear(4, 1)\n    content = ContentLoss()\n",
    )
    assert "content = ContentLoss()" in train
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "losses.py": losses})
    after = _results([root])["train.py"].after
    assert ("    with accelerator.main_process_first():\n        content = ContentLoss()\n" in after) is fetched, after


def test_a_module_named_like_a_library_is_the_projects_when_it_exports_what_the_library_does_not(tmp_path) -> None:
    """`from evaluate import evaluate` is the project's evaluate.py (the Hugging Face library
    exports load/combine/evaluator): handing it the prepared loader is reported; a call of
    the library's own API is not."""
    own = TRAIN.replace("import engine\n", "import engine\nfrom evaluate import evaluate\n").replace(
        "    outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "    outputs, targets = evaluate(valid_loader, model, device)\n",
    )
    assert "= evaluate(valid_loader" in own
    root = _project(tmp_path, **{"train.py": own, "engine.py": ENGINE})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    assert any(f.code == "AM914" and "`evaluate` from module `evaluate`" in f.message for f in alone.findings)
    library = own.replace("from evaluate import evaluate\n", "import evaluate\n").replace(
        "= evaluate(valid_loader, model, device)", "= evaluate.load(valid_loader, model, device)"
    )
    (tmp_path / "train.py").write_text(library)
    again = _results([os.path.join(root, "train.py")])["train.py"]
    assert not any("module `evaluate`" in f.message for f in again.findings)


def test_an_evaluation_returning_whole_batches_of_outputs_keeps_its_loader_whole(tmp_path) -> None:
    """A sequence model's outputs may put time first: an evaluation that appends whole output
    batches and returns the list leaves their layout to its caller, so gathering them on
    dim 0 could interleave the wrong axis. The run leaves that function alone and its
    loader out of prepare() (every process scores all the data); the training function,
    whose loop draws through a progress bar bound on its own line, is threaded and its
    per-process loss reduced."""
    train = textwrap.dedent('''\
        import torch
        import engine


        def main():
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            train_loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
            test_loader = torch.utils.data.DataLoader(data, batch_size=8)
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(2):
                train_loss = engine.train_fn(model, train_loader, optimizer)
                preds, test_loss = engine.eval_fn(model, test_loader)
                print(epoch, train_loss, test_loss, sum(p.shape[0] for p in preds))


        if __name__ == "__main__":
            main()
    ''')
    engine = textwrap.dedent('''\
        import torch
        from tqdm import tqdm


        def train_fn(model, data_loader, optimizer):
            model.train()
            fin_loss = 0
            tk0 = tqdm(data_loader, total=len(data_loader))
            for x, y in tk0:
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                fin_loss += loss.item()
            return fin_loss / len(data_loader)


        def eval_fn(model, data_loader):
            model.eval()
            fin_loss = 0
            fin_preds = []
            tk0 = tqdm(data_loader, total=len(data_loader))
            for x, y in tk0:
                batch_preds = model(x)
                fin_loss += torch.nn.functional.mse_loss(batch_preds, y).item()
                fin_preds.append(batch_preds)
            return fin_preds, fin_loss / len(data_loader)
    ''')
    root = _project(tmp_path, **{"train.py": train, "engine.py": engine})
    results = _results([root])
    train_after, engine_after = results["train.py"].after, results["engine.py"].after
    assert "accelerator.prepare(model, optimizer, train_loader)" in train_after
    assert "engine.eval_fn(model, test_loader)\n" in train_after
    assert engine_after[engine_after.index("def eval_fn"):] == engine[engine.index("def eval_fn"):]
    assert "def train_fn(model, data_loader, optimizer, *, accelerator):" in engine_after
    assert "fin_loss = accelerator.reduce(" in engine_after
    # the evaluation sees all the data: no share-of-the-data advice for it
    assert not [f for f in results["engine.py"].findings if not f.fixed]
    left = [f for f in results["train.py"].findings if f.code == "AM914" and not f.fixed]
    assert len(left) == 1 and "`test_loader` unprepared" in left[0].message
    assert "outputs it hands back whole" in left[0].message and "its own findings" not in left[0].message
    # migrated, each file linted alone (the pre-commit hook) says what the lint of both says
    list(migrate_paths([root], Config(), write=True))
    both = {os.path.basename(r.path): r.findings for r in migrate_paths([root], Config(fix=False))}
    for name in ("train.py", "engine.py"):
        alone = next(iter(migrate_paths([os.path.join(root, name)], Config(fix=False)))).findings
        assert [(f.code, f.message) for f in alone] == [(f.code, f.message) for f in both[name]], name
    assert "`test_loader` unprepared" in both["train.py"][0].message


def test_the_index_sees_through_a_progress_bar_and_whole_output_batches() -> None:
    import ast

    from migrator.project.index import _functions

    source = textwrap.dedent('''\
        def predict(net, loader):
            net.eval()
            out = []
            bar = tqdm(loader)
            for x in bar:
                y = net(x)
                out.append(y)
            return out


        def scores(net, loader):
            net.eval()
            out = []
            for x in loader:
                out.append(net(x).tolist())
            return out


        def stacked(net, loader):
            net.eval()
            out = []
            for x in loader:
                out.append(net(x))
            return torch.cat(out)
    ''')
    functions = _functions(ast.parse(source))
    assert dict(functions["predict"].param_roles) == {"loader": "dataloader", "net": "model"}
    assert not functions["predict"].threadable
    assert functions["scores"].threadable and functions["stacked"].threadable


def test_a_loader_also_read_whole_by_an_unthreaded_evaluation_is_handed_to_it_as_it_was(tmp_path) -> None:
    """`valid_loader` feeds the threaded evaluation (its share, gathered) and an evaluation
    that returns whole output batches (left without the Accelerator, it needs all the
    data): that call gets the loader as it was before prepare(), bound first."""
    engine = ENGINE + textwrap.dedent('''\


        def predict(model, loader):
            model.eval()
            outputs = []
            with torch.no_grad():
                for x, y in loader:
                    outputs.append(model(x))
            return outputs
    ''')
    train = TRAIN.replace(
        "        print(epoch, len(outputs))\n",
        "        print(epoch, len(outputs))\n    print(len(engine.predict(model, valid_loader)))\n",
    )
    assert "engine.predict" in train
    root = _project(tmp_path, **{"train.py": train, "engine.py": engine})
    results = _results([root])
    after = results["train.py"].after
    twin = after.index("    valid_loader_whole = valid_loader\n")
    assert twin < after.index("accelerator.prepare(")
    assert "engine.predict(model, valid_loader_whole)" in after
    assert "engine.evaluate(valid_loader, model, device, accelerator=accelerator)" in after
    assert engine_part(results["engine.py"].after, "def predict") == engine_part(engine, "def predict")
    assert not [f for f in results["engine.py"].findings if not f.fixed]
    compile(after, "train.py", "exec")


def engine_part(text: str, start: str) -> str:
    return text[text.index(start):]


def test_a_function_of_the_run_given_only_the_model_is_named_as_left_alone(tmp_path) -> None:
    """`evaluate(model, batches)` draws from an iterator, no DataLoader, and evaluate.py runs
    it itself too (so it is not threaded): the call says the function is in this run and
    left alone, not "migrate `evaluate` as well" (cs230's nlp example)."""
    evaluate = textwrap.dedent('''\
        import torch


        def evaluate(model, batches):
            model.eval()
            total = 0.0
            with torch.no_grad():
                for _ in range(4):
                    x, y = next(batches)
                    total += torch.nn.functional.mse_loss(model(x), y).item()
            return total / 4


        if __name__ == "__main__":
            print(evaluate(torch.nn.Linear(4, 1), iter([(torch.randn(8, 4), torch.randn(8, 1))] * 4)))
    ''')
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluate import evaluate\n").replace(
        "        print(epoch, len(outputs))\n",
        "        print(epoch, len(outputs))\n        batches = iter([(torch.randn(8, 4), torch.randn(8, 1))] * 4)\n"
        "        print(evaluate(model, batches))\n",
    )
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "evaluate.py": evaluate})
    results = _results([root])
    told = [f for f in results["train.py"].findings if f.code == "AM914" and "`evaluate` from module `evaluate`" in f.message]
    assert len(told) == 1 and "is part of this project" in told[0].message and "migrate `evaluate` as well" not in told[0].message


def test_a_meter_class_of_another_file_is_summed_across_processes(tmp_path) -> None:
    """`from meters import AverageMeter`: the class's bookkeeping (sum, count, avg) is read
    from meters.py, so the engine's meter is added up after its loop; a class that keeps
    another average (exponential) is not touched."""
    meters = textwrap.dedent('''\
        class AverageMeter:
            def __init__(self):
                self.sum, self.count, self.avg = 0.0, 0, 0.0

            def update(self, val, n=1):
                self.sum += val * n
                self.count += n
                self.avg = self.sum / self.count
    ''')
    engine = ENGINE.replace("from tqdm import tqdm\n", "from tqdm import tqdm\nfrom meters import AverageMeter\n").replace(
        "    model.train()\n    for x, y in tqdm(loader):\n",
        "    model.train()\n    losses = AverageMeter()\n    for x, y in tqdm(loader):\n",
    ).replace("        optimizer.step()\n", "        optimizer.step()\n        losses.update(loss.item(), x.size(0))\n    return losses.avg\n", 1)
    assert "losses.update(" in engine
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": engine, "meters.py": meters})
    after = _results([root])["engine.py"].after
    assert "    for meter in (losses,):\n        meter.sum, meter.count = accelerator.reduce(" in after, after
    assert after.index("for meter in (losses,)") < after.index("    return losses.avg")
    not_a_meter = meters.replace("self.avg = self.sum / self.count", "self.avg = 0.9 * self.avg + 0.1 * val")
    root = _project(tmp_path / "ema", **{"train.py": TRAIN, "engine.py": engine, "meters.py": not_a_meter})
    assert "for meter in" not in (_results([root])["engine.py"].after or "")


_SELF_BUILT = textwrap.dedent('''\
    import torch


    class Trainer:
        def __init__(self, loader):
            self.loader = loader
            self.model = torch.nn.Linear(4, 1)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def fit(self):
            for x, y in self.loader:
                self.optimizer.zero_grad()
                torch.nn.functional.mse_loss(self.model(x), y).backward()
                self.optimizer.step()
''')


@pytest.mark.parametrize(
    "caller, entered",
    [
        ("def main():\n    Trainer(make()).fit()\n\n\nif __name__ == '__main__':\n    main()\n", True),
        ("def main():\n    for seed in range(3):\n        Trainer(make()).fit()\n", False),  # one Accelerator per run
        ("import torch.multiprocessing as mp\n\n\ndef worker(rank):\n    Trainer(make()).fit()\n\n\nmp.spawn(worker, nprocs=2)\n", False),
        ("import torch\n\n\ndef main():\n    model = torch.nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    Trainer(make()).fit()\n", False),
    ],
    ids=["once", "in-a-loop", "in-a-spawned-worker", "caller-sets-up"],
)
def test_a_set_up_built_in_a_class_another_file_constructs(tmp_path, caller, entered) -> None:
    """The class builds its model and optimizer; the entry point constructs it once per
    process: the class's file is migrated (its Accelerator made in __init__). Constructed
    in a loop or in a worker handed to mp.spawn, it is left as written with AM954; a caller
    with a set-up of its own passes its Accelerator in instead (decide.py's threading)."""
    make = "import torch\nfrom trainer import Trainer\n\n\ndef make():\n    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))\n\n\n"
    root = _project(tmp_path, **{"main.py": make + caller, "trainer.py": _SELF_BUILT})
    result = _results([root])["trainer.py"]
    assert ("self.accelerator = Accelerator()" in (result.after or "")) is entered
    if "sets-up" not in caller and "opt =" not in caller:  # a caller with a set-up threads its Accelerator in
        assert any(f.code == "AM954" for f in result.findings) is not entered


def test_a_class_that_sets_itself_up_is_not_sent_the_accelerator(tmp_path) -> None:
    """main.py hands its loader to a Trainer that creates the Accelerator itself (RAM): the
    class reads as taking a loader, but AM914 must not ask main.py to pass one in."""
    main = (
        "import torch\nfrom trainer import Trainer\n\n\ndef main():\n"
        "    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))\n"
        "    Trainer(loader).fit()\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    results = _results([_project(tmp_path, **{"main.py": main, "trainer.py": _SELF_BUILT})])
    assert "self.accelerator = Accelerator()" in (results["trainer.py"].after or "")
    assert not [f for f in results["main.py"].findings if f.code == "AM914"], results["main.py"].findings


def test_folders_made_before_a_class_that_sets_itself_up_tolerate_each_other(tmp_path) -> None:
    """StarGAN's main.py makes its output folders, then builds a Solver that creates the
    Accelerator itself: every process runs main.py, so its `os.makedirs` under an
    existence test gets `exist_ok=True` though the file has no Accelerator of its own."""
    main = (
        "import os\nimport torch\nfrom trainer import Trainer\n\n\ndef main(out):\n"
        "    if not os.path.exists(out):\n        os.makedirs(out)\n"
        "    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))\n"
        "    Trainer(loader).fit()\n\n\nif __name__ == '__main__':\n    main('samples')\n"
    )
    results = _results([_project(tmp_path, **{"main.py": main, "trainer.py": _SELF_BUILT})])
    assert "self.accelerator = Accelerator()" in (results["trainer.py"].after or "")
    assert "        os.makedirs(out, exist_ok=True)\n" in results["main.py"].after
    alone = _results([str(tmp_path / "main.py")])["main.py"]  # the trainer beside it is read
    assert "os.makedirs(out, exist_ok=True)" in alone.after
    (tmp_path / "trainer.py").unlink()
    assert _results([str(tmp_path / "main.py")])["main.py"].after == main  # nothing says it is launched


def test_a_logger_class_of_another_file_that_keeps_a_writer_is_the_main_process_s(tmp_path) -> None:
    """StarGAN: logger.py wraps `tf.summary.FileWriter` in a class; the solver imports it
    inside a method and keeps it on `self`. Its creation and its writes go to the main
    process, as a SummaryWriter's do; a class that keeps no writer is left alone."""
    logger = (
        "import tensorflow as tf\n\n\nclass Logger(object):\n    def __init__(self, log_dir):\n"
        "        self.writer = tf.summary.FileWriter(log_dir)\n\n    def scalar_summary(self, tag, value, step):\n"
        "        self.writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag=tag, simple_value=value)]), step)\n\n\n"
        "class Quiet(object):\n    def __init__(self, log_dir):\n        self.path = log_dir\n\n    def scalar_summary(self, tag, value, step):\n        pass\n"
    )
    solver = _SELF_BUILT.replace("class Trainer", "class Solver").replace(
        "            self.optimizer.step()\n",
        "            self.optimizer.step()\n            self.logger.scalar_summary('loss', 1.0, 0)\n            self.quiet.scalar_summary('loss', 1.0, 0)\n",
    )
    solver = solver.replace("    def fit(self):", "    def build_tensorboard(self):\n        from logger import Logger, Quiet\n"
                            "        self.logger = Logger('runs')\n        self.quiet = Quiet('runs')\n\n    def fit(self):")
    solver = solver.replace("        self.loader = loader\n", "        self.loader = loader\n        self.build_tensorboard()\n")
    assert "self.build_tensorboard()" in solver and "self.logger.scalar_summary" in solver
    main = "import torch\nfrom solver import Solver\n\n\ndef main():\n    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))\n    Solver(loader).fit()\n\n\nif __name__ == '__main__':\n    main()\n"
    results = _results([_project(tmp_path, **{"main.py": main, "solver.py": solver, "logger.py": logger})])
    after = results["solver.py"].after
    assert "        if self.accelerator.is_main_process:\n            self.logger = Logger('runs')\n" in after, after
    assert "            if self.accelerator.is_main_process:\n                self.logger.scalar_summary('loss', 1.0, 0)\n" in after
    assert "        self.quiet = Quiet('runs')\n" in after and "self.quiet.scalar_summary('loss', 1.0, 0)\n" in after
    assert "\n            self.quiet.scalar_summary" in after  # not moved under an `if`
    assert results["logger.py"].after == logger


def test_a_trainer_class_that_keeps_a_writer_is_not_a_logger() -> None:
    """SimCLR's trainer keeps a SummaryWriter in __init__ but trains: building it on the
    main process only would leave the others without a trainer."""
    logs = "from torch.utils.tensorboard import SummaryWriter\n\n\nclass Board:\n    def __init__(self):\n        self.writer = SummaryWriter()\n"
    trainer = logs.replace("class Board", "class SimCLR") + "\n    def train(self, loader):\n        for x in loader:\n            self.optimizer.step()\n"
    main = "from logs import Board\nfrom simclr import SimCLR\n\nBoard()\nSimCLR().train([])\n"
    sources = {"logs.py": logs, "simclr.py": trainer, "main.py": main}
    found = project.logger_calls({p: t.encode() for p, t in sources.items()}, project.index(sources))
    assert found == {"main.py": ("Board",)}


def test_directories_made_by_code_other_files_run_tolerate_each_other(tmp_path) -> None:
    """`if not os.path.exists(d): os.makedirs(d)` in a Trainer's __init__ that main.py
    constructs, and in a helper of a file with no training code that main.py calls: every
    process runs them (RAM: FileExistsError on 5 of 20 two-process launches); so does the
    Trainer's `wandb.init()` (AM520)."""
    trainer = _SELF_BUILT.replace("import torch\n", "import os\n\nimport torch\n", 1).replace(
        "        self.loader = loader\n",
        "        self.loader = loader\n        if not os.path.exists('plots'):\n            os.makedirs('plots')\n"
        "        wandb.init(project='ram')\n",
    ).replace("import os\n", "import os\n\nimport wandb\n", 1)
    dirs = "import os\n\n\ndef prepare_dirs(paths):\n    for path in paths:\n        if not os.path.exists(path):\n            os.makedirs(path)\n"
    main = (
        "import torch\nfrom dirs import prepare_dirs\nfrom trainer import Trainer\n\n\ndef main():\n    prepare_dirs(['ckpt', 'logs'])\n"
        "    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))\n"
        "    Trainer(loader).fit()\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    results = _results([_project(tmp_path, **{"main.py": main, "trainer.py": trainer, "dirs.py": dirs})])
    assert "os.makedirs('plots', exist_ok=True)" in (results["trainer.py"].after or ""), results["trainer.py"].findings
    assert "os.makedirs(path, exist_ok=True)" in (results["dirs.py"].after or ""), results["dirs.py"].findings
    assert [f for f in results["trainer.py"].findings if f.code == "AM520"], results["trainer.py"].findings  # one run per process


def test_a_download_before_a_set_up_class_of_another_file_is_reported(tmp_path) -> None:
    """main.py builds the loaders (downloading MNIST through data.py) and hands them to a
    Trainer that creates the Accelerator itself: nothing orders the download, so it is
    named where main.py calls it; data.py's own helper, entering nothing, gets nothing."""
    data = textwrap.dedent('''\
        import torch
        from torchvision import datasets, transforms


        def make_loader(root):
            images = datasets.MNIST(root, train=True, download=True, transform=transforms.ToTensor())
            return torch.utils.data.DataLoader(images, batch_size=8)
    ''')
    main = "import torch\nfrom data import make_loader\nfrom trainer import Trainer\n\n\ndef main():\n    torch.manual_seed(0)\n    Trainer(make_loader('mnist')).fit()\n\n\nif __name__ == '__main__':\n    main()\n"
    root = _project(tmp_path, **{"main.py": main, "trainer.py": _SELF_BUILT, "data.py": data})
    results = _results([root])
    named = [f for f in results["main.py"].findings if f.code == "AM220"]
    assert len(named) == 1 and "created later, in `Trainer`" in named[0].message, results["main.py"].findings
    assert not [f for f in results["data.py"].findings if f.code == "AM220"]


def test_a_helper_class_whose_method_saves_a_model_is_followed_through_its_instance() -> None:
    """`es = utils.EarlyStopping()` then `es(score, model)`: `__call__` hands `model` to
    `self.save_checkpoint`, which saves its state_dict with torch.save; a class that only
    loads is followed too, and writes nothing."""
    from migrator.project.decide import state_calls
    from migrator.project.index import index

    utils = textwrap.dedent('''
        import torch

        class EarlyStopping:
            def __init__(self, path):
                self.path = path

            def __call__(self, score, model):
                self.save_checkpoint(score, model)

            def save_checkpoint(self, score, model):
                torch.save(model.state_dict(), self.path)

        class Restorer:
            def __init__(self, path):
                self.path = path

            def restore(self, model):
                model.load_state_dict(torch.load(self.path))
    ''')
    train = textwrap.dedent('''
        import utils
        es = utils.EarlyStopping("best.pt")
        back = utils.Restorer("best.pt")
        es(1.0, model)
        back.restore(model)
    ''')
    files = index({"utils.py": utils, "train.py": train})
    assert files["train.py"].instances == {"es": ("utils.py", "EarlyStopping"), "back": ("utils.py", "Restorer")}
    states = state_calls({}, files)["train.py"]
    assert ("es", (1,), ("model",), True) in states
    assert ("es.save_checkpoint", (1,), ("model",), True) in states
    assert ("back.restore", (0,), ("model",), False) in states  # loads only: no file written


@pytest.mark.parametrize("exports", ["from .loop import *\n", "from .loop import train_one_epoch, evaluate\n"])
def test_functions_a_package_re_exports_are_threaded_where_they_are_defined(tmp_path, exports) -> None:
    """`import engine` where engine/ is a package whose `__init__.py` re-exports the
    functions of engine/loop.py: the calls reach loop.py, migrated as a module beside."""
    root = _project(tmp_path, **{"train.py": TRAIN, "engine/__init__.py": exports, "engine/loop.py": ENGINE})
    results = _results([root])
    assert "engine.train_one_epoch(train_loader, model, optimizer, device, accelerator=accelerator)" in results["train.py"].after
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in results["loop.py"].after
    assert "accelerator.backward(loss)" in results["loop.py"].after
    assert results["__init__.py"].after == exports
    assert not [f for f in results["train.py"].findings if f.code == "AM914" and not f.fixed]


BASE_TRAINER = textwrap.dedent('''\
    import torch


    class BaseTrainer:
        def __init__(self, model, optimizer, epochs):
            self.model = model
            self.optimizer = optimizer
            self.epochs = epochs

        def train(self):
            for epoch in range(self.epochs):
                print(epoch, self._train_epoch())
                torch.save(self.model.state_dict(), f"checkpoint-{epoch}.pt")
''')

SUB_TRAINER = textwrap.dedent('''\
    from base import BaseTrainer


    class Trainer(BaseTrainer):
        def __init__(self, model, optimizer, loader, device, scheduler):
            super().__init__(model, optimizer, 2)
            self.loader = loader
            self.device = device
            self.scheduler = scheduler

        def _train_epoch(self):
            total = 0.0
            for x, y in self.loader:
                x, y = x.to(self.device), y.to(self.device)
                self.optimizer.zero_grad()
                loss = ((self.model(x) - y) ** 2).mean()
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            self.scheduler.step()
            return total
''')

SUB_SETUP = textwrap.dedent('''\
    import torch
    from trainer import Trainer


    def main():
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
        model = torch.nn.Linear(4, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
        Trainer(model, optimizer, loader, device, scheduler).train()


    if __name__ == "__main__":
        main()
''')


def test_a_trainer_class_built_on_a_class_of_another_file_is_not_threaded(tmp_path) -> None:
    """`class Trainer(BaseTrainer)`, the base in base.py holding the epoch loop and the
    checkpoints: the migration of trainer.py cannot see them, so Trainer gets no
    Accelerator (its methods would take it while the inherited loop saves on every
    process), and the caller is told why, not to migrate a module it already gives."""
    root = _project(tmp_path, **{"train.py": SUB_SETUP, "trainer.py": SUB_TRAINER, "base.py": BASE_TRAINER})
    results = _results([root])
    assert results["trainer.py"].after == SUB_TRAINER
    assert results["base.py"].after == BASE_TRAINER
    told = [f.message for f in results["train.py"].findings if f.code == "AM914"]
    assert len(told) == 1 and "is built on `BaseTrainer` of base.py" in told[0], told
    assert "migrate `trainer` as well" not in told[0]


def test_a_driver_left_without_an_accelerator_names_its_data_parallel_wrap(tmp_path) -> None:
    """pytorch-template's shape: train.py wraps the model in DataParallel and hands it to
    a Trainer built on a base class of another file. The driver is left as written (AM914),
    so the wrap the hand migration must remove is named there, with the batch it changes,
    and AM914 says what to prepare."""
    by_name = SUB_SETUP.replace(  # built by name from a config, as pytorch-template's init_obj does
        "torch.optim.SGD(model.parameters(), lr=0.1)", 'getattr(torch.optim, "SGD")(model.parameters(), lr=0.1)',
    ).replace("torch.optim.lr_scheduler.StepLR(optimizer, 1)", 'getattr(torch.optim.lr_scheduler, "StepLR")(optimizer, 1)')
    wrapping = by_name.replace(
        "    optimizer = ",
        "    if torch.cuda.device_count() > 1:\n        model = torch.nn.DataParallel(model)\n    optimizer = ",
    )
    root = _project(tmp_path, **{"train.py": wrapping, "trainer.py": SUB_TRAINER, "base.py": BASE_TRAINER})
    results = _results([root])
    assert results["train.py"].after == wrapping
    wraps = [f for f in results["train.py"].findings if f.code == "AM210"]
    assert len(wraps) == 1 and wraps[0].start.line == 11, wraps
    assert "goes to `Trainer` of trainer.py" in wraps[0].message and "divide the batch size" in wraps[0].message
    told = [f.message for f in results["train.py"].findings if f.code == "AM914"]
    assert "prepare the model together with its optimizer" in told[0], told
    unwrapped = _results([_project(tmp_path / "plain", **{"train.py": by_name, "trainer.py": SUB_TRAINER, "base.py": BASE_TRAINER})])
    assert not [f for f in unwrapped["train.py"].findings if f.code == "AM210"]


def test_a_model_written_or_uploaded_by_code_other_files_run_is_named(tmp_path) -> None:
    """Bert-Multi-Label's ModelCheckpoint: `save_pretrained(dir)` in a base class the run
    calls on every process, which gets no Accelerator: every process writes the model (and
    would upload it). Named there, left as written; a write already given
    `is_main_process=` is not."""
    base = BASE_TRAINER.replace(
        '            torch.save(self.model.state_dict(), f"checkpoint-{epoch}.pt")\n',
        '            self.model.save_pretrained(f"checkpoint-{epoch}")\n'
        '            self.model.save_pretrained("last", is_main_process=False)\n'
        '        self.model.push_to_hub(repo_id="me/model")\n',
    )
    assert base != BASE_TRAINER
    root = _project(tmp_path, **{"train.py": SUB_SETUP, "trainer.py": SUB_TRAINER, "base.py": base})
    results = _results([root])
    assert results["base.py"].after == base
    named = [(f.start.line, f.message) for f in results["base.py"].findings if f.code == "AM502"]
    assert [line for line, _ in named] == [13, 15], named
    assert all("other files of the run call this code" in message for _, message in named)
    assert "upload to `\"me/model\"`" in named[1][1]


PLACING_TOOLS = '''\
import torch


def place(model, n_gpu):
    device = torch.device("cuda" if n_gpu > 0 else "cpu")
    model = model.to(device)
    if n_gpu > 1:
        model = torch.nn.DataParallel(model)
    return model, device
'''

REFUSED_TRAINER = '''\
import torch
from torch.nn.utils import clip_grad_norm_

from .tools import place


class Trainer:
    def __init__(self, model, criterion, optimizer, verbose=1, n_gpu=0):
        self.verbose = verbose
        self.criterion = criterion
        self.optimizer = optimizer
        self.model, self.device = place(model, n_gpu)

    def train(self, loader, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                x, y = x.to(self.device), y.to(self.device)
                loss = self.criterion(self.model(x), y)
                loss.backward()
                clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.optimizer.zero_grad()
'''

TRAINER_CALLER = '''\
import torch
from torch.utils.data import DataLoader, TensorDataset

from pkg.trainer import Trainer


def make_optimizer(params, lr):
    return torch.optim.AdamW(params, lr=lr)


def main():
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = torch.nn.Linear(4, 1)
    groups = [{"params": [p for n, p in model.named_parameters() if "bias" not in n], "weight_decay": 0.01}]
    optimizer = make_optimizer(groups, 1e-3)
    Trainer(model=model, criterion=torch.nn.MSELoss(), optimizer=optimizer, n_gpu=torch.cuda.device_count()).train(loader, 2)


if __name__ == "__main__":
    main()
'''


def test_callers_of_a_trainer_dropped_before_its_migration_was_tried_keep_their_set_up(tmp_path) -> None:
    """Bert-Multi-Label's shape: `Trainer(model=..., optimizer=..., n_gpu=...)` leaves
    `verbose` between given parameters to its default, so no stub of its callers can be
    made and the rounds drop it untried; alone, its migration is left as written (a helper
    wraps the model in DataParallel). Its callers must not prepare a set-up for it."""
    root = _project(tmp_path, **{
        "run_a.py": TRAINER_CALLER, "run_b.py": TRAINER_CALLER, "pkg/__init__.py": "",
        "pkg/tools.py": PLACING_TOOLS, "pkg/trainer.py": REFUSED_TRAINER,
    })
    results = _results([root])
    for caller in ("run_a.py", "run_b.py"):
        assert results[caller].after == TRAINER_CALLER
        refusals = [f.message for f in results[caller].findings if f.code.startswith("AM95")]
        assert len(refusals) == 1 and "`Trainer` trains what this file would prepare" in refusals[0], refusals
    assert results["trainer.py"].after == REFUSED_TRAINER
    # named as a pre-commit hook names files: run_b.py, beside, is only read, so nothing is threaded
    named = _results([os.path.join(root, "run_a.py"), os.path.join(root, "pkg", "trainer.py")])
    assert named["run_a.py"].after == TRAINER_CALLER
    assert any(f.code == "AM951" and "`Trainer` trains what this file would prepare" in f.message for f in named["run_a.py"].findings)


BOX_LOSS = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F


    class BoxLoss(torch.nn.Module):
        def forward(self, boxes, targets, positive):
            losses = []
            for i in range(boxes.shape[0]):
                if positive[i].any():
                    losses.append(F.smooth_l1_loss(boxes[i][positive[i]], targets[i][positive[i]]))
                else:
                    losses.append(torch.tensor(0).float())
            return torch.stack(losses).mean()
''')

BOX_TRAIN = textwrap.dedent('''\
    import torch
    from losses import BoxLoss

    model = torch.nn.Linear(4, 4)
    criterion = BoxLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(2, 3, 4)
        loss = criterion(model(x), x, x[..., 0] > 1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
''')


def test_a_loss_of_another_file_constant_on_some_batches_is_named_where_it_is_fixed(tmp_path) -> None:
    """retinanet's FocalLoss: built in another file and called there, its `forward` runs on
    every process; its regression term is a constant for an image without a positive
    anchor. Named in losses.py (the fix is there), left as written."""
    root = _project(tmp_path, **{"train.py": BOX_TRAIN, "losses.py": BOX_LOSS})
    results = _results([root])
    assert results["losses.py"].after == BOX_LOSS
    named = [f for f in results["losses.py"].findings if f.code == "AM231"]
    assert len(named) == 1 and named[0].start.line == 12, named
    assert "`losses` in `BoxLoss.forward`" in named[0].message and "other files of the run call this code" in named[0].message


def test_a_method_a_base_class_of_another_file_runs_gets_its_type_test_and_keeps_its_training_named(tmp_path) -> None:
    """yassouali's trainer.py: `Trainer(BaseTrainer)` is built in train.py and its
    `_train_epoch` runs from the base class's loop in base.py. Its model's DataParallel
    test learns DistributedDataParallel (AM229, written), a criterion's is left alone (never
    what prepare() wraps), and its backward, left without an Accelerator, is still named."""
    trainer = SUB_TRAINER.replace(
        "        total = 0.0\n",
        "        total = 0.0\n"
        "        if isinstance(self.model, torch.nn.DataParallel):\n"
        "            self.model.module.train()\n"
        "        if isinstance(self.criterion, torch.nn.DataParallel):\n"
        "            total = -1.0\n",
    ).replace("from base import BaseTrainer\n", "import torch\n\nfrom base import BaseTrainer\n")
    assert trainer.count("isinstance") == 2
    root = _project(tmp_path, **{"train.py": SUB_SETUP, "trainer.py": trainer, "base.py": BASE_TRAINER})
    result = _results([root])["trainer.py"]
    assert "isinstance(self.model, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel))" in result.after
    assert "isinstance(self.criterion, torch.nn.DataParallel)" in result.after
    assert [f.start.line for f in result.findings if f.code == "AM916"] == [23, 24], result.findings


def test_a_base_class_that_builds_the_optimizer_is_where_the_model_is_prepared(tmp_path) -> None:
    """yassouali's shape: train.py hands `Trainer` the model and loader, and the base class
    builds the optimizer. AM914 does not ask to prepare the model with an optimizer that
    does not exist in train.py: it says where the optimizer is built."""
    base = BASE_TRAINER.replace(
        "    def __init__(self, model, optimizer, epochs):\n        self.model = model\n        self.optimizer = optimizer\n",
        "    def __init__(self, model, epochs):\n        self.model = model\n"
        "        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
    )
    trainer = SUB_TRAINER.replace("model, optimizer, loader, device, scheduler):\n        super().__init__(model, optimizer, 2)",
                                  "model, loader, device):\n        super().__init__(model, 2)").replace(
        "        self.scheduler.step()\n", "").replace("        self.scheduler = scheduler\n", "")
    setup = SUB_SETUP.replace("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n", "").replace(
        "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)\n", "").replace(
        "Trainer(model, optimizer, loader, device, scheduler)", "Trainer(model, loader, device)")
    assert base != BASE_TRAINER and "scheduler" not in trainer and "optimizer" not in setup, (trainer, setup)
    root = _project(tmp_path, **{"train.py": setup, "trainer.py": trainer, "base.py": base})
    told = [f.message for f in _results([root])["train.py"].findings if f.code == "AM914"]
    assert len(told) == 1 and "the model together with its optimizer where the classes build the optimizer" in told[0], told


def test_the_index_takes_neither_a_scheduler_stepped_after_the_loop_nor_a_generator_for_training() -> None:
    import ast

    from migrator.project.index import _functions

    functions = _functions(ast.parse(SUB_TRAINER.replace("(BaseTrainer)", "") + textwrap.dedent('''\


        def inf_loop(loader):
            for batch in loader:
                yield batch


        def fit(loader, net, opt, sched):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = net(x).sum()
                if loss > 0:
                    loss.backward()
                    opt.step()
                sched.step()
    ''')))
    assert dict(functions["Trainer"].param_roles) == {"loader": "dataloader"}  # the scheduler is no optimizer
    assert not functions["inf_loop"].threadable
    assert dict(functions["fit"].param_roles).get("opt") == "optimizer"
    assert "sched" not in dict(functions["fit"].param_roles)


def test_a_metric_helper_of_an_engine_does_not_hold_the_engine_back(tmp_path) -> None:
    """`accuracy(output, target, topk)` of metrics.py loops over `topk`, but neither trains
    nor takes a model, optimizer or loader: the engine that calls it is threaded, and the
    helper is left as written (it needs no Accelerator)."""
    metrics = textwrap.dedent('''\
        def accuracy(output, target, topk=(1,)):
            correct = output.argmax(1).eq(target)
            res = []
            for k in topk:
                res.append(correct[:k].float().sum())
            return res
    ''')
    engine = ENGINE.replace("import torch\n", "import torch\nfrom metrics import accuracy\n", 1).replace(
        "        optimizer.step()\n", "        optimizer.step()\n        accuracy(model(x), y.long().squeeze(1))\n", 1,
    )
    assert "accuracy(model(x)" in engine
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": engine, "metrics.py": metrics})
    results = _results([root])
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in results["engine.py"].after
    assert "accelerator=accelerator" in results["train.py"].after
    assert results["metrics.py"].after == metrics


def test_a_loader_of_pretrained_weights_is_not_taken_for_training(tmp_path) -> None:
    """AM914 reads the words of a function's name: `load_pretrained_state_dict` holds
    `pretrained`, not the verb `train`; `pretrain_epoch` does."""
    setup = TRAIN.replace("import engine\n", "import helpers\n").replace(
        "    for epoch in range(2):\n",
        "    helpers.load_pretrained_state_dict(model, 'w.pt')\n    helpers.pretrain_epoch(model, optimizer)\n"
        "    for epoch in range(2):\n",
    )
    assert "helpers.pretrain_epoch" in setup
    root = _project(tmp_path, **{"train.py": setup})
    told = [f.message for f in _results([os.path.join(root, "train.py")])["train.py"].findings if f.code == "AM914"]
    assert any("pretrain_epoch" in m for m in told), told
    assert not any("load_pretrained_state_dict" in m for m in told), told


def test_the_held_trainer_s_own_file_says_its_set_up_is_in_the_run(tmp_path) -> None:
    """The file of a trainer class left without the Accelerator (built on a base class of
    another file) says its set-up is in the project, not that it is missing."""
    root = _project(tmp_path, **{"train.py": SUB_SETUP, "trainer.py": SUB_TRAINER, "base.py": BASE_TRAINER})
    said = [f.message for f in _results([root])["trainer.py"].findings if f.code == "AM916"]
    assert said and all("calls `Trainer` without an Accelerator" in m for m in said), said


def test_a_project_helper_true_on_the_main_process_guards_like_is_main_process(tmp_path) -> None:
    """`if dist.is_primary(): loader = tqdm(loader)`, `dist` the project's own module whose
    is_primary() compares the rank with 0: the progress bar is the main process's already."""
    helpers = textwrap.dedent('''\
        import torch.distributed as tdist


        def get_rank():
            if not tdist.is_available() or not tdist.is_initialized():
                return 0
            return tdist.get_rank()


        def is_primary():
            return get_rank() == 0
    ''')
    setup = textwrap.dedent('''\
        import torch
        from tqdm import tqdm

        import distributed as dist


        def main():
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=8)
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            if dist.is_primary():
                loader = tqdm(loader)
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": setup, "distributed.py": helpers})
    codes = [f.code for f in _results([root])["train.py"].findings]
    assert "AM217" in codes and "AM512" not in codes, codes


def test_an_evaluation_of_another_module_is_not_said_to_need_a_backward(tmp_path) -> None:
    """Named for an evaluation and handed no optimizer: its metrics and prints (its prints
    alone when it is handed no loader either); a trainer that builds its own optimizer
    (`helpers.fit(model, loader)`) keeps its backward."""
    setup = TRAIN.replace("import engine\n", "import helpers\n").replace("engine.", "helpers.").replace(
        "    for epoch in range(2):\n",
        "    helpers.fit(model, train_loader)\n    helpers.evaluate_on_set(\"val\", model)\n    for epoch in range(2):\n",
    )
    root = _project(tmp_path, **{"train.py": setup})
    told = {f.message.split("`")[1]: f.message for f in _results([os.path.join(root, "train.py")])["train.py"].findings if f.code == "AM914"}
    assert "its backward, metrics and prints" in told["helpers.train_one_epoch"], told
    assert "its metrics and prints" in told["helpers.evaluate"] and "backward" not in told["helpers.evaluate"], told
    assert "its backward, metrics and prints" in told["helpers.fit"], told
    # handed the model alone (RetinaNet's csv_eval.evaluate(dataset_val, retinanet)): it reads its data whole
    assert "its prints (it reads its data whole" in told["helpers.evaluate_on_set"], told


def test_an_evaluation_that_builds_its_loaders_sharded_is_not_said_to_read_them_whole(tmp_path) -> None:
    """lufficc/SSD's `do_evaluation(cfg, model, distributed=...)` builds its loaders with
    make_data_loader, which shards them through a DistributedSampler: each process reads
    its share, so "each process evaluates all of it" was false (reader R4)."""
    setup = TRAIN.replace("import engine\n", "import helpers\n").replace("engine.", "helpers.").replace(
        "    for epoch in range(2):\n", "    helpers.evaluate_on_set(model)\n    for epoch in range(2):\n",
    )
    helpers = textwrap.dedent('''\
        import torch

        from data import build


        def evaluate_on_set(model, distributed=True):
            correct = 0
            for x, y in build(distributed):
                correct += int((model(x) - y).abs().lt(0.5).sum())
            return correct
    ''')
    for data, told_whole in ((SHARDING_DATA, False), (SHARDING_DATA.replace("DistributedSampler(data, num_replicas=2, rank=0)", "RandomSampler(data)"), True)):
        root = _project(tmp_path / str(told_whole), **{"train.py": setup, "helpers.py": helpers, "data.py": data})
        told = [
            f.message for f in _results([os.path.join(root, "train.py")])["train.py"].findings
            if f.code == "AM914" and "evaluate_on_set" in f.message
        ]
        assert told and ("reads its data whole" in told[0]) is told_whole, told
        assert ("with a DistributedSampler: this process's share" in told[0]) is not told_whole, told

    gathering = helpers.replace("import torch\n", "import torch\nimport torch.distributed as dist\n").replace(
        "    return correct\n", "    return _summed(correct)\n\n\ndef _summed(count):\n"
        "    counts = [None] * dist.get_world_size()\n    dist.all_gather_object(counts, count)\n    return sum(counts)\n",
    )
    assert "all_gather_object" in gathering
    root = _project(tmp_path / "gathers", **{"train.py": setup, "helpers.py": gathering, "data.py": SHARDING_DATA})
    told = [f for f in _results([os.path.join(root, "train.py")])["train.py"].findings if "evaluate_on_set" in f.message]
    assert told == [], told  # shards and gathers itself: a distributed evaluation already (lufficc/SSD, reader R1)


EVALUATOR = textwrap.dedent('''\
    import torch


    class Evaluator:
        def __init__(self, model):
            self.model = model

        def evaluate(self, loader):
            self.model.eval()
            features = {}
            with torch.no_grad():
                for index, (x, y) in enumerate(loader):
                    features[index] = self.model(x)
            return len(features)
''')


def test_a_loader_read_only_by_the_method_of_an_evaluator_of_another_file_stays_whole(tmp_path) -> None:
    """open-reid: `evaluator = Evaluator(model)`, then `evaluator.evaluate(val_loader)`; the
    evaluator gets no Accelerator and keys its features by sample over the whole set, so a
    sharded loader would leave it keys short on N processes."""
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluators import Evaluator\n").replace(
        "        outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "        outputs = targets = []\n        evaluator.evaluate(valid_loader)\n",
    ).replace("    for epoch in range(2):\n", "    evaluator = Evaluator(model)\n    for epoch in range(2):\n")
    assert "evaluator.evaluate(valid_loader)" in train
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "evaluators.py": EVALUATOR})
    results = _results([root])
    after = results["train.py"].after
    prepared = after.split("accelerator.prepare(")[1].split(")")[0]
    assert "train_loader" in prepared and "valid_loader" not in prepared, after
    told = [f.message for f in results["train.py"].findings if f.code == "AM914" and "Evaluator" in f.message]
    assert told and "reads `valid_loader` unprepared" in told[0]


def test_an_evaluator_method_handed_the_training_loader_is_told_it_reads_a_share(tmp_path) -> None:
    """The loader is trained on too, so it is prepared; the method of the evaluator (no
    Accelerator) reads this process's share: no unused `_whole` copy, and AM914 says so."""
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluators import Evaluator\n").replace(
        "        outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "        outputs = targets = []\n        evaluator.evaluate(train_loader)\n",
    ).replace("    for epoch in range(2):\n", "    evaluator = Evaluator(model)\n    for epoch in range(2):\n")
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "evaluators.py": EVALUATOR})
    results = _results([root])
    assert "_whole" not in results["train.py"].after
    told = [f.message for f in results["train.py"].findings if f.code == "AM914" and "Evaluator" in f.message]
    assert told and "reads `train_loader` prepared, so only this process's share" in told[0]
    assert "reads its data whole" not in told[0]


def test_an_evaluation_that_adds_up_across_processes_itself_gets_its_loader_prepared(tmp_path) -> None:
    """`dist.all_reduce(correct)` in the evaluation: handed the whole data on every process,
    it would count it N times (reader R3's probe: accuracy 0.875 for 0.4375 on 2 processes)."""
    reducing = EVALUATOR.replace("import torch\n", "import torch\nimport torch.distributed as dist\n").replace(
        "        return len(features)\n",
        "        count = torch.tensor(float(len(features)))\n"
        "        if dist.is_initialized():\n            dist.all_reduce(count)\n"
        "        return count.item()\n",
    )
    assert "dist.all_reduce(count)" in reducing
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluators import Evaluator\n").replace(
        "        outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "        outputs = targets = []\n        evaluator.evaluate(valid_loader)\n",
    ).replace("    for epoch in range(2):\n", "    evaluator = Evaluator(model)\n    for epoch in range(2):\n")
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "evaluators.py": reducing})
    after = _results([root])["train.py"].after
    assert "valid_loader" in after.split("accelerator.prepare(")[1].split(")")[0], after


def test_a_call_that_passes_download_false_does_not_download(tmp_path) -> None:
    data = textwrap.dedent('''\
        from torchvision.datasets.utils import download_url


        class Images:
            def __init__(self, root, download=False):
                if download:
                    download_url("http://example.com/x.tar", root)
    ''')
    train = TRAIN.replace("import engine\n", "import engine\nfrom data import Images\n").replace(
        "    model = torch.nn.Linear(4, 1)\n", "    images = Images(\"data\", download=False)\n    model = torch.nn.Linear(4, 1)\n"
    )
    assert "Images(\"data\", download=False)" in train
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "data.py": data})
    after = _results([root])["train.py"].after
    assert "main_process_first" not in after
    again = _results([_project(tmp_path, **{"train.py": train.replace("download=False", "download=True")})])["train.py"]
    assert "with accelerator.main_process_first():\n        images = Images(\"data\", download=True)" in again.after


def test_batches_data_parallel_moved_for_an_evaluator_of_another_file_are_refused(tmp_path) -> None:
    """open-reid: `nn.DataParallel(model).cuda()` moved every batch onto the GPU; the
    evaluator of another file (no Accelerator) is handed a loader left unprepared, and feeds
    the model its batches as they come, on the CPU: the file is left as written (AM953)."""
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluators import Evaluator\n").replace(
        "    model.to(device)\n", "    model = torch.nn.DataParallel(model).to(device)\n"
    ).replace(
        "        outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "        outputs = targets = []\n        evaluator.evaluate(valid_loader)\n",
    ).replace("    for epoch in range(2):\n", "    evaluator = Evaluator(model)\n    for epoch in range(2):\n")
    assert "DataParallel(model)" in train
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "evaluators.py": EVALUATOR})
    result = _results([root])["train.py"]
    assert result.after in (None, train)
    assert any(f.code == "AM953" and "`evaluator.evaluate`" in f.message for f in result.findings)


def test_an_evaluator_that_moves_its_batches_itself_is_not_refused_for_them(tmp_path) -> None:
    """clovaai's `validation` moves each batch `.to(device)` itself: the batches DataParallel
    moved before reach the model's device without a prepared loader."""
    placing = EVALUATOR.replace(
        "                features[index] = self.model(x)\n",
        "                features[index] = self.model(x.to(next(self.model.parameters()).device))\n",
    )
    assert ".to(next(" in placing
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluators import Evaluator\n").replace(
        "    model.to(device)\n", "    model = torch.nn.DataParallel(model).to(device)\n"
    ).replace(
        "        outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "        outputs = targets = []\n        evaluator.evaluate(valid_loader)\n",
    ).replace("    for epoch in range(2):\n", "    evaluator = Evaluator(model)\n    for epoch in range(2):\n")
    root = _project(tmp_path, **{"train.py": train, "engine.py": ENGINE, "evaluators.py": placing})
    result = _results([root])["train.py"]
    assert not any(f.code == "AM953" for f in result.findings)


def test_a_setup_built_by_factories_it_cannot_read_is_named_by_keyword(tmp_path) -> None:
    """pytorch-segmentation: `train.py` builds its model and loaders through a config
    factory (`get_instance(models, 'arch', config)`) and hands them to `Trainer(model=...,
    train_loader=...)`, whose base class builds the optimizer. Nothing there is recognised
    as a model or a loader, but the keywords say what is handed over: the call is reported,
    so the engine's AM916 ("its AM914 says why") points at a finding that exists."""
    train = (
        "import torch\nimport models\nfrom trainer import Trainer\n\n\n"
        "def get_instance(module, name, config, *args):\n    return getattr(module, config[name]['type'])(*args)\n\n\n"
        "def main(config):\n    train_loader = get_instance(models, 'train_loader', config)\n"
        "    model = get_instance(models, 'arch', config)\n"
        "    trainer = Trainer(model=model, config=config, train_loader=train_loader)\n    trainer.train()\n"
    )
    base = (
        "class BaseTrainer:\n    def __init__(self, model, config, train_loader):\n"
        "        self.model, self.train_loader = model, train_loader\n"
        "        self.optimizer = config.build_optimizer(model.parameters())\n"
    )
    trainer = (
        "import torch\nfrom base import BaseTrainer\n\n\nclass Trainer(BaseTrainer):\n"
        "    def train(self):\n        for x, y in self.train_loader:\n            self.optimizer.zero_grad()\n"
        "            loss = (self.model(x) - y).pow(2).mean()\n            loss.backward()\n            self.optimizer.step()\n"
    )
    root = _project(tmp_path, **{"train.py": train, "trainer.py": trainer, "base.py": base, "models.py": "\n"})
    results = _results([root])
    told = [f.message for f in results["train.py"].findings if f.code == "AM914"]
    assert len(told) == 1 and "receives the model, loader" in told[0], told
    assert results["train.py"].after == train


def test_an_engine_found_through_a_folder_put_on_sys_path(tmp_path) -> None:
    """HRNet: tools/train.py runs `import _init_paths` (which puts lib/ on sys.path), then
    `import core.engine`: the run's one file ending in core/engine.py is that module, so
    the two migrate together. A one-part module (`import engine`) is not guessed."""
    init_paths = "import os.path as osp\nimport sys\n\nsys.path.insert(0, osp.join(osp.dirname(__file__), '..', 'lib'))\n"
    train = TRAIN.replace("import engine\n", "import _init_paths\nimport core.engine as engine\n")
    root = _project(tmp_path, **{"tools/train.py": train, "tools/_init_paths.py": init_paths, "lib/core/engine.py": ENGINE})
    results = _results([root])
    assert "engine.train_one_epoch(train_loader, model, optimizer, device, accelerator=accelerator)" in results["train.py"].after
    assert "accelerator.backward(loss)" in results["engine.py"].after
    two = _project(tmp_path / "two", **{
        "tools/train.py": train, "tools/_init_paths.py": init_paths, "lib/core/engine.py": ENGINE,
        "vendor/core/engine.py": ENGINE,
    })
    assert _results([two])["engine.py"].after == ENGINE  # two candidates: not guessed


def test_a_checkpoint_helper_gated_by_the_first_run_is_not_threaded_by_the_second(tmp_path) -> None:
    """HRNet: a first run put `save_checkpoint(state, ...)` (another file's helper that
    only torch.saves) under `if accelerator.is_main_process:`. A second run over the
    migrated files must not now thread the Accelerator into the helper: only the main
    process calls it, and the first run's text is the answer (the harness's idempotence
    check failed on this)."""
    utils = (
        "import os\n\nimport torch\n\n\ndef save_checkpoint(states, output_dir, filename='checkpoint.pth.tar'):\n"
        "    torch.save(states, os.path.join(output_dir, filename))\n"
    )
    train = (
        "import torch\nfrom runtime import Accelerator\nfrom utils import save_checkpoint\n\n\ndef main():\n"
        "    accelerator = Accelerator()\n    model = torch.nn.Linear(4, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    model, optimizer = accelerator.prepare(model, optimizer)\n    for epoch in range(2):\n"
        "        optimizer.zero_grad()\n        accelerator.backward(model(torch.ones(2, 4)).sum())\n        optimizer.step()\n"
        "        if accelerator.is_main_process:\n"
        "            save_checkpoint({'state_dict': accelerator.unwrap_model(model).state_dict()}, 'out')\n"
    )
    root = _project(tmp_path, **{"train.py": train, "utils.py": utils})
    again = _results([root])
    assert all(r.after == r.before for r in again.values()), {n: r.after for n, r in again.items() if r.after != r.before}


def test_an_evaluator_that_moves_only_its_targets_is_refused_for_its_inputs(tmp_path) -> None:
    """HRNet's `validate` (also called by valid.py, which has no Accelerator to pass, so it
    is not threaded) moves its targets (`target = target.cuda()`) but feeds the model its
    inputs as the loader left them: DataParallel moved those, a loader kept whole does not,
    so the file is left as written (AM953) rather than crash on one GPU (reader R1)."""
    evaluators = textwrap.dedent('''\
        import torch


        def validate(loader, model):
            model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    y = y.cuda()
                    correct += (model(x).argmax(1) == y).sum().item()
            return correct
    ''')
    valid = "import torch\nfrom evaluators import validate\n\n\ndef main(loader):\n    model = torch.load('m.pt')\n    print(validate(loader, model))\n"
    train = TRAIN.replace("import engine\n", "import engine\nfrom evaluators import validate\n").replace(
        "    model.to(device)\n", "    model = torch.nn.DataParallel(model).to(device)\n"
    ).replace(
        "        outputs, targets = engine.evaluate(valid_loader, model, device)\n",
        "        outputs = targets = []\n        validate(valid_loader, model)\n",
    )
    files = {"train.py": train, "engine.py": ENGINE, "evaluators.py": evaluators, "valid.py": valid}
    result = _results([_project(tmp_path, **files)])["train.py"]
    assert any(f.code == "AM953" for f in result.findings), [(f.code, f.message[:150]) for f in result.findings]
    moving = evaluators.replace("            correct += (model(x)", "            x = x.cuda()\n            correct += (model(x)")
    assert "x = x.cuda()" in moving
    files["evaluators.py"] = moving
    result = _results([_project(tmp_path / "moving", **files)])["train.py"]
    assert not any(f.code == "AM953" for f in result.findings)


def test_a_file_driving_the_training_of_another_file_is_never_passed_in_silence(tmp_path) -> None:
    """chenyuntc's train.py draws the batches and calls `trainer.train_step(...)` of a class
    of trainer.py whose methods run the backward and the step; it calls no backward itself.
    Alone (the pre-commit hook's case) it got no finding at all: the method that trains is
    named now (AM916), not the constructor or a method that only loads. (A class that builds
    its optimizer itself creates the Accelerator in its own file: its caller has nothing to do.)"""
    trainer = textwrap.dedent('''\
        import torch


        class Trainer:
            def __init__(self, net):
                self.net = net
                self.optimizer = net.get_optimizer()

            def load(self, path):
                self.net.load_state_dict(torch.load(path))

            def train_step(self, x, y):
                self.optimizer.zero_grad()
                self.update(torch.nn.functional.mse_loss(self.net(x), y))

            def update(self, loss):
                loss.backward()
                self.optimizer.step()
    ''')
    train = textwrap.dedent('''\
        from trainer import Trainer
        from nets import build_net


        def main(batches, path):
            trainer = Trainer(build_net())
            trainer.load(path)
            for x, y in batches:
                trainer.train_step(x, y)
    ''')
    root = _project(tmp_path, **{"train.py": train, "trainer.py": trainer})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    named = [(f.code, f.start.line) for f in alone.findings]
    assert named == [("AM916", 9)], alone.findings
    assert "`trainer.train_step(...)` runs the training of `Trainer` (trainer.py), which needs" in alone.findings[0].message
    assert "the findings of trainer.py, in a run given both files, name anything else in the way" in alone.findings[0].message
    together = _results([root])["train.py"]  # already in one run: the advice would be void (reader R3)
    driven = [f for f in together.findings if f.code == "AM916"]
    assert driven and "in a run given both files" not in driven[0].message, together.findings
    assert "the findings of trainer.py name anything else in the way" in driven[0].message


@pytest.mark.parametrize("driver, named", [
    ("    for x, y in batches:\n        trainer.update_lr()\n        trainer.train_step(x, y)\n", True),
    ("    trainer.fit(batches)\n", False),
    ("    for epoch in range(3):\n        trainer.fit(batches)\n", False),
])
def test_a_loop_driving_a_class_that_builds_its_own_set_up_is_named(tmp_path, driver, named) -> None:
    """MUNIT's train.py draws the batches and calls `trainer.dis_update(...)` on a class of
    trainer.py that builds its networks and optimizers itself. Such a class creates the
    Accelerator in its own file, so a caller that only enters it once has nothing to do;
    one that runs the loop batch by batch owns the loaders and the loop, and was passed in
    silence (reader R4, 18th session)."""
    trainer = textwrap.dedent('''\
        import torch


        class Trainer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(2, 2)
                self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def train_step(self, x, y):
                self.optimizer.zero_grad()
                torch.nn.functional.mse_loss(self.net(x), y).backward()
                self.optimizer.step()

            def fit(self, batches):
                for x, y in batches:
                    self.train_step(x, y)

            def update_lr(self):
                self.scheduler.step()
    ''')
    train = "from trainer import Trainer\n\n\ndef main(batches):\n    trainer = Trainer()\n" + driver
    root = _project(tmp_path, **{"train.py": train, "trainer.py": trainer})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    driven = [f.message for f in alone.findings if f.code == "AM916"]
    assert bool(driven) is named, alone.findings
    # named by the method that takes the backward, not one that only steps a scheduler
    assert all(m.startswith("`trainer.train_step(...)`") for m in driven), driven
    # the class migrates alone, with its own Accelerator: what is left is the loop's data
    assert all("which creates its own Accelerator" in m and "prepare `batches` (the DataLoader it is" in m for m in driven), driven


def test_a_file_handing_a_training_object_to_another_files_loop_is_never_passed_in_silence(tmp_path) -> None:
    """LightGCN's main.py builds `bpr = utils.BPRLoss(model, config)`, a class whose
    `stage_one` runs the backward and the step, and hands it to `procedure.train_epoch(data,
    model, bpr)`, which calls `bpr.stage_one(...)` per batch. main.py calls no backward and
    no method that trains; alone it said "Nothing to migrate". The call that hands the
    object over is named now (AM916), with the method and the file where its training runs;
    a helper that only reads the object (MUNIT's `write_loss(iterations, trainer, writer)`)
    is not."""
    losses = textwrap.dedent('''\
        import torch


        class PairLoss:
            def __init__(self, model, lr):
                self.model = model
                self.opt = torch.optim.Adam(model.parameters(), lr=lr)

            def stage_one(self, users, items):
                loss = self.model(users, items).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss.item()
    ''')
    procedure = textwrap.dedent('''\
        def train_epoch(batches, model, trainer):
            model.train()
            total = 0.0
            for users, items in batches:
                total += trainer.stage_one(users, items)
            return total
    ''')
    main = textwrap.dedent('''\
        import losses
        import procedure
        from nets import build

        model = build()
        pair = losses.PairLoss(model, 0.01)
        for epoch in range(3):
            print(procedure.train_epoch(range(4), model, pair))
    ''')
    root = _project(tmp_path, **{"main.py": main, "losses.py": losses, "procedure.py": procedure})
    alone = _results([os.path.join(root, "main.py")])["main.py"]
    named = [(f.code, f.start.line) for f in alone.findings]
    assert named == [("AM511", 8), ("AM916", 8)], alone.findings  # and the loop's print, once per process
    assert "`procedure.train_epoch(...)` runs the training of `PairLoss.stage_one` (losses.py)" in alone.findings[1].message
    logger = textwrap.dedent('''\
        def log_losses(step, trainer, writer):
            writer.add_scalar("loss", trainer.last_loss, step)
    ''')
    only_logs = main.replace("print(procedure.train_epoch(range(4), model, pair))", "logger.log_losses(epoch, pair, None)")
    root = _project(tmp_path / "logs", **{"main.py": "import logger\n" + only_logs, "losses.py": losses, "logger.py": logger})
    quiet = _results([os.path.join(root, "main.py")])["main.py"]  # a helper that only reads the object trains nothing
    assert not quiet.findings, quiet.findings


def test_a_base_class_whose_loop_runs_a_subclass_training_is_never_passed_in_silence(tmp_path) -> None:
    """pytorch-template's base/base_trainer.py holds the epoch loop (`self._train_epoch(epoch)`,
    the checkpoints, the early stop); trainer/trainer.py's `Trainer(BaseTrainer)` runs the
    backward in `_train_epoch`. The base file alone (the hook's case) said "Nothing to
    migrate": the call into the subclass's training is named now (AM916)."""
    base = textwrap.dedent('''\
        import torch


        class BaseTrainer:
            def __init__(self, model, epochs):
                self.model, self.epochs = model, epochs

            def train(self):
                for epoch in range(self.epochs):
                    log = self._train_epoch(epoch)
                    torch.save(self.model.state_dict(), f"epoch{epoch}.pt")
    ''')
    trainer = textwrap.dedent('''\
        from base.base_trainer import BaseTrainer


        class Trainer(BaseTrainer):
            def __init__(self, model, optimizer, loader, epochs):
                super().__init__(model, epochs)
                self.optimizer, self.loader = optimizer, loader

            def _train_epoch(self, epoch):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    (self.model(x) - y).pow(2).mean().backward()
                    self.optimizer.step()
                return {}
    ''')
    train = textwrap.dedent('''\
        from trainer import Trainer
    ''')
    root = _project(tmp_path, **{
        "train.py": train, "base/__init__.py": "", "base/base_trainer.py": base,
        "trainer/__init__.py": "from .trainer import *\n", "trainer/trainer.py": trainer,
    })
    here = os.getcwd()
    os.chdir(root)  # the hook runs at the repository's root
    try:
        alone = _results(["base/base_trainer.py"])["base_trainer.py"]
    finally:
        os.chdir(here)
    named = sorted((f.start.line, f.code) for f in alone.findings)
    # the checkpoint every process writes is named too (AM510), which says nothing of the training
    assert named == [(10, "AM916"), (11, "AM510")], alone.findings
    silence = next(f for f in alone.findings if f.code == "AM916")
    assert "`self._train_epoch(...)` runs the training of `Trainer` (trainer/trainer.py)" in silence.message
    assert "nothing here was migrated:" in silence.message


def test_a_helper_taken_by_a_star_import_saves_the_unwrapped_objects(tmp_path) -> None:
    """The SSD tutorial: train.py does `from utils import *` and calls
    `save_checkpoint(epoch, model, optimizer)`, which binds `state = {'model': model,
    'optimizer': optimizer}` and pickles it. The star import was not followed: the helper
    was left alone and pickled the DDP wrapper and the Accelerator's optimizer on every
    process, with no finding. It is threaded now, and the dict holds the unwrapped objects."""
    utils = textwrap.dedent('''\
        import torch

        __all__ = ["save_checkpoint"]


        def save_checkpoint(epoch, model, optimizer):
            state = {"epoch": epoch, "model": model, "optimizer": optimizer}
            torch.save(state, "checkpoint.pth.tar")


        def _private():
            pass
    ''')
    train = textwrap.dedent('''\
        import torch
        from torch.utils.data import DataLoader
        from utils import *

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


        def main():
            model = torch.nn.Linear(2, 1).to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = DataLoader(torch.randn(8, 2), batch_size=2, shuffle=True)
            for epoch in range(2):
                for x in loader:
                    x = x.to(device)
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                save_checkpoint(epoch, model, optimizer)


        main()
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "utils.py": utils})])
    after = results["utils.py"].after
    assert 'state = {"epoch": epoch, "model": accelerator.unwrap_model(model), "optimizer": optimizer.optimizer}' in after
    assert "accelerator.save(state" in after
    assert "save_checkpoint(epoch, model, optimizer, accelerator=accelerator)" in results["train.py"].after


def test_a_trainer_class_handed_the_prepared_model_saves_its_unwrapped_state(tmp_path) -> None:
    """A set-up hands the prepared model to `Solver(loader, model, optimizer)` of another
    file, whose `train()` saves `self.model.state_dict()`. The save was made the
    Accelerator's but kept the wrapper's state dict: `module.`-prefixed keys on 2
    processes, plain ones on 1 (reader R4, eighteenth session)."""
    solver = textwrap.dedent('''\
        import torch


        class Solver:
            def __init__(self, loader, model, optimizer):
                self.loader = loader
                self.model = model
                self.optimizer = optimizer

            def train(self):
                for x in self.loader:
                    loss = self.model(x).sum()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                torch.save(self.model.state_dict(), "model.pt")
    ''')
    train = textwrap.dedent('''\
        import torch
        from torch.utils.data import DataLoader
        from solver import Solver


        def main():
            model = torch.nn.Linear(4, 2)
            optimizer = torch.optim.Adam(model.parameters())
            loader = DataLoader(torch.randn(64, 4), batch_size=8, shuffle=True)
            Solver(loader, model, optimizer).train()


        main()
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "solver.py": solver})])
    after = results["solver.py"].after
    assert "self.accelerator.save(self.accelerator.unwrap_model(self.model).state_dict(), \"model.pt\")" in after, after


def test_a_function_another_file_of_the_run_calls_is_not_given_a_required_accelerator(tmp_path) -> None:
    """SupContrast: main_ce.py's `set_loader(opt)` downloads, so its own migration threads
    the Accelerator in (`set_loader(opt, *, accelerator)`); main_linear.py imports it and
    calls `set_loader(opt)`. Written, main_linear.py failed with a TypeError on every run
    (reader R2, sixteenth session). The file is left as written, AM954 saying why."""
    main_ce = textwrap.dedent('''\
        import torch
        from torchvision import datasets


        def set_loader(root):
            images = datasets.MNIST(root, train=True, download=True)
            return torch.utils.data.DataLoader(images, batch_size=8, shuffle=True)


        def main():
            loader = set_loader("data")
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
    ''')
    main_linear = textwrap.dedent('''\
        from main_ce import set_loader


        def main():
            for batch in set_loader("data"):
                print(len(batch))
    ''')
    root = _project(tmp_path, **{"main_ce.py": main_ce, "main_linear.py": main_linear})
    # in one run with its caller, and alone beside it (the pre-commit hook's case)
    for results in (_results([root]), _results([os.path.join(root, "main_ce.py")])):
        result = results["main_ce.py"]
        assert result.after in (None, main_ce), result.after
        assert any(f.code == "AM954" and "another file of this project calls it" in f.message for f in result.findings)
    solo = tmp_path / "solo"
    solo.mkdir()
    (solo / "main_ce.py").write_text(main_ce)
    assert "def set_loader(root, *, accelerator):" in _results([str(solo)])["main_ce.py"].after  # nobody else calls it


def test_an_engine_left_as_written_leaves_the_set_up_handing_it_the_training_as_written(tmp_path) -> None:
    """The engine skips a step on a NaN loss (`if torch.isnan(loss): continue`): its
    migration is left as written (AM956). Left as written, its function reads no
    Accelerator, and the run took it for one whose migration needs none: train.py was
    prepared for it with no word at all, a half-migration that hangs on N processes the
    first time one process sees a NaN. The set-up is left as written too (AM951 at the
    call), and the engine says why it got no Accelerator (its AM956)."""
    engine = ENGINE.replace(
        "    loss.backward()\n", "    if torch.isnan(loss):\n            continue\n        loss.backward()\n"
    ).replace("        loss = torch.nn.functional.mse_loss(model(x), y)\n    if", "        loss = torch.nn.functional.mse_loss(model(x), y)\n        if")
    assert "continue\n        loss.backward()" in engine, engine
    root = _project(tmp_path, **{"train.py": TRAIN, "engine.py": engine})
    for results in (_results([root]), _results([root], jobs=2)):
        assert results["engine.py"].after in (None, engine)
        assert any(f.code == "AM956" for f in results["engine.py"].findings), results["engine.py"].findings
        train = results["train.py"]
        assert train.after in (None, TRAIN), train.after
        told = [f for f in train.findings if f.code == "AM951" and "`engine.train_one_epoch` trains what this file" in f.message]
        assert told and told[0].start.line == 14, [(f.code, f.start.line, f.message[:100]) for f in train.findings]


def test_a_batch_unpacked_in_the_loop_body_is_placed_by_the_prepared_loader(tmp_path) -> None:
    """WZMIAOMIAO's ConvNeXt: `for step, data in enumerate(data_loader): images, labels =
    data`, then `model(images.to(device))`. The names unpacked in the body come from the
    batch: the moves go, and the engine takes the Accelerator (the verifier had taken
    them for names prepare() does not place, AM953, and left the engine as written)."""
    engine = textwrap.dedent('''\
        import sys
        import torch
        from tqdm import tqdm


        def train_one_epoch(model, optimizer, data_loader, device):
            model.train()
            data_loader = tqdm(data_loader, file=sys.stdout)
            for step, data in enumerate(data_loader):
                images, labels = data
                loss = torch.nn.functional.mse_loss(model(images.to(device)), labels.to(device))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()


        def show(data_loader):
            for images, labels in data_loader:
                return images[0].numpy()
    ''')
    train = textwrap.dedent('''\
        import torch
        from engine import train_one_epoch


        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            train_loader = torch.utils.data.DataLoader(data, batch_size=8)
            model = torch.nn.Linear(4, 1).to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(2):
                train_one_epoch(model=model, optimizer=optimizer, data_loader=train_loader, device=device)


        if __name__ == "__main__":
            main()
    ''')
    root = _project(tmp_path, **{"train.py": train, "engine.py": engine})
    results = _results([root])
    after = results["engine.py"].after
    assert "def train_one_epoch(model, optimizer, data_loader, device, *, accelerator):" in after, results["engine.py"].findings
    assert "model(images), labels)" in after and "accelerator.backward(loss)" in after
    # `show` is no function the set-up reaches; its `.cpu()` before `.numpy()` is right on any device
    assert "images[0].cpu().numpy()" in after
    assert "device=device, accelerator=accelerator)" in results["train.py"].after


def test_a_run_given_a_package_follows_imports_that_name_the_package(tmp_path) -> None:
    """pytorch-3dunet: `accel-migrate pytorch3dunet/` where train.py imports
    `from pytorch3dunet.unet3d.trainer import create_trainer`. The run's files all lie in
    the package, so imports start from the folder that holds it, as Python's would; the
    run took the package's folder for the root and linked nothing."""
    train = TRAIN.replace("import engine\n", "from pkg import engine\n")
    root = _project(tmp_path, **{"pkg/__init__.py": "", "pkg/train.py": train, "pkg/engine.py": ENGINE})
    results = _results([os.path.join(root, "pkg")])
    assert "def train_one_epoch(loader, model, optimizer, device, *, accelerator):" in results["engine.py"].after
    assert "engine.train_one_epoch(train_loader, model, optimizer, device, accelerator=accelerator)" in results["train.py"].after


def test_a_batch_iterator_of_the_project_handed_to_a_training_function_is_not_prepared(tmp_path) -> None:
    """Chinese-Text-Classification: run.py hands `build_iterator(...)`, an instance of the
    project's own `DatasetIterater` (no DataLoader), to `train(config, model, train_iter)`
    of train_eval.py, whose loop over it trains. Read as a loader, it was passed to
    prepare(), which raises on it at start, on one process too (reader R2). The callers
    say what it is, also when they import it in a branch; AM218 says nothing splits it."""
    utils = textwrap.dedent('''\
        import torch


        class BatchIterator:
            def __init__(self, data, batch_size):
                self.data, self.batch_size, self.index = data, batch_size, 0

            def __iter__(self):
                return self

            def __next__(self):
                if self.index * self.batch_size >= len(self.data):
                    self.index = 0
                    raise StopIteration
                self.index += 1
                return self.data[(self.index - 1) * self.batch_size:self.index * self.batch_size]


        def build_iterator(data, batch_size):
            it = BatchIterator(data, batch_size)
            return it
    ''')
    engine = textwrap.dedent('''\
        import torch


        def train(model, train_iter, epochs):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(epochs):
                for batch in train_iter:
                    optimizer.zero_grad()
                    model(batch).pow(2).mean().backward()
                    optimizer.step()
    ''')
    run = textwrap.dedent('''\
        import sys
        import torch
        from engine import train

        if __name__ == "__main__":
            if sys.argv[1:] == ["fast"]:
                from fast_utils import build_iterator
            else:
                from utils import build_iterator
            train_iter = build_iterator(torch.randn(32, 4), 8)
            train(torch.nn.Linear(4, 1), train_iter, 2)
    ''')
    root = _project(tmp_path, **{"run.py": run, "engine.py": engine, "utils.py": utils})
    result = _results([root])["engine.py"]
    assert "model, optimizer = accelerator.prepare(model, optimizer)" in result.after, result.after
    assert "train_iter" not in result.after.split("accelerator.prepare(")[1].split("\n")[0]
    assert any(f.code == "AM218" for f in result.findings), result.findings


def test_a_model_handed_to_code_reading_its_module_is_not_prepared(tmp_path) -> None:
    """Conv-TasNet: train.py wraps the model in DataParallel and hands it to `Solver`, which
    saves `self.model.module.state_dict()`. Migrated together, the solver kept `.module`
    (its migration cannot see the wrap of another file) while train.py prepared a plain
    model: AttributeError on one process. Alone beside it (the hook's case), the same. Both
    are left as written; AM952 at the call says why."""
    solver = textwrap.dedent('''\
        import torch


        class Solver:
            def __init__(self, loader, model, optimizer):
                self.loader = loader
                self.model = model
                self.optimizer = optimizer

            def train(self):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    torch.nn.functional.mse_loss(self.model(x), y).backward()
                    self.optimizer.step()
                torch.save(self.model.module.state_dict(), "final.pth")
    ''')
    train = textwrap.dedent('''\
        import torch
        from solver import Solver


        def main():
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
            model = torch.nn.DataParallel(torch.nn.Linear(4, 1))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            Solver(loader, model, optimizer).train()
    ''')
    root = _project(tmp_path, **{"train.py": train, "solver.py": solver})
    for results in (_results([root]), _results([os.path.join(root, "train.py")])):
        assert results["train.py"].after in (None, train)
        told = [f for f in results["train.py"].findings if f.code == "AM952" and "reads `.module` of the model" in f.message]
        assert told and told[0].start.line == 10, results["train.py"].findings
    assert _results([root])["solver.py"].after in (None, solver)


def test_a_scheduler_sized_from_the_loader_and_stepped_elsewhere_gets_one_advice(tmp_path) -> None:
    """lonePatient's run_bert.py: a scheduler sized from len(train_loader), stepped by a
    trainer of another file. AM201 keeps it out, to be built after prepare() from the
    per-process length; AM206's "pass it to prepare()" contradicted that (reader R3)."""
    train = TRAIN.replace(
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=len(train_loader) * 2)\n",
    ).replace("engine.train_one_epoch(train_loader, model, optimizer, device)", "engine.train_one_epoch(train_loader, model, optimizer, device, scheduler)")
    assert "len(train_loader)" in train and "device, scheduler)" in train
    root = _project(tmp_path, **{"train.py": train})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    codes = [f.code for f in alone.findings]
    assert "AM206" not in codes, alone.findings
    assert any(
        "`scheduler` stays out of it (sized from len(dataloader) and stepped outside this file: if it steps per batch" in f.message
        for f in alone.findings if f.code == "AM201"
    )


SHARDING_DATA = textwrap.dedent('''\
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler


    def _loaders(distributed):
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        if distributed:
            sampler = DistributedSampler(data, num_replicas=2, rank=0)
        else:
            sampler = RandomSampler(data)
        return DataLoader(data, batch_size=8, sampler=sampler)


    def build(distributed=True):
        return _loaders(distributed)
''')


BATCH_SHARDING_DATA = textwrap.dedent('''\
    import torch
    from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler


    class Repeating:
        def __init__(self, batches, steps):
            self.batches, self.steps = batches, steps


    def build(distributed=True, steps=None):
        loaders = []
        for data in [torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))]:
            if distributed:
                sampler = DistributedSampler(data, num_replicas=2, rank=0)
            else:
                sampler = RandomSampler(data)
            batches = BatchSampler(sampler=sampler, batch_size=8, drop_last=False)
            if steps is not None:
                batches = Repeating(batches, steps)
            loaders.append(DataLoader(data, batch_sampler=batches))
        return loaders[0]
''')


@pytest.mark.parametrize("data, sampler, sharded", [
    (SHARDING_DATA, "DistributedSampler(data)", True),
    (SHARDING_DATA, "RandomSampler(data)", False),
    (BATCH_SHARDING_DATA, "DistributedSampler(data)", True),
    (BATCH_SHARDING_DATA, "RandomSampler(data)", False),
], ids=["sampler", "sampler-not-distributed", "batch-sampler", "batch-sampler-not-distributed"])
def test_loaders_another_file_shards_by_hand_are_not_prepared_again(tmp_path, data, sampler, sharded) -> None:
    """Swin-Transformer's main.py prepared the loaders `build_loader(config)` hands back,
    built in data/build.py with a DistributedSampler (through a wrapper of data/__init__.py):
    sharded twice, each process read 1/N² of the data, with no finding (reader R1).
    lufficc/SSD's make_data_loader hands the sampler to a BatchSampler (wrapped again in an
    iteration-based one) given as `batch_sampler=`: the same (reader R4). Such a loader
    stays out of prepare() (its sampler gives each process its share), and AM201 says
    why; the model and optimizer are prepared as usual."""
    data = data.replace("DistributedSampler(data, num_replicas=2, rank=0)", sampler)
    train = textwrap.dedent('''\
        import torch
        from data import build


        def main():
            loader = build()
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "data.py": data})
    result = _results([root])["train.py"]
    assert not any(f.code in ("AM212", "AM955") for f in result.findings), result.findings
    prepare = "model, optimizer = accelerator.prepare(model, optimizer)" if sharded else (
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)"
    )
    assert prepare in result.after, result.after
    kept_out = [f.message for f in result.findings if f.code == "AM201" and "stays out of it" in f.message]
    assert bool(kept_out) is sharded, result.findings
    if sharded:
        assert "built by `build(...)` with a DistributedSampler already" in kept_out[0]


_SEGMENTER = textwrap.dedent('''\
    import torch


    class SEGMENTER:
        def initialize(self, opts):
            self.net = torch.nn.Linear(4, 2)
            self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

        def set_input(self, x):
            self.x = x

        def optimize_parameters(self):
            self.optimizer.zero_grad()
            self.net(self.x).sum().backward()
            self.optimizer.step()
''')
_FACTORY = textwrap.dedent('''\
    def get_model(opts):
        if opts == "seg":
            from .segmenter import Segmenter
            model = Segmenter()
        else:
            from .classifier import Classifier
            model = Classifier()
        model.initialize(opts)
        return model
''')
_DRIVER = textwrap.dedent('''\
    import torch
    from models import get_model


    def train(kind):
        model = get_model(kind)
        loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
        valid_loader = torch.utils.data.DataLoader(torch.randn(4, 4), batch_size=2)
        for x in loader:
            model.set_input(x)
            model.optimize_parameters()
        for x in valid_loader:
            model.set_input(x)


    if __name__ == "__main__":
        train("seg")
''')


def test_a_loop_driving_what_a_factory_returns_is_named(tmp_path) -> None:
    """Attention-Gated-Networks: `model = get_model(opts)` (models/__init__.py importing the
    class it builds inside the function), then `model.optimize_parameters()` batch by batch.
    The script calls no backward itself and passed with no finding (reader R4, nineteenth
    session); the factory is named when more than one of its classes trains that way."""
    root = _project(
        tmp_path, **{
            "train.py": _DRIVER, "models/__init__.py": _FACTORY,
            "models/segmenter.py": _SEGMENTER.replace("SEGMENTER", "Segmenter"),
            "models/classifier.py": _SEGMENTER.replace("SEGMENTER", "Classifier"),
        },
    )
    named = [f for f in _results([root])["train.py"].findings if f.code == "AM916"]
    assert len(named) == 1 and "the model `get_model()` returns (models/__init__.py)" in named[0].message, named
    assert "the loop here draws its batches from `loader`: prepare it with them (`valid_loader`: as written" in named[0].message
    # one class of the factory trains: it is the one named
    (tmp_path / "models" / "classifier.py").write_text("class Classifier:\n    def initialize(self, opts):\n        pass\n")
    named = [f for f in _results([root])["train.py"].findings if f.code == "AM916"]
    assert len(named) == 1 and "`Segmenter` (models/segmenter.py)" in named[0].message, named


def test_code_other_files_call_reports_what_runs_on_every_process(tmp_path) -> None:
    """pix2pixHD's `create_model()` wraps the model it returns in DataParallel; the
    Pytorch-Project-Template's `process_config()` (no torch in its file) adds a log-file
    handler. Their files get no Accelerator, but train.py calls them on every process: the
    wrap and the handler are named there, left as written (reader R4, nineteenth session);
    a function nothing of the run calls is not."""
    factory = textwrap.dedent('''\
        import torch


        def create_model(gpus):
            model = torch.nn.Linear(4, 1)
            if gpus:
                model = torch.nn.DataParallel(model, device_ids=gpus)
            return model


        def unused(gpus):
            return torch.nn.DataParallel(torch.nn.Linear(4, 1), device_ids=gpus)
    ''')
    settings = textwrap.dedent('''\
        import logging


        def process_config(folder):
            logging.getLogger().addHandler(logging.FileHandler(folder + "/run.log"))
            return {"lr": 0.1}
    ''')
    train = textwrap.dedent('''\
        import torch
        from models import create_model
        from settings import process_config


        def main():
            config = process_config("out")
            model = create_model([0, 1])
            optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
            for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2):
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
    ''')
    root = _project(tmp_path, **{"train.py": train, "models.py": factory, "settings.py": settings})
    results = _results([root])
    wraps = [f for f in results["models.py"].findings if f.code == "AM210"]
    assert [f.start.line for f in wraps] == [7] and "other files of the run call this code" in wraps[0].message
    assert results["models.py"].after == factory
    handlers = [f for f in results["settings.py"].findings if f.code == "AM519"]
    assert [f.start.line for f in handlers] == [5], results["settings.py"].findings
    # the path comes from the caller (`folder`): one per process would be the caller's choice
    assert "`folder + \"/run.log\"` where the callers hand every process the same path" in handlers[0].message, handlers


def test_a_base_of_a_base_of_the_trainer_is_code_the_run_calls(tmp_path) -> None:
    """st-gcn: REC_Processor (recognition.py) trains, built on Processor (processor.py),
    built on IO (io.py), whose `gpu()` wraps the model in DataParallel. Given io.py alone
    (the pre-commit hook's case), the wrap is named: the files around it are read."""
    io = textwrap.dedent('''\
        import torch.nn as nn


        class IO:
            def __init__(self):
                self.load_model()
                self.gpu()

            def gpu(self):
                self.model = nn.DataParallel(self.model)
    ''')
    processor = "from .io import IO\n\n\nclass Processor(IO):\n    def start(self):\n        self.train()\n"
    recognition = textwrap.dedent('''\
        import torch

        from .processor import Processor


        class Recognition(Processor):
            def load_model(self):
                self.model = torch.nn.Linear(4, 1)
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def train(self):
                for x in torch.randn(8, 2, 4):
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()
    ''')
    main = "from processor.recognition import Recognition\n\nRecognition().start()\n"
    root = _project(
        tmp_path, **{"main.py": main, "processor/__init__.py": "", "processor/io.py": io,
                     "processor/processor.py": processor, "processor/recognition.py": recognition},
    )
    alone = _cli(root, "processor/io.py", "--lint")
    assert "processor/io.py:10:22: AM210" in alone.stdout, alone.stdout + alone.stderr


def test_a_script_that_runs_a_backward_itself_is_part_of_the_launched_program(tmp_path) -> None:
    """pix2pixHD's train.py takes its optimizers from the model (`model.module.optimizer_G`)
    and builds none itself: it still runs under the launcher, so models.py's
    `create_model()`, which it calls, is code the run calls, also when models.py is given
    alone (before, only a file building an optimizer counted)."""
    models = textwrap.dedent('''\
        import torch


        def create_model(gpus):
            model = torch.nn.Linear(4, 1)
            if gpus:
                model = torch.nn.DataParallel(model, device_ids=gpus)
            return model
    ''')
    helpers = "import torch\n\n\ndef make_optimizer(model):\n    return torch.optim.SGD(model.parameters(), lr=0.1)\n"
    train = textwrap.dedent('''\
        import torch
        from helpers import make_optimizer
        from models import create_model

        model = create_model([0, 1])
        optimizer = make_optimizer(model)
        for x in torch.randn(8, 2, 4):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "models.py": models, "helpers.py": helpers})
    alone = _cli(root, "models.py", "--lint")
    assert "models.py:7:17: AM210" in alone.stdout, alone.stdout + alone.stderr


def test_a_method_that_only_writes_is_put_on_the_main_process(tmp_path) -> None:
    """pix2pixHD's `visualizer.print_current_errors(...)` (util/visualizer.py) appends to
    the run's log file and does nothing else: called on every process, N processes append
    each line (reader R4, nineteenth session). A method that also keeps state is not."""
    visual = textwrap.dedent('''\
        class Visualizer:
            def __init__(self, name):
                self.log_name = name + ".log"
                self.seen = 0

            def print_errors(self, epoch, errors):
                message = "(epoch: %d) " % epoch
                for k, v in errors.items():
                    message += "%s: %.3f " % (k, v)
                with open(self.log_name, "a") as log_file:
                    log_file.write(message + "\\n")

            def count(self, errors):
                self.seen += 1
                with open(self.log_name, "a") as log_file:
                    log_file.write(str(self.seen))
    ''')
    train = textwrap.dedent('''\
        import torch
        from visual import Visualizer

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
        visualizer = Visualizer("run")
        for epoch in range(2):
            for x in loader:
                optimizer.zero_grad()
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
            visualizer.print_errors(epoch, {"loss": loss.item()})
            visualizer.count({"loss": loss.item()})
    ''')
    root = _project(tmp_path, **{"train.py": train, "visual.py": visual})
    result = _results([root])["train.py"]
    assert "    if accelerator.is_main_process:\n        visualizer.print_errors(epoch" in result.after, result.after
    assert "\n    visualizer.count(" in result.after and "visualizer.count" not in str([f.message for f in result.findings])


def test_a_base_trainer_building_an_optimizer_keeps_its_line_findings_and_the_whole_set_up_one(tmp_path) -> None:
    """yassouali's BaseTrainer wraps the model, picks "cuda:0" and builds the optimizer
    through a factory; the subclass in trainer.py trains. Its wrap and its device are named
    line by line, and the set-up it cannot read whole is still named (AM916): a finding on
    code other files call does not silence that net (reader R2, twentieth session)."""
    base = textwrap.dedent('''\
        import torch


        class BaseTrainer:
            def __init__(self, model):
                self.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
                self.model = torch.nn.DataParallel(model)
                self.optimizer = getattr(torch.optim, "SGD")(self.model.parameters(), lr=0.1)
    ''')
    trainer = textwrap.dedent('''\
        import torch

        from base import BaseTrainer


        class Trainer(BaseTrainer):
            def train(self, loader):
                for x in loader:
                    self.optimizer.zero_grad()
                    self.model(x.to(self.device)).sum().backward()
                    self.optimizer.step()
    ''')
    main = "import torch\nfrom trainer import Trainer\n\nTrainer(torch.nn.Linear(4, 1)).train(torch.randn(8, 2, 4))\n"
    root = _project(tmp_path, **{"main.py": main, "trainer.py": trainer, "base.py": base})
    found = sorted((f.code, f.start.line) for f in _results([root])["base.py"].findings)
    assert found == [("AM102", 6), ("AM210", 7), ("AM916", 7)], found


def test_a_folder_made_by_a_helper_the_run_only_reads_is_named_at_the_call(tmp_path) -> None:
    """Pytorch-Project-Template's `create_dirs([...])` (utils/dirs.py: `os.makedirs(d)`
    under `if not os.path.exists(d)`) and pix2pixHD's `util.mkdirs(...)` through `mkdir`:
    every process may find the folder missing, and one that creates it after another stops
    with FileExistsError. The helper's file is not written by this run, so the call is
    named; a helper that passes `exist_ok=True` or lets the error pass is not. Given the
    helper too, AM518 fixes it there and the call is not named again."""
    util = textwrap.dedent('''\
        import os


        def mkdir(path):
            if not os.path.exists(path):
                os.makedirs(path)


        def mkdirs(paths):
            for path in paths:
                mkdir(path)


        def safe(path):
            os.makedirs(path, exist_ok=True)


        def tolerant(path):
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
    ''')
    train = textwrap.dedent('''\
        import torch
        from utils import util

        util.mkdirs(["out", "logs"])
        util.safe("cache")
        util.tolerant("runs")
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in torch.randn(8, 2, 4):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "utils/__init__.py": "", "utils/util.py": util})
    alone = _cli(root, "train.py", "--lint")
    named = [line for line in alone.stdout.splitlines() if "AM518" in line]
    assert len(named) == 1 and named[0].startswith("train.py:4:1: AM518 `util.mkdirs()`"), alone.stdout + alone.stderr
    assert "`os.makedirs(path)` (utils/util.py:6)" in named[0]
    both = _cli(root, "train.py", "utils/util.py", "--lint")
    assert [line.split(" ")[0] for line in both.stdout.splitlines() if "AM518" in line] == ["utils/util.py:6:9:"], both.stdout


def test_a_folder_a_helper_clears_and_makes_again_asks_for_the_main_process(tmp_path) -> None:
    """stargan-v2's `calculate_metrics` (metrics/eval.py: `shutil.rmtree(path_fake,
    ignore_errors=True)` then `os.makedirs(path_fake)`): `exist_ok=True` would let one
    process delete the folder another has just filled, so the call is told to run on the
    main process, then wait; a helper that only makes the folder still gets `exist_ok`."""
    metrics = textwrap.dedent('''\
        import os
        import shutil


        def fresh(path):
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path)


        def plain(path):
            os.makedirs(path)
    ''')
    train = textwrap.dedent('''\
        import torch
        from metrics import fresh, plain

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in torch.randn(8, 2, 4):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        fresh("samples")
        plain("logs")
    ''')
    root = _project(tmp_path, **{"train.py": train, "metrics.py": metrics})
    out = _cli(root, "train.py", "--lint")
    named = {line.split(":")[1]: line for line in out.stdout.splitlines() if "AM518" in line}
    assert set(named) == {"10", "11"}, out.stdout + out.stderr
    assert "follows a `shutil.rmtree` of the same folder" in named["10"] and "is_main_process" in named["10"]
    assert "wait_for_everyone()" in named["10"] and "pass it there" not in named["10"]
    assert "pass it there" in named["11"] and "shutil.rmtree" not in named["11"]


def test_a_helper_the_run_only_reads_that_writes_among_other_work_is_named_at_the_call(tmp_path) -> None:
    """stargan-v2's `utils.debug_image(nets, args, inputs, step)` runs the networks and
    saves sample grids through the file's own `save_image`: on every process, N processes
    write the same pictures. It does more than write, so the call is named, left as
    written; a helper that trains, returns what it computed or writes on one process only
    is not, nor one that only writes (AM517 gates that one itself). Given the helper's
    file too, AM517 names the write there instead."""
    samples = textwrap.dedent('''\
        import torch
        import torchvision.utils as vutils


        def save_grid(x, path):
            vutils.save_image(x.cpu(), path)


        @torch.no_grad()
        def debug(model, x, step):
            out = model(x)
            grid = torch.cat([x, out])
            save_grid(grid, f"sample_{step}.png")


        def debug_and_step(model, x, optimizer):
            model(x).sum().backward()
            optimizer.step()
            save_grid(x, "stepped.png")


        def debug_and_return(model, x):
            out = model(x)
            save_grid(out, "returned.png")
            return out


        def debug_on_one(model, x, rank):
            out = model(x)
            if rank == 0:
                save_grid(out, "one.png")


        def debug_drawn(points, step):
            for point in points:
                point[0] = point[0] + 1
            save_grid(points, f"drawn_{step}.png")
    ''')
    train = textwrap.dedent('''\
        import torch
        import samples

        model = torch.nn.Linear(4, 4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step, x in enumerate(torch.randn(8, 2, 4)):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
            samples.debug(model, x, step)
            samples.debug_and_step(model, x, optimizer)
            samples.debug_and_return(model, x)
            samples.debug_on_one(model, x, 0)
            samples.debug_drawn(x, step)
    ''')
    root = _project(tmp_path, **{"train.py": train, "samples.py": samples})
    alone = _cli(root, "train.py", "--lint")
    named = [line for line in alone.stdout.splitlines() if "AM517" in line and "among other work" in line]
    assert [line.split(" ")[0] for line in named] == ["train.py:10:5:", "train.py:14:5:"], alone.stdout + alone.stderr
    assert "`vutils.save_image(...)` (samples.py:6)" in named[0] and "unwrap_model" in named[0]
    # it also shifts the points it is handed: on the main process alone, the others would not
    assert "changes in place" not in named[0] and "unless the other processes need" not in named[0]
    assert "and changes in place an array it is handed (samples.py:36)" in named[1], named[1]
    assert "unless the other processes need what it changes" in named[1]
    both = _cli(root, "train.py", "samples.py", "--lint")
    assert not [line for line in both.stdout.splitlines() if "among other work" in line], both.stdout
    assert "samples.py:6:5: AM517" in both.stdout, both.stdout


def test_an_object_keeping_a_log_file_open_is_named_where_every_process_builds_it(tmp_path) -> None:
    """open-reid's `sys.stdout = Logger(path)` (reid/utils/logging.py: `self.file =
    open(fpath, 'w')` in `__init__`): every process truncates the one log and writes into
    it. The class's file cannot tell the processes apart, so the call is named, left as
    written; a path made from the rank, a call that passes no path, and a call on the
    main process only are not."""
    logging_py = textwrap.dedent('''\
        import sys


        class Logger:
            def __init__(self, fpath=None):
                self.console = sys.stdout
                self.file = None
                if fpath is not None:
                    self.file = open(fpath, "w")

            def write(self, msg):
                self.console.write(msg)
                if self.file is not None:
                    self.file.write(msg)

            def flush(self):
                self.console.flush()


        class Reader:
            def __init__(self, fpath):
                self.file = open(fpath)
    ''')
    train = textwrap.dedent('''\
        import os
        import sys

        import torch
        from utils.logging import Logger, Reader
        from runtime import Accelerator

        accelerator = Accelerator()
        sys.stdout = Logger(os.path.join("logs", "log.txt"))
        console = Logger()
        mine = Logger(f"log{accelerator.process_index}.txt")
        if accelerator.is_main_process:
            sys.stderr = Logger("err.txt")
        data = Reader("data.txt")
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer = accelerator.prepare(model, optimizer)
        for x in torch.randn(8, 2, 4).to(accelerator.device):
            optimizer.zero_grad()
            accelerator.backward(model(x).sum())
            optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "utils/__init__.py": "", "utils/logging.py": logging_py})
    results = _results([root])
    told = [(f.start.line, f.message) for f in results["train.py"].findings if f.code == "AM517"]
    assert [line for line, _ in told] == [9], told
    assert "`Logger()` writes `os.path.join(\"logs\", \"log.txt\")` on every process" in told[0][1]
    assert "(utils/logging.py:9)" in told[0][1] and "left as written" in told[0][1]
    assert results["train.py"].after == train


@pytest.mark.parametrize("second", ["evals.summarize([3.0])", "evals.summarize([3.0], save_path=\"curves\")"])
def test_a_write_under_an_optional_parameter_no_call_passes_is_not_named(tmp_path, second) -> None:
    """pytorch-retinanet's `csv_eval.evaluate(..., save_path=None)` saves its curves under
    `if save_path != None:`, and no call of the run passes a `save_path`: the block never
    runs, so its write is not named (the one outside it is). Once a call passes it, it is."""
    evals = textwrap.dedent('''\
        import json


        def summarize(scores, save_path=None):
            with open("scores.json", "w") as f:
                json.dump(scores, f)
            if save_path != None:
                with open(save_path + "/curve.json", "w") as f:
                    json.dump(sorted(scores), f)
            return sum(scores) / len(scores)
    ''')
    train = textwrap.dedent(f'''\
        import torch
        import evals

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.randn(8, 2, 4)
        for x in data:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        mean = evals.summarize([1.0, 2.0])
        {second}
    ''')
    root = _project(tmp_path, **{"train.py": train, "evals.py": evals})
    lines = [f.start.line for f in _results([root])["evals.py"].findings if f.code == "AM517"]
    assert lines == ([5] if "save_path" not in second else [5, 8]), lines


def test_a_helper_of_another_file_that_freezes_layers_each_epoch_leaves_the_set_up_as_written(tmp_path) -> None:
    """deep-person-reid's engine calls torchtools' `open_specified_layers(model, ...)` and
    `open_all_layers(model)` at the start of each epoch: a part frozen after the wrap stops
    DDP at the next step. The call is named (AM230) and the set-up is not migrated (AM960);
    a freeze before training is not named, nor is opening the whole model (DDP handles a
    whole model frozen or opened, a GAN's discriminator during the generator's step)."""
    tools = textwrap.dedent('''\
        def open_all_layers(model):
            for p in model.parameters():
                p.requires_grad = True


        def open_specified_layers(model, names):
            for name, module in model.named_children():
                for p in module.parameters():
                    p.requires_grad = name in names
    ''')
    train = textwrap.dedent('''\
        import torch
        import tools

        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
        tools.open_specified_layers(model, ["1"])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.randn(16, 4), batch_size=4)
        for epoch in range(4):
            if epoch < 2:
                tools.open_specified_layers(model, ["1"])
            else:
                tools.open_all_layers(model)
            for x in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "tools.py": tools})
    result = _results([root])["train.py"]
    assert sorted((f.code, f.start.line) for f in result.findings if f.code in ("AM230", "AM960")) == [
        ("AM230", 10), ("AM960", 10),
    ], result.findings
    assert result.after == train


def test_a_file_read_back_in_the_same_helper_is_said_to_need_a_barrier(tmp_path) -> None:
    """pytorch-retinanet's coco_eval writes its results and `loadRes`es them at once: a
    file each process reads back needs a barrier (or a file of its own). The same path text
    read in another helper (Bert-Multi-Label's tools.py) is no read-back."""
    helpers = textwrap.dedent('''\
        import json


        def dump_and_score(results, path):
            json.dump(results, open(path, "w"))
            return len(json.load(open(path)))


        def dump(results, path):
            json.dump(results, open(path, "w"))
            return len(results)


        def score(path):
            return len(json.load(open(path)))
    ''')
    train = textwrap.dedent('''\
        import torch
        import helpers

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in torch.randn(8, 2, 4):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        n = helpers.dump_and_score([1], "a.json") + helpers.dump([2], "b.json")
    ''')
    root = _project(tmp_path, **{"train.py": train, "helpers.py": helpers})
    told = {f.start.line: f.message for f in _results([root])["helpers.py"].findings if f.code == "AM517"}
    assert sorted(told) == [5, 10], told
    assert "reads it back" in told[5] and "reads it back" not in told[10]


def test_a_save_in_code_the_run_calls_on_every_process_is_named(tmp_path) -> None:
    """pix2pixHD's `BaseModel.save_network` (models/base_model.py) torch.saves each network;
    train.py calls `model.save(...)` on every process, so N processes write one file at
    once. base_model.py gets no Accelerator: the save is named, left as written. A save
    the file guards by rank, or in a method nothing calls, is not."""
    base = textwrap.dedent('''\
        import os

        import torch


        class BaseModel:
            def save_network(self, network, label):
                torch.save(network.state_dict(), label + ".pth")

            def save_on_one(self, network, label):
                if int(os.environ.get("RANK", 0)) == 0:
                    torch.save(network.state_dict(), label + ".pth")
    ''')
    model = textwrap.dedent('''\
        import torch

        from base_model import BaseModel


        class Model(BaseModel):
            def __init__(self):
                self.net = torch.nn.Linear(4, 1)

            def save(self, label):
                self.save_network(self.net, label)
                self.save_on_one(self.net, label)
    ''')
    train = textwrap.dedent('''\
        import torch
        from model import Model

        model = Model()
        optimizer = torch.optim.SGD(model.net.parameters(), lr=0.1)
        for x in torch.randn(8, 2, 4):
            optimizer.zero_grad()
            model.net(x).sum().backward()
            optimizer.step()
        model.save("latest")
    ''')
    root = _project(tmp_path, **{"train.py": train, "model.py": model, "base_model.py": base})
    results = _results([root])
    saves = [f for f in results["base_model.py"].findings if f.code == "AM510"]
    assert [f.start.line for f in saves] == [8], results["base_model.py"].findings
    assert "other files of the run call this code" in saves[0].message and not results["base_model.py"].changed


def test_the_index_follows_a_callback_handed_to_a_trainer_class_to_its_methods(tmp_path) -> None:
    """Bert-Multi-Label's run_bert.py builds `model_checkpoint = ModelCheckpoint(...)` and
    hands it to `Trainer(..., model_checkpoint=model_checkpoint)`, whose `__init__` keeps it
    as `self.model_checkpoint`; each epoch calls `self.model_checkpoint.epoch_step(state)`,
    which torch.saves on every process (AM510 names it in the callback's file, as code
    other files run). An attribute one caller binds to a checkpoint and another to
    something else is not followed: which class it runs is not known."""
    callbacks = textwrap.dedent('''\
        import torch


        class ModelCheckpoint:
            def __init__(self, path):
                self.path = path

            def epoch_step(self, state):
                torch.save(state, self.path)


        class Monitor:
            def __init__(self, path):
                self.path = path

            def epoch_step(self, state):
                torch.save(state, self.path)
    ''')
    trainer = textwrap.dedent('''\
        class Trainer:
            def __init__(self, model, optimizer, model_checkpoint=None, monitor=None):
                self.model = model
                self.optimizer = optimizer
                self.model_checkpoint = model_checkpoint
                self.monitor = monitor

            def train(self, data):
                for epoch in range(2):
                    for x in data:
                        self.optimizer.zero_grad()
                        self.model(x).sum().backward()
                        self.optimizer.step()
                    self.model_checkpoint.epoch_step({"epoch": epoch})
                    self.monitor.epoch_step({"epoch": epoch})
    ''')
    main = textwrap.dedent('''\
        import torch

        from callbacks import ModelCheckpoint, Monitor
        from trainer import Trainer


        def run(data):
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model_checkpoint = ModelCheckpoint("best.pt")
            monitor = Monitor("monitor.pt")
            Trainer(model, optimizer, model_checkpoint=model_checkpoint, monitor=monitor).train(data)


        def other(data):
            model = torch.nn.Linear(4, 1)
            checkpoint = ModelCheckpoint("last.pt")
            Trainer(model, None, checkpoint, checkpoint).train(data)


        run(torch.randn(8, 2, 4))
        other(torch.randn(8, 2, 4))
    ''')
    root = _project(tmp_path, **{"main.py": main, "trainer.py": trainer, "callbacks.py": callbacks})
    paths = {name: os.path.join(root, name) for name in ("main.py", "trainer.py", "callbacks.py")}
    sources = {p: open(p, "rb").read() for p in paths.values()}
    called = project.called_elsewhere(sources, project.index(sources))[paths["callbacks.py"]]
    assert "ModelCheckpoint.epoch_step" in called and "Monitor.epoch_step" not in called, called


def test_a_checkpoint_method_of_a_model_object_is_named_where_the_script_calls_it(tmp_path) -> None:
    """pix2pixHD's train.py calls `model.module.save('latest')` on what `create_model(opt)`
    returns: Pix2PixHDModel.save hands each network to BaseModel.save_network, which
    torch.saves it. Every process runs the script, so N processes write each file: the call
    is named in train.py, left as written. A method that saves under a test of the rank,
    that saves nothing, or that also trains (`fit`: the caller cannot run it on one
    process) is not named."""
    base = textwrap.dedent('''\
        import os

        import torch


        class BaseModel:
            def save_network(self, network, label):
                torch.save(network.cpu().state_dict(), label + ".pth")

            def save_on_one(self, network, label):
                if int(os.environ.get("RANK", 0)) == 0:
                    torch.save(network.state_dict(), label + ".pth")
    ''')
    model = textwrap.dedent('''\
        import torch

        from base_model import BaseModel


        class Model(BaseModel):
            def __init__(self):
                self.net = torch.nn.Linear(4, 1)
                self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def optimize(self, x):
                self.optimizer.zero_grad()
                self.net(x).sum().backward()
                self.optimizer.step()

            def save(self, label):
                self.save_network(self.net, label)

            def save_best(self, label):
                self.save_on_one(self.net, label)

            def fit(self, x):
                self.optimize(x)
                self.save("fit")

            def name(self):
                return "model"


        def create_model(gpus):
            model = Model()
            if gpus:
                model = torch.nn.DataParallel(model, device_ids=gpus)
            return model
    ''')
    train = textwrap.dedent('''\
        import torch
        from model import create_model

        model = create_model([])
        for x in torch.randn(8, 2, 4):
            model.module.optimize(x)
        model.module.save("latest")
        model.module.save_best("best")
        print(model.module.name())
        model.module.fit(torch.randn(2, 4))
    ''')
    root = _project(tmp_path, **{"train.py": train, "model.py": model, "base_model.py": base})
    results = _results([root])
    named = [f for f in results["train.py"].findings if f.code == "AM517"]
    assert [f.start.line for f in named] == [7], results["train.py"].findings
    assert "`model.module.save()`" in named[0].message and "base_model.py:8, through `save_network`" in named[0].message
    assert results["train.py"].after == train


def test_the_checkpoint_method_of_a_class_given_the_accelerator_is_not_named_at_its_call(tmp_path) -> None:
    """A trainer class the run gives the Accelerator saves once itself (AM510 writes
    accelerator.save there): `trainer.save()` in main.py is then no write on every process."""
    trainer = textwrap.dedent('''\
        import torch


        class Trainer:
            def __init__(self, model, optimizer, loader):
                self.model, self.optimizer, self.loader = model, optimizer, loader

            def train(self):
                for x in self.loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()

            def save(self, path):
                torch.save(self.model.state_dict(), path)
    ''')
    main = textwrap.dedent('''\
        import torch
        from trainer import Trainer

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
        trainer = Trainer(model, optimizer, loader)
        trainer.train()
        trainer.save("model.pt")
    ''')
    root = _project(tmp_path, **{"main.py": main, "trainer.py": trainer})
    results = _results([root])
    assert "accelerator.save(" in results["trainer.py"].after, results["trainer.py"].after
    assert "Trainer(model, optimizer, loader, accelerator=accelerator)" in results["main.py"].after
    assert not [f for f in results["main.py"].findings if f.code == "AM517"], results["main.py"].findings


def test_a_layer_a_model_class_of_another_file_never_uses_gives_the_accelerator_the_option(tmp_path) -> None:
    """SR-GNN's `GNN` (model.py) builds `self.linear_edge_f` and never uses it; train.py
    builds the model. Under DDP the second step stops waiting for its gradients: the
    Accelerator train.py gets is created with find_unused_parameters=True, and AM228
    says why at the call that builds the model."""
    model = textwrap.dedent('''\
        from torch import nn


        class GNN(nn.Module):
            def __init__(self, h):
                super().__init__()
                self.linear_in = nn.Linear(h, h)
                self.linear_edge_f = nn.Linear(h, h)

            def forward(self, x):
                return self.linear_in(x)
    ''')
    train = textwrap.dedent('''\
        import torch
        from model import GNN

        model = GNN(4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
        for x in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "model.py": model})
    results = _results([root])
    assert "DistributedDataParallelKwargs(find_unused_parameters=True)" in results["train.py"].after
    named = [f for f in results["train.py"].findings if f.code == "AM228"]
    assert len(named) == 1 and "`self.linear_edge_f` of `GNN`" in named[0].message, results["train.py"].findings
    assert not results["model.py"].changed


def test_calling_an_instance_runs_its_class_call_method_in_code_other_files_call(tmp_path) -> None:
    """ConvLSTM-PyTorch's `early_stopping(valid_loss, model_dict, epoch, save_dir)` runs
    `EarlyStopping.__call__` (earlystopping.py), whose `save_checkpoint` torch.saves on every
    process: calling the instance itself counts as calling `__call__`, so the save is named."""
    stopper = textwrap.dedent('''\
        import torch


        class EarlyStopping:
            def __init__(self, patience, **options):  # takes no `accelerator`: not threaded
                self.patience, self.best, self.options = patience, None, options

            def __call__(self, loss):
                if self.best is None or loss < self.best:
                    self.best = loss
                    self.save_checkpoint({"loss": loss})

            def save_checkpoint(self, state):
                torch.save(state, "best.pt")
    ''')
    train = textwrap.dedent('''\
        import torch
        from earlystopping import EarlyStopping

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        stopper = EarlyStopping(3)
        for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2):
            optimizer.zero_grad()
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            stopper(loss.item())
    ''')
    root = _project(tmp_path, **{"train.py": train, "earlystopping.py": stopper})
    results = _results([root])
    saves = [f for f in results["earlystopping.py"].findings if f.code == "AM510"]
    assert [f.start.line for f in saves] == [14], results["earlystopping.py"].findings
    assert "other files of the run call this code" in saves[0].message and not results["earlystopping.py"].changed


def test_what_a_save_in_code_the_run_calls_needs_depends_on_what_follows_it(tmp_path) -> None:
    """Readers R3 (twenty-first session): a save followed by a copy to `best.pt` is gated
    with its copy; a file read back in the same function is a cache one process builds
    while the others wait (MUNIT's load_vgg16, JointBERT's features); a save into an
    in-memory buffer (deit's EMA copy) is each process's own, and not named at all; a helper
    that only writes, called by files of the run alone, is named at their calls (AM517)."""
    utils = textwrap.dedent('''\
        import io
        import os
        import shutil

        import torch


        def save_checkpoint(state, is_best, path, **options):  # no `accelerator` to take: left as written
            torch.save(state, path)
            if is_best:
                shutil.copyfile(path, "best.pt")
            os.makedirs("logs", exist_ok=True)


        def cached_features(path, **options):
            if os.path.exists(path):
                return torch.load(path)
            features = torch.randn(4, 4)
            torch.save(features, path)
            return features


        def snapshot(state, **options):
            buffer = io.BytesIO()
            torch.save(state, buffer)
            buffer.seek(0)
            return torch.load(buffer)


        def save_state(state, path, **options):
            torch.save(state, path)


        def write_note(path, text, **options):
            with open(path, "a") as f:
                f.write(text)
    ''')
    train = textwrap.dedent('''\
        import torch
        import utils

        features = utils.cached_features("features.pt")
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in torch.utils.data.DataLoader(features, batch_size=2):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
            best = utils.snapshot(model.state_dict())
        utils.save_checkpoint({"model": model.state_dict()}, True, "last.pt")
        utils.save_state({"model": model.state_dict()}, "state.pt")
    ''')
    root = _project(tmp_path, **{"train.py": train, "utils.py": utils})
    results = _results([root])
    found = {f.start.line: f.message for f in results["utils.py"].findings if f.code == "AM510"}
    # save_state only writes and only train.py, a file of the run, calls it: train.py's AM517 says it there
    assert sorted(found) == [9, 19], found
    assert [f.start.line for f in results["train.py"].findings if f.code == "AM517" and "save_state" in f.message] == [13]
    assert "gate the call, or this whole function with what it copies after the save" in found[9]
    assert "the file is read back here, a cache" in found[19]


def test_a_script_driving_a_model_object_names_its_image_writers_and_prints(tmp_path) -> None:
    """MUNIT's train.py drives `trainer.dis_update(...)` batch by batch and, on every
    process, prints and calls `write_2images(...)` of utils.py, which makes a grid with
    torch and `vutils.save_image`s it through a private helper of its module: N processes
    write the same picture (reader R1, 21st session). A helper that hands a value back or
    changes an object it is given is not such a writer."""
    trainer = textwrap.dedent('''\
        import torch


        class Trainer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(2, 2)
                self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def train_step(self, x, y):
                self.optimizer.zero_grad()
                torch.nn.functional.mse_loss(self.net(x), y).backward()
                self.optimizer.step()
    ''')
    utils = textwrap.dedent('''\
        import torch
        import torchvision.utils as vutils


        def _write_grid(images, path):
            grid = vutils.make_grid(torch.cat([i.expand(-1, 3, -1, -1) for i in images], 0).detach())
            vutils.save_image(grid, path, nrow=1)


        def write_pictures(images, folder, tag):
            _write_grid(images, "%s/pictures_%s.jpg" % (folder, tag))


        def make_grid(images):
            return vutils.make_grid(torch.cat(images, 0))


        def write_and_switch(model, images, path):
            model.eval()
            vutils.save_image(torch.cat(images, 0), path)
    ''')
    train = textwrap.dedent('''\
        import torch
        import utils
        from trainer import Trainer

        trainer = Trainer()
        batches = [(torch.ones(1, 2), torch.ones(1, 2))]
        print("starting")
        for step, (x, y) in enumerate(batches):
            trainer.train_step(x, y)
            print("step", step)
            utils.write_pictures([x], "out", step)
            grid = utils.make_grid([x])
            utils.write_and_switch(trainer, [x], "out/a.jpg")
            torch.save(trainer.state_dict(), "out/trainer.pt")
    ''')
    root = _project(tmp_path, **{"train.py": train, "trainer.py": trainer, "utils.py": utils})
    alone = _results([os.path.join(root, "train.py")])["train.py"]
    writes = {f.start.line for f in alone.findings if f.code == "AM517"}
    assert writes == {11}, alone.findings
    prints = [f for f in alone.findings if f.code == "AM511"]
    assert [f.start.line for f in prints] == [10], prints  # the loop's print, not the one before it
    assert "migrated with the model object it drives" in prints[0].message
    saves = [f for f in alone.findings if f.code == "AM510"]
    assert [f.start.line for f in saves] == [14], alone.findings
    assert "save `accelerator.unwrap_model(trainer).state_dict()`" in saves[0].message  # reader R1, 22nd session
    assert alone.after == alone.before


def test_a_package_installed_from_its_own_folder_is_followed_through_inherited_attributes(tmp_path) -> None:
    """st-gcn keeps torchlight/ as a project of its own (torchlight/setup.py installs the
    package torchlight/torchlight/), imported as `import torchlight`; its base class keeps
    `self.io = torchlight.IO(work_dir)`, and a subclass in another file calls
    `self.io.save_model(...)` and `self.io.print_log(...)` on every process. The import was
    not followed, so the folder race, the checkpoint and the log appends of IO were named
    nowhere (reader R1, 20th session). The package is what setup.py installs, so its
    files are not written (reader R2, 22nd session)."""
    io = textwrap.dedent('''\
        import os
        import shutil
        import time

        import torch


        class IO:
            def __init__(self, work_dir):
                self.work_dir = work_dir

            def save_arg(self, arg):
                if not os.path.exists(self.work_dir):
                    os.makedirs(self.work_dir)
                with open(self.work_dir + "/config.txt", "w") as f:
                    f.write(str(arg))

            def save_model(self, model, name):
                torch.save(model.state_dict(), self.work_dir + "/" + name)
                shutil.copyfile(self.work_dir + "/" + name, self.work_dir + "/last.pt")

            def print_log(self, text):
                text = time.strftime("[%X] ", time.localtime()) + text
                with open(self.work_dir + "/log.txt", "a") as f:
                    print(text, file=f)
    ''')
    base = textwrap.dedent('''\
        import torch
        import lightio


        class Base:
            def __init__(self, arg):
                self.io = lightio.IO(arg.work_dir)
                self.io.save_arg(arg)
                self.model = torch.nn.Linear(2, 2)
    ''')
    trainer = textwrap.dedent('''\
        import torch
        from base import Base


        class Trainer(Base):
            def train(self, batches):
                optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                for x, y in batches:
                    optimizer.zero_grad()
                    torch.nn.functional.mse_loss(self.model(x), y).backward()
                    optimizer.step()
                    self.io.print_log("step")
                self.io.save_model(self.model, "model.pt")
    ''')
    files = {
        "base.py": base, "trainer.py": trainer,
        "lightio/setup.py": "from setuptools import setup\nsetup(name='lightio', packages=['lightio'])\n",
        "lightio/lightio/__init__.py": "from .io import IO\n", "lightio/lightio/io.py": io,
    }
    root = _project(tmp_path, **files)
    results = {os.path.relpath(r.path, root): r for r in migrate_paths([root], Config())}
    found = {(f.code, f.start.line) for f in results[os.path.join("lightio", "lightio", "io.py")].findings}
    # the copy after the save goes with AM510's save, which says so: not named again
    assert {("AM518", 14), ("AM517", 15), ("AM510", 19), ("AM517", 24)} == {f for f in found if f[0] != "AM001"}, found
    # the scripts run the copy installed from lightio/setup.py: nothing is written here, and
    # every finding says where the change goes and what makes it count (reader R2)
    installed = results[os.path.join("lightio", "lightio", "io.py")]
    assert installed.after == installed.before
    assert all("a package installed from its own project" in f.message and "pip install -e lightio" in f.message
               for f in installed.findings), installed.findings


def test_batches_a_plain_class_hands_out_and_a_model_read_beside_forward_are_named(tmp_path) -> None:
    """SR-GNN's model.py trains on `slices = train_data.generate_batch(model.batch_size)`, a
    plain class of utils.py handing out index slices (no DataLoader: every process trains
    on all of it, each shuffled its own way), and reads `model.compute_scores(...)`,
    `model.loss_function` on the model its callers would prepare, which AM951's recipe
    turns into a DDP wrapper (reader R1, 19th session)."""
    utils = textwrap.dedent('''\
        import numpy as np


        class Batches():
            def __init__(self, data, shuffle=False):
                self.inputs = np.asarray(data)
                self.shuffle = shuffle

            def generate_batch(self, batch_size):
                order = np.arange(len(self.inputs))
                if self.shuffle:
                    np.random.shuffle(order)
                return np.array_split(order, max(1, len(order) // batch_size))

            def get_slice(self, i):
                return self.inputs[i]
    ''')
    model = textwrap.dedent('''\
        import torch


        class Scorer(torch.nn.Module):
            def __init__(self, batch_size):
                super().__init__()
                self.batch_size = batch_size
                self.embedding = torch.nn.Embedding(10, 4)
                self.loss_function = torch.nn.MSELoss()
                self.optimizer = torch.optim.SGD(self.parameters(), lr=0.1)

            def compute_scores(self, hidden):
                return hidden.sum(-1)

            def forward(self, items):
                return self.embedding(items)


        def train_test(model, train_data):
            model.train()
            slices = train_data.generate_batch(model.batch_size)
            for i, j in zip(slices, range(len(slices))):
                model.optimizer.zero_grad()
                items = torch.as_tensor(train_data.get_slice(i))
                scores = model.compute_scores(model(items))
                loss = model.loss_function(scores, torch.zeros_like(scores))
                loss.backward()
                model.optimizer.step()
    ''')
    main = textwrap.dedent('''\
        from model import Scorer, train_test
        from utils import Batches

        train_data = Batches(list(range(8)), shuffle=True)
        model = Scorer(4)
        for epoch in range(2):
            train_test(model, train_data)
    ''')
    root = _project(tmp_path, **{"main.py": main, "model.py": model, "utils.py": utils})
    found = _results([root])["model.py"]
    unsplit = [f for f in found.findings if f.code == "AM218"]
    assert [f.start.line for f in unsplit] == [27], found.findings
    recipe = [f.message for f in found.findings if f.code == "AM951" and "from inside itself" in f.message]
    assert recipe and "of its methods this file calls (`compute_scores`), those computing what the loss trains belong inside the model's forward" in recipe[0], found.findings
    assert "its attributes (`batch_size`, `loss_function`) are read through `accelerator.unwrap_model(model)`" in recipe[0]
    assert found.after == found.before


def test_a_classmethod_factory_runs_the_constructor_on_every_process(tmp_path) -> None:
    """pytorch-template's train.py builds `config = ConfigParser.from_args(args)`, a
    classmethod returning `cls(...)`, whose `__init__` makes the run's folders with
    `mkdir(parents=True, exist_ok=run_id == '')` and a run id from the clock: every process
    but the first fails (or each names its own folder). The class was never constructed
    by name, so its `__init__` counted as code nothing runs (reader R2, 21st session)."""
    config = textwrap.dedent('''\
        import os
        from datetime import datetime
        from pathlib import Path


        class RunConfig:
            def __init__(self, root, run_id=None):
                if run_id is None:
                    run_id = datetime.now().strftime("%m%d_%H%M%S")
                self.save_dir = Path(root) / run_id
                exist_ok = run_id == ""
                self.save_dir.mkdir(parents=True, exist_ok=exist_ok)
                os.makedirs(str(self.save_dir / "logs"), exist_ok=True)

            @classmethod
            def from_args(cls, args):
                return cls(args.root)

            @staticmethod
            def describe():
                os.makedirs("notes")
    ''')
    train = textwrap.dedent('''\
        import argparse
        import torch
        from run_config import RunConfig


        def main(config):
            model = torch.nn.Linear(2, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=2):
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--root", default="runs")
            main(RunConfig.from_args(parser.parse_args()))
    ''')
    root = _project(tmp_path, **{"train.py": train, "run_config.py": config})
    found = _results([root])["run_config.py"]
    races = [f for f in found.findings if f.code == "AM518"]
    assert [f.start.line for f in races] == [12], found.findings  # not the exist_ok=True one, nor the uncalled staticmethod
    assert "`exist_ok=exist_ok` is not always True" in races[0].message
    assert "`datetime.datetime.now()`, called in this function" in races[0].message
    assert found.after == found.before


def test_an_early_stop_on_each_process_results_in_a_driving_loop_is_named(tmp_path) -> None:
    """pytorch-template's BaseTrainer.train runs the subclass's `_train_epoch(epoch)`, merges
    its results into `log` and leaves the epoch loop once `log[metric]` has not improved for
    a while: computed on each process's own shard, the processes would stop at different
    epochs and the rest wait in the all-reduce forever (reader R2, 21st session). The `if`
    around it tests a setting every process shares and is not named."""
    base = textwrap.dedent('''\
        class BaseTrainer:
            def __init__(self, epochs, patience):
                self.epochs, self.patience = epochs, patience
                self.mode, self.best = "min", float("inf")

            def train(self):
                not_improved = 0
                for epoch in range(self.epochs):
                    result = self._train_epoch(epoch)
                    log = {"epoch": epoch}
                    log.update(result)
                    if self.mode != "off":
                        if log["loss"] <= self.best:
                            self.best = log["loss"]
                            not_improved = 0
                        else:
                            not_improved += 1
                        if not_improved > self.patience:
                            break
    ''')
    trainer = textwrap.dedent('''\
        import torch
        from base import BaseTrainer


        class Trainer(BaseTrainer):
            def __init__(self, model, optimizer, loader, epochs):
                super().__init__(epochs, 3)
                self.model, self.optimizer, self.loader = model, optimizer, loader

            def _train_epoch(self, epoch):
                total = 0.0
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
                    total += loss.item()
                return {"loss": total}
    ''')
    root = _project(tmp_path, **{"base.py": base, "trainer.py": trainer})
    found = _results([root])["base.py"]
    stops = [f for f in found.findings if f.code == "AM915"]
    assert [f.start.line for f in stops] == [18], found.findings
    assert "`if not_improved > self.patience:`" in stops[0].message


def test_a_model_saved_from_a_dict_of_models_is_told_to_be_unwrapped(tmp_path) -> None:
    """monodepth2 keeps its networks in `self.models` and saves `model.state_dict()` for
    each of `self.models.items()`: prepared by hand (the migration cannot follow a dict),
    the keys gain DDP's `module.` prefix and resume loads nothing (reader R2, 22nd session).
    A save of a model the migration knows is unwrapped by the fix, and told nothing."""
    train = textwrap.dedent('''\
        import torch

        models = {"encoder": torch.nn.Linear(2, 2), "decoder": torch.nn.Linear(2, 2)}
        params = [p for m in models.values() for p in m.parameters()]
        optimizer = torch.optim.SGD(params, lr=0.1)
        for x in torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=2):
            optimizer.zero_grad()
            models["decoder"](models["encoder"](x)).sum().backward()
            optimizer.step()
        for name, model in models.items():
            torch.save(model.state_dict(), name + ".pt")
    ''')
    root = _project(tmp_path, **{"train.py": train})
    found = _results([os.path.join(root, "train.py")])["train.py"]
    saves = [f.message for f in found.findings if f.code == "AM510"]
    assert saves and "save `accelerator.unwrap_model(model).state_dict()`" in saves[0], found.findings


def test_a_standard_module_a_star_import_brings_is_read_as_itself(tmp_path) -> None:
    """monodepth2's trainer.py has no `import os`: `from utils import *` brings it, and
    its `if not os.path.exists(d): os.makedirs(d)` races went unnamed (reader R2, 22nd
    session)."""
    helpers = "import os\nimport torch\n\n\ndef batches():\n    return torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=2)\n"
    train = textwrap.dedent('''\
        import torch
        from helpers import *

        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        if not os.path.exists("runs"):
            os.makedirs("runs")
        for x in batches():
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "helpers.py": helpers})
    found = _results([root])["train.py"]
    assert [f.start.line for f in found.findings if f.code == "AM518"] == [7], found.findings
    assert 'os.makedirs("runs", exist_ok=True)' in found.after


def test_a_base_class_loop_whose_subclass_trains_is_not_a_checkpoint_method(tmp_path) -> None:
    """pytorch-template's train.py calls `trainer.train()`, BaseTrainer's epoch loop, which
    saves checkpoints and calls `self._train_epoch(epoch)`: abstract in BaseTrainer, the
    backward in the Trainer subclass of another file. AM517 told the user to call it on the
    main process only, the whole training (reader R3, 22nd session)."""
    base = textwrap.dedent('''\
        import torch


        class BaseTrainer:
            def __init__(self, model, epochs):
                self.model, self.epochs = model, epochs

            def _train_epoch(self, epoch):
                raise NotImplementedError

            def train(self):
                for epoch in range(self.epochs):
                    self._train_epoch(epoch)
                    torch.save(self.model.state_dict(), f"epoch{epoch}.pt")
    ''')
    trainer = textwrap.dedent('''\
        import torch
        from base import BaseTrainer


        class Trainer(BaseTrainer):
            def __init__(self, model, optimizer, loader, epochs):
                super().__init__(model, epochs)
                self.optimizer, self.loader = optimizer, loader

            def _train_epoch(self, epoch):
                for x in self.loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()
    ''')
    train = textwrap.dedent('''\
        import torch
        from trainer import Trainer

        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=2)
        trainer = Trainer(model, optimizer, loader, 2)
        trainer.train()
    ''')
    root = _project(tmp_path, **{"base.py": base, "trainer.py": trainer, "train.py": train})
    found = _results([root])["train.py"]
    assert not [f for f in found.findings if f.code == "AM517" and "trainer.train()" in f.message], found.findings


def test_a_module_read_under_a_test_for_the_wrapper_is_no_module_reader() -> None:
    """Bert-Multi-Label's `self.model.module if hasattr(self.model, 'module') else self.model`
    and lufficc/SSD's `if isinstance(model, DistributedDataParallel): model = self.model.module`
    read `.module` only where there is one: handing them a prepared model is safe on one
    process too. An unguarded read still counts."""
    from migrator.project.index import index

    helpers = textwrap.dedent('''
        from torch.nn.parallel import DistributedDataParallel

        class Keeper:
            def __init__(self, model):
                self.model = model

            def save(self):
                model = self.model
                if isinstance(model, DistributedDataParallel):
                    model = self.model.module
                return model.state_dict()

        def info(model):
            return model.module if hasattr(model, 'module') else model

        def unguarded(model):
            return model.module.state_dict()
    ''')
    functions = index({"helpers.py": helpers})["helpers.py"].functions
    assert functions["Keeper"].module_params == ()
    assert functions["info"].module_params == ()
    assert functions["unguarded"].module_params == ("model",)


def test_an_argument_named_opt_is_the_options_not_an_optimizer() -> None:
    """RepDistiller's `validate(val_loader, model, criterion, opt)` and faster-rcnn's
    `TestDataset(opt)` hand the parsed options: only `optimizer` (or `g_optimizer`) is an
    optimizer by its name."""
    import libcst as cst

    from rules.am914_training_in_another_module import _name_role

    def role(source: str):
        return [_name_role(a) for a in cst.parse_expression(source).args]

    assert role("f(opt, optim, optimizer, g_optimizer)") == [None, None, "optimizer", "optimizer"]


def test_the_set_up_is_prepared_before_a_trainer_that_hands_the_model_back(tmp_path) -> None:
    """lufficc/SSD: `model = do_train(cfg, model, train_loader, optimizer, ...)` rebinds the
    model with what training returns; prepare() went after that binding, so the engine
    trained the unprepared objects (the verifier refused it with a misleading AM953)."""
    train = textwrap.dedent('''\
        import torch
        import engine


        def main():
            data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            train_loader = torch.utils.data.DataLoader(data, batch_size=8)
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model = engine.fit(model, train_loader, optimizer)
            return model


        if __name__ == "__main__":
            main()
    ''')
    fit = textwrap.dedent('''\
        import torch


        def fit(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            return model
    ''')
    root = _project(tmp_path, **{"train.py": train, "engine.py": fit})
    results = _results([root])
    after = results["train.py"].after
    assert not any(f.code.startswith("AM95") for r in results.values() for f in r.findings), results
    assert after.index("accelerator.prepare(model, optimizer, train_loader)") < after.index("model = engine.fit("), after
    assert "accelerator.backward(" in results["engine.py"].after


def test_a_saving_method_whose_result_is_used_runs_on_the_main_process_first(tmp_path) -> None:
    """Bert-Multi-Label's `features = processor.create_features(...)` caches what it builds
    with torch.save and returns it: every process needs the result, so "call it on the main
    process only" left the others without it (reader R2's probe: NameError). The main
    process goes first instead; a call standing alone keeps the main-process-only advice."""
    processor = textwrap.dedent('''\
        import os

        import torch


        class Processor:
            def create_features(self, size, path):
                if os.path.exists(path):
                    return torch.load(path)
                features = torch.randn(size, 4)
                torch.save(features, path)
                return features

            def save_vocab(self, path):
                torch.save({"a": 1}, path)
    ''')
    train = textwrap.dedent('''\
        import torch
        from processor import Processor


        def main():
            processor = Processor()
            features = processor.create_features(64, "cache.pt")
            processor.save_vocab("vocab.pt")
            data = torch.utils.data.TensorDataset(features, torch.randn(64, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=8)
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
    ''')
    root = _project(tmp_path, **{"train.py": train, "processor.py": processor})
    # processor.py only read, as Bert's pybert/io/bert_processor.py is
    found = _results([os.path.join(root, "train.py")])["train.py"].findings
    told = {f.message.split("`")[1]: f.message for f in found if f.code == "AM517"}
    assert "main_process_first()" in told["processor.create_features()"], told
    assert "writes a file on every process" in told["processor.create_features()"], told
    assert "call it on the main process only" in told["processor.save_vocab()"], told


def test_an_engine_comparing_a_handed_torch_device_with_a_string_is_migrated(tmp_path) -> None:
    """lufficc/SSD's trainer compares `device == "cuda"` (to log GPU memory), where
    train.py hands it `torch.device(cfg.MODEL.DEVICE)`: False before the migration and
    after it, so the engine is migrated. Handed the string itself, the comparison would
    turn False once `device` is the Accelerator's torch.device: the engine is left as
    written, with the reason (AM952)."""
    engine = textwrap.dedent('''\
        import torch


        def train(model, batches, optimizer, device):
            for x in batches:
                x = x.to(device)
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
                if device == "cuda":
                    print(torch.cuda.max_memory_allocated())
    ''')
    train = textwrap.dedent('''\
        import torch
        from engine import train

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Linear(4, 1).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train(model, torch.randn(8, 2, 4), optimizer, device)
    ''')
    root = _project(tmp_path / "torch", **{"train.py": train, "engine.py": engine})
    results = _results([root])
    assert results["engine.py"].changed and "accelerator.backward(" in results["engine.py"].after, results["engine.py"].findings
    assert 'if device == "cuda":' in results["engine.py"].after
    assert not [f for f in results["engine.py"].findings if f.code == "AM952"]
    stringly = train.replace('torch.device("cuda" if torch.cuda.is_available() else "cpu")', '"cuda" if torch.cuda.is_available() else "cpu"')
    root = _project(tmp_path / "string", **{"train.py": stringly, "engine.py": engine})
    results = _results([root])
    assert not results["engine.py"].changed
    told = [f for f in results["engine.py"].findings if f.code == "AM952"]
    assert [f.start.line for f in told] == [10] and "compare `device.type` instead" in told[0].message, results["engine.py"].findings


def test_a_checkpoint_loaded_in_code_other_files_run_is_named_with_a_map_location(tmp_path) -> None:
    """stargan-v2's `CheckpointIO.load` (reader R2): `torch.load(fname)` with no
    `map_location`, in a file given no Accelerator whose method train.py calls on every
    process, puts N copies of the checkpoint on GPU 0. Named there, left as written;
    a load that says where is not."""
    saver = textwrap.dedent('''\
        import torch


        class Saver:
            def __init__(self, model):
                self.model = model

            def load(self, path):
                state = torch.load(path)
                self.model.load_state_dict(state)

            def load_on_cpu(self, path):
                self.model.load_state_dict(torch.load(path, map_location="cpu"))
    ''')
    train = textwrap.dedent('''\
        import torch
        from saver import Saver

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        saver = Saver(model)
        saver.load("last.pt")
        saver.load_on_cpu("last.pt")
        for x in torch.randn(8, 2, 4):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    ''')
    root = _project(tmp_path, **{"train.py": train, "saver.py": saver})
    found = [f for f in _results([root])["saver.py"].findings if f.code == "AM521"]
    assert [f.start.line for f in found] == [9], found
    assert 'map_location="cpu"' in found[0].message and "other files of the run call this code" in found[0].message


def test_a_split_helper_of_another_file_drawing_its_own_order_is_named_at_the_call(tmp_path) -> None:
    """SR-GNN's `split_validation` (np.random.shuffle, a cut at one index) and lonePatient/
    Bert's `TaskData().train_val_split(...)`, a method on an instance whose class is
    imported inside `main()`, seeding with `random.seed(seed)` where `seed=None`: each
    process draws its own order, so one's validation samples are another's training ones.
    Named at the call (AM227); not where the call passes a seed, nor for a split seeded
    alike first."""
    data = textwrap.dedent('''\
        import random

        import numpy as np


        def split_validation(samples, portion):
            order = np.arange(len(samples))
            np.random.shuffle(order)
            cut = int(len(samples) * (1 - portion))
            return [samples[i] for i in order[:cut]], [samples[i] for i in order[cut:]]


        class TaskData:
            def train_val_split(self, rows, valid_size, seed=None):
                random.seed(seed)
                random.shuffle(rows)
                cut = int(len(rows) * valid_size)
                return rows[cut:], rows[:cut]
    ''')
    train = textwrap.dedent('''\
        import torch
        from data import split_validation


        def main(do_data):
            rows = list(range(32))
            if do_data:
                from data import TaskData
                task = TaskData()
                train_rows, valid_rows = task.train_val_split(rows, 0.25)
                seeded_rows, _ = task.train_val_split(rows, 0.25, seed=42)
            train_rows, valid_rows = split_validation(rows, 0.25)
            model = torch.nn.Linear(1, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for row in train_rows:
                optimizer.zero_grad()
                model(torch.tensor([[float(row)]])).sum().backward()
                optimizer.step()


        if __name__ == "__main__":
            main(True)
    ''')
    root = _project(tmp_path, **{"train.py": train, "data.py": data})
    found = [f for f in _results([os.path.join(root, "train.py")])["train.py"].findings if f.code == "AM227"]
    assert sorted(f.start.line for f in found) == [10, 12], found
    assert any("pass `seed=` the same value" in f.message for f in found) and any("`np.random.seed(...)`" in f.message or "numpy.random.seed" in f.message for f in found), found


def test_a_model_wrapped_in_place_and_aliased_is_still_the_run_s_instance() -> None:
    """lidar-bonnetal's Trainer: `self.model = Segmentator(...)`, then `self.model =
    nn.DataParallel(self.model)`, `convert_model(self.model).cuda()` and `self.model_single
    = self.model.module`: the wrapper holds the same Segmentator, so
    `self.model_single.save_checkpoint(...)` runs the model file's save on every process. A
    name bound to something else as well is no instance."""
    from migrator.project.index import index

    model = "import torch\n\n\nclass Net(torch.nn.Module):\n    def save_checkpoint(self, path):\n        torch.save(self.fc.state_dict(), path)\n"
    trainer = textwrap.dedent('''
        import torch.nn as nn
        from model import Net

        class Trainer:
            def __init__(self):
                self.model = Net()
                self.model_single = self.model
                self.model = nn.DataParallel(self.model)
                self.model = convert_model(self.model).cuda()
                self.model_single = self.model.module
                self.other = Net()
                self.other = make_something_else()

            def train(self):
                self.model_single.save_checkpoint("best")
    ''')
    instances = index({"model.py": model, "trainer.py": trainer})["trainer.py"].instances
    assert instances == {"self.model": ("model.py", "Net"), "self.model_single": ("model.py", "Net")}


def test_a_save_of_the_model_s_own_layers_by_code_other_files_run_is_not_told_to_unwrap(tmp_path) -> None:
    """A method of the model class saving `self.backbone.state_dict()`: `self` is the model
    DDP wraps, not the wrapper, so the layers' keys carry no `module.`; the save still runs
    on every process and is named (AM510), without the advice to unwrap."""
    model = (
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.backbone = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n        return self.backbone(x)\n\n"
        "    def save_checkpoint(self, path):\n        torch.save(self.backbone.state_dict(), path)\n"
    )
    main = textwrap.dedent('''
        import torch
        from model import Net

        def main():
            model = Net()
            model_single = model
            model = torch.nn.DataParallel(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            model_single.save_checkpoint("best.pt")

        if __name__ == "__main__":
            main()
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "model.py": model})])
    saves = [f for f in results["model.py"].findings if f.code == "AM510"]
    assert len(saves) == 1 and "other files of the run call this code" in saves[0].message, results["model.py"].findings
    assert "unwrapped" not in saves[0].message


def test_a_logger_whose_summaries_loop_over_what_they_are_given_is_a_logger() -> None:
    """The TensorBoard logger many projects copy (lidar-bonnetal's common/logger.py) loops
    over the images and histogram bins it is handed: still a logger. A class keeping a
    writer that loops over a loader is an evaluator, not one."""
    logs = textwrap.dedent('''
        import tensorflow as tf

        class Logger(object):
            def __init__(self, log_dir):
                self.writer = tf.summary.FileWriter(log_dir)

            def image_summary(self, tag, images, step):
                summaries = []
                for i, img in enumerate(images):
                    summaries.append(tf.Summary.Value(tag=f"{tag}/{i}", image=img))
                self.writer.add_summary(tf.Summary(value=summaries), step)

        class Evaluator(object):
            def __init__(self, log_dir):
                self.writer = tf.summary.FileWriter(log_dir)

            def run(self, loader):
                for batch in loader:
                    self.writer.add_summary(batch)
    ''')
    main = "from logs import Logger, Evaluator\n\nLogger('runs')\nEvaluator('runs').run([])\n"
    sources = {"logs.py": logs, "main.py": main}
    found = project.logger_calls({p: t.encode() for p, t in sources.items()}, project.index(sources))
    assert found == {"main.py": ("Logger",)}


def test_a_model_picked_from_a_table_of_factories_is_read_for_an_unused_head(tmp_path) -> None:
    """open-reid's `models.create(args.arch)`: `create` returns `__factory[name](...)` over
    `{'resnet50': resnet50, ...}`, and `resnet50(**kw)` returns `ResNet(50, **kw)`, whose
    forward walks `self.base._modules` and stops at `avgpool`: the head gets no gradient,
    named at the factory's call as at the class's."""
    resnet = textwrap.dedent('''
        import torch.nn as nn
        import torchvision

        class ResNet(nn.Module):
            def __init__(self, depth):
                super().__init__()
                self.base = torchvision.models.resnet50(pretrained=False)

            def forward(self, x):
                for name, module in self.base._modules.items():
                    if name == 'avgpool':
                        break
                    x = module(x)
                return x

        def resnet50(**kwargs):
            return ResNet(50, **kwargs)
    ''')
    models = "from .resnet import *\n\n__factory = {\n    'resnet50': resnet50,\n}\n\n\ndef create(name, *args, **kwargs):\n    return __factory[name](*args, **kwargs)\n"
    main = "import models\n\nmodel = models.create('resnet50')\n"
    sources = {"models/__init__.py": models, "models/resnet.py": resnet, "main.py": main}
    files = project.index(sources)
    assert files["models/__init__.py"].functions["create"].makes == (("models/resnet.py", "ResNet"),)
    found = project.unused_models({p: t.encode() for p, t in sources.items()}, files)
    assert [call for call, _ in found["main.py"]] == ["models.create"], found


def test_a_registered_model_saved_by_code_other_files_run_is_told_to_unwrap(tmp_path) -> None:
    """deep-person-reid's Engine keeps the models it is handed (`self._models[name] =
    model`) and saves `self._models[name].state_dict()` through a checkpoint helper; the
    caller prepares what it hands in, so on N processes the keys carry `module.`: named
    (AM501) in the engine, left as written. The optimizer saved beside it is no model."""
    tools = "import torch\n\n\ndef mkdir(d):\n    pass\n\n\ndef save_checkpoint(state, path):\n    mkdir(path)\n    torch.save(state, path)\n"
    engine = textwrap.dedent('''
        from tools import save_checkpoint

        class Engine:
            def __init__(self):
                self._models = {}
                self._optims = {}

            def register_model(self, name, model, optim):
                self._models[name] = model
                self._optims[name] = optim

            def run(self, loader):
                for name in self._models:
                    for x, y in loader:
                        self._optims[name].zero_grad()
                        (self._models[name](x) - y).pow(2).mean().backward()
                        self._optims[name].step()
                    save_checkpoint({'state_dict': self._models[name].state_dict(), 'optimizer': self._optims[name].state_dict()}, name)
    ''')
    main = textwrap.dedent('''
        import torch
        from engine import Engine

        def main():
            model = torch.nn.Linear(4, 1)
            engine = Engine()
            engine.register_model('model', model, torch.optim.SGD(model.parameters(), lr=0.1))
            engine.run([(torch.randn(2, 4), torch.randn(2, 1))])

        if __name__ == "__main__":
            main()
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "engine.py": engine, "tools.py": tools})])
    found = [f for f in results["engine.py"].findings if f.code == "AM501"]
    assert [f.message.split("`")[1] for f in found] == ["self._models[name].state_dict()"], results["engine.py"].findings
    assert "other files of the run call this code" in found[0].message and not found[0].fixable


def test_a_load_helper_handing_back_what_it_loads_is_told_where_to_load(tmp_path) -> None:
    """open-reid's `load_checkpoint(fpath)` returns `torch.load(fpath)`, and deep-person-reid's
    passes `map_location = None if torch.cuda.is_available() else 'cpu'`: on a GPU machine
    both load onto the device the checkpoint was saved from, on every process (AM521 in
    code other files run). A helper loading onto the CPU says where already."""
    helpers = textwrap.dedent('''
        import torch

        def load_checkpoint(fpath):
            checkpoint = torch.load(fpath)
            return checkpoint

        def load_maybe(fpath):
            map_location = None if torch.cuda.is_available() else 'cpu'
            return torch.load(fpath, map_location=map_location)

        def load_cpu(fpath):
            return torch.load(fpath, map_location='cpu')

        def load_whole(fpath):
            model = torch.load(fpath)
            return dict(model=model)
    ''')
    main = textwrap.dedent('''
        import torch
        from helpers import load_checkpoint, load_maybe, load_cpu, load_whole

        def main():
            model = torch.nn.Linear(4, 1)
            model.load_state_dict(load_checkpoint("a.pt"))
            model.load_state_dict(load_maybe("b.pt"))
            model.load_state_dict(load_cpu("c.pt"))
            model = load_whole("d.pt")["model"]
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in [(torch.randn(2, 4), torch.randn(2, 1))]:
                optimizer.zero_grad()
                (model(x) - y).pow(2).mean().backward()
                optimizer.step()

        if __name__ == "__main__":
            main()
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "helpers.py": helpers})])
    lines = sorted(f.start.line for f in results["helpers.py"].findings if f.code == "AM521")
    assert lines == [5, 10, 16], results["helpers.py"].findings
    notes = {f.start.line: f.message for f in results["helpers.py"].findings if f.code == "AM521"}
    assert "LOCAL_RANK" in notes[16]  # a whole object stays where it is loaded: not onto the CPU alone


def test_a_model_handed_to_an_object_before_prepare_is_refused_where_only_the_object_trains(tmp_path) -> None:
    """CenterNet's main.py: `trainer = Trainer(opt, model, optimizer)` (a class picked from
    a table, `train_factory[task]`), then the loaders, then `trainer.train(epoch, loader)`:
    a prepare() written after the trainer is built wraps a model the training never runs
    through (the trainer keeps `ModelWithLoss(model, loss)`), so nothing is averaged. Left
    as written, with the reason; prepared before the hand-over it would be whole."""
    trainers = textwrap.dedent('''
        import torch

        class ModelWithLoss(torch.nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, x, y):
                return (self.model(x) - y).pow(2).mean()

        class Trainer:
            def __init__(self, model, optimizer):
                self.optimizer = optimizer
                self.model_with_loss = ModelWithLoss(model)

            def train(self, loader):
                for x, y in loader:
                    self.optimizer.zero_grad()
                    self.model_with_loss(x, y).backward()
                    self.optimizer.step()

        train_factory = {"regression": Trainer}
    ''')
    main = textwrap.dedent('''
        import torch
        from trainers import train_factory

        def main(task):
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            trainer = train_factory[task](model, optimizer)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))
            for epoch in range(2):
                trainer.train(loader)
                torch.save(model.state_dict(), "last.pt")

        if __name__ == "__main__":
            main("regression")
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "trainers.py": trainers})])
    assert results["main.py"].after == main
    refusals = [f.message for f in results["main.py"].findings if is_refusal(f.code)]
    assert any("`trainer` is built with `model` before prepare()" in m for m in refusals), results["main.py"].findings


def test_a_method_called_on_an_instance_just_built_runs_its_code_on_every_process(tmp_path) -> None:
    """pytorch-seq2seq's trainer saves with `Checkpoint(model=model, ...).save(self.expt_dir)`:
    the instance is never bound, yet `Checkpoint.save` runs on every process, and its
    folder and torch.save are named there (AM518, AM510)."""
    checkpoint = textwrap.dedent('''
        import os
        import torch

        class Checkpoint:
            def __init__(self, model):
                self.model = model

            def save(self, folder):
                os.makedirs(folder)
                torch.save(self.model, os.path.join(folder, "model.pt"))
    ''')
    trainer = textwrap.dedent('''
        from checkpoint import Checkpoint

        def fit(model, optimizer, batches, folder):
            for x, y in batches:
                optimizer.zero_grad()
                (model(x) - y).pow(2).mean().backward()
                optimizer.step()
            Checkpoint(model=model).save(folder)
    ''')
    main = "import torch\nfrom trainer import fit\n\nmodel = torch.nn.Linear(4, 1)\nfit(model, torch.optim.SGD(model.parameters(), lr=0.1), [], 'runs')\n"
    results = _results([_project(tmp_path, **{"main.py": main, "trainer.py": trainer, "checkpoint.py": checkpoint})])
    codes = sorted(f.code for f in results["checkpoint.py"].findings)
    assert "AM518" in codes and "AM510" in codes, results["checkpoint.py"].findings


def test_a_layer_of_a_model_built_on_a_model_class_of_another_file_is_not_called_unused() -> None:
    """3D-ResNets' `class ResNeXt(ResNet)` builds `self.fc` and defines no forward: the
    forward of ResNet (models/resnet.py) uses it. The file alone cannot say it is unused."""
    from migrator.analysis.collect import collect
    from migrator.analysis.unused_layers import unused_layers
    import libcst as cst

    inherited = "import torch.nn as nn\nfrom .resnet import ResNet\n\n\nclass ResNeXt(ResNet):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 1)\n"
    own = inherited.replace("from .resnet import ResNet\n", "").replace("(ResNet)", "(nn.Module)")
    for text, expected in ((inherited, []), (own, ["self.fc"])):
        module = cst.parse_module(text)
        assert [u.attribute for u in unused_layers(collect(module), module, built_elsewhere=True)] == expected


def test_a_trainer_held_back_by_a_file_the_run_only_reads_says_so_where_it_is_driven(tmp_path) -> None:
    """A file beside the run (a test, an integration script) builds the trainer class too:
    the run cannot hand it the Accelerator, so the class is not threaded and its driver is
    left as written. AM916 there names that file, not findings the trainer does not have."""
    trainer = textwrap.dedent('''
        class Trainer:
            def __init__(self, lr):
                self.lr = lr

            def train(self, model, optimizer, batches):
                for x, y in batches:
                    optimizer.zero_grad()
                    (model(x) - y).pow(2).mean().backward()
                    optimizer.step()
    ''')
    main = "import torch\nfrom trainer import Trainer\n\nmodel = torch.nn.Linear(4, 1)\nt = Trainer(0.1)\nt.train(model, torch.optim.SGD(model.parameters(), lr=0.1), [])\n"
    check = "from trainer import Trainer\n\nTrainer(0.5)\n"
    folder = Path(_project(tmp_path, **{"main.py": main, "trainer.py": trainer, "check_trainer.py": check}))
    results = _results([str(folder / "main.py"), str(folder / "trainer.py")])
    driven = [f.message for f in results["main.py"].findings if f.code == "AM916"]
    assert driven and "also called by check_trainer.py, which this run only reads" in driven[0], results["main.py"].findings


def test_a_script_building_the_model_for_another_file_s_training_is_told_to_make_the_accelerator_first(tmp_path) -> None:
    """LightGCN: main.py builds the model (picked from a table) and hands it to
    `utils.BPRLoss(model)`, whose `__init__` builds the optimizer and whose `stageOne` runs
    the backward; Procedure.py's loop calls it. Nothing can be threaded (BPRLoss's set-up is
    its own, the model is main.py's): main.py is told to create the Accelerator where the
    model is built, before it, and BPRLoss's AM001 says that is where it belongs."""
    utils = textwrap.dedent('''
        import torch

        class BPRLoss:
            def __init__(self, recmodel, lr):
                self.model = recmodel
                self.opt = torch.optim.Adam(recmodel.parameters(), lr=lr)

            def stageOne(self, x, y):
                loss = (self.model(x) - y).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss.item()
    ''')
    procedure = "def train(batches, model, bpr):\n    model.train()\n    for x, y in batches:\n        bpr.stageOne(x, y)\n"
    main = textwrap.dedent('''
        import torch
        import utils
        import Procedure

        MODELS = {"mf": torch.nn.Linear}
        model = MODELS["mf"](4, 1)
        model.load_state_dict(model.state_dict())
        bpr = utils.BPRLoss(model, 0.1)
        for epoch in range(2):
            Procedure.train([(torch.randn(2, 4), torch.randn(2, 1))], model, bpr)
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "utils.py": utils, "Procedure.py": procedure})])
    first = [f for f in results["main.py"].findings if f.code == "AM001"]
    assert first and first[0].start.line == 7 and "create the Accelerator before this line" in first[0].message, results["main.py"].findings
    assert results["main.py"].after == main
    inside = [f for f in results["utils.py"].findings if f.code == "AM001"]
    assert inside and "belongs where they build the model" in inside[0].message, results["utils.py"].findings


def test_a_download_helper_given_the_accelerator_does_not_pass_for_a_migrated_engine(tmp_path) -> None:
    """deep-person-reid's main.py: `build_datamanager(cfg)` builds data sets that download
    themselves (three files down: a table of data set classes, `self.download_dataset`),
    named and put under `main_process_first()`, which threads the Accelerator into the
    helper. The model and optimizer still go to an engine of another file that trains on
    the data manager's loaders: the set-up stays refused, not half-prepared."""
    datasets = textwrap.dedent('''
        import urllib.request

        class Market:
            def __init__(self, root):
                self.download_dataset(root)

            def download_dataset(self, root):
                urllib.request.urlretrieve("http://example.com/market.zip", root + "/market.zip")

        TABLE = {"market": Market}

        class Manager:
            def __init__(self, name, root):
                self.train_set = TABLE[name](root)
                self.train_loader = None
    ''')
    base = "class Base:\n    def __init__(self, manager, model, optimizer):\n        self.loader, self.model, self.optimizer = manager.train_loader, model, optimizer\n"
    engine = textwrap.dedent('''
        from .base import Base

        class Engine(Base):
            def run(self):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    (self.model(x) - y).pow(2).mean().backward()
                    self.optimizer.step()
    ''')
    engine_pkg = "from .engine import Engine\n"
    main = textwrap.dedent('''
        import torch
        import data
        import engines

        def build_manager(kind):
            if kind == "image":
                return data.Manager("market", "root")
            return None

        def main():
            manager = build_manager("image")
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            engines.Engine(manager, model, optimizer).run()

        if __name__ == "__main__":
            main()
    ''')
    folder = _project(tmp_path, **{"main.py": main, "data.py": datasets, "engines/__init__.py": engine_pkg, "engines/engine.py": engine, "engines/base.py": base})
    results = _results([folder])
    assert results["main.py"].after == main
    codes = [f.code for f in results["main.py"].findings]
    assert "AM951" in codes and "AM220" in codes, results["main.py"].findings


def test_a_one_part_import_is_followed_into_the_folder_init_paths_puts_on_sys_path(tmp_path) -> None:
    """CenterNet's main.py: `import _init_paths` (which runs `add_path(osp.join(this_dir,
    'lib'))`) then `from logger import Logger`, lib/logger.py: the import is the run's
    file, so the Logger class that keeps a SummaryWriter is known (AM520 at the call)."""
    init_paths = textwrap.dedent('''
        import os.path as osp
        import sys

        def add_path(path):
            if path not in sys.path:
                sys.path.insert(0, path)

        this_dir = osp.dirname(__file__)
        add_path(osp.join(this_dir, 'lib'))
    ''')
    logger = "from torch.utils.tensorboard import SummaryWriter\n\n\nclass Logger:\n    def __init__(self, path):\n        self.writer = SummaryWriter(path)\n\n    def scalar(self, tag, value, step):\n        self.writer.add_scalar(tag, value, step)\n"
    main = textwrap.dedent('''
        import _init_paths
        from logger import Logger
        import torch

        def main():
            logger = Logger("runs")
            model = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                optimizer.step()
                logger.scalar("loss", loss.item(), step)

        if __name__ == "__main__":
            main()
    ''')
    sources = {"main.py": main, "_init_paths.py": init_paths, "lib/logger.py": logger}
    folder = Path(_project(tmp_path, **sources))
    files = project.index({str(folder / p): t for p, t in sources.items()})
    assert files[str(folder / "main.py")].instances.get("logger") == (str(folder / "lib/logger.py"), "Logger")
    after = _results([str(folder)])["main.py"].after
    assert "if accelerator.is_main_process:\n        logger = Logger(\"runs\")" in after, after


def test_a_helper_object_handed_a_prepared_loader_is_told_it_reads_a_share(tmp_path) -> None:
    """open-reid: `metric = DistanceMetric(algorithm=...)` (built with nothing of the
    set-up), then `metric.train(model, train_loader)` after the training, which extracts
    features over the loader and fits a metric on them: with the loader prepared it fits on
    this process's share. Named at the last such call (AM914), with the unprepared loader
    as the remedy."""
    metric = textwrap.dedent('''
        import torch

        class DistanceMetric:
            def __init__(self, algorithm="euclidean"):
                self.algorithm = algorithm
                self.mean = None

            def train(self, model, loader):
                feats = [model(x) for x, _ in loader]
                self.mean = torch.cat(feats).mean(0)
    ''')
    main = textwrap.dedent('''
        import torch
        from dist_metric import DistanceMetric

        def main():
            model = torch.nn.Linear(4, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))))
            metric = DistanceMetric(algorithm="kissme")
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            metric.train(model, train_loader)

        if __name__ == "__main__":
            main()
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "dist_metric.py": metric})])
    told = [f.message for f in results["main.py"].findings if f.code == "AM914" and "metric.train" in f.message]
    assert told and "hand it the loader as it was before prepare()" in told[0], results["main.py"].findings


def test_a_picture_saved_with_pillow_is_a_file_the_helper_only_writes() -> None:
    """A helper that turns an array into a Pillow image, resizes it and saves it writes a
    file and does nothing else (pytorch-CycleGAN-and-pix2pix's util.save_image); a helper
    that hands the picture back, or calls another method of it, does more."""
    from migrator.analysis.only_writes import ModuleWriters, only_writes

    source = textwrap.dedent(
        """
        from PIL import Image

        def save_picture(array, path, wide=False):
            picture = Image.fromarray(array)
            if wide:
                picture = picture.resize((64, 32))
            picture.save(path)

        def picture_of(array, path):
            picture = Image.fromarray(array)
            picture.save(path)
            return picture

        def shown(array, path):
            picture = Image.fromarray(array)
            picture.show()
            picture.save(path)

        def text_page(page, path):
            with open(path, "w") as f:
                f.write(page.render())
        """
    )
    tree = ast.parse(source)
    module = ModuleWriters(tree)
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert only_writes(helpers["save_picture"], module) == 1
    assert only_writes(helpers["picture_of"], module) is None
    assert only_writes(helpers["shown"], module) is None
    assert only_writes(helpers["text_page"], module) == 1  # a document's text is formatting


def test_a_base_class_counts_when_a_file_the_run_only_reads_subclasses_it_for_the_run() -> None:
    """train.py builds `TrainOptions()` of options/train_options.py, a file the run left
    out, whose `parse()` is BaseOptions' (options/base_options.py, in the run): that base
    runs on every launched process. A subclass no file of the run builds says nothing."""
    sources = {
        "train.py": "from options.train_options import TrainOptions\nopt = TrainOptions().parse()\n",
        "options/__init__.py": "",
        "options/base_options.py": "class BaseOptions:\n    def parse(self):\n        return 1\n\n\nclass OtherBase:\n    pass\n",
        "options/train_options.py": "from .base_options import BaseOptions\n\n\nclass TrainOptions(BaseOptions):\n    pass\n",
        "options/test_options.py": "from .base_options import OtherBase\n\n\nclass TestOptions(OtherBase):\n    pass\n",
    }
    files = project.index(sources)
    among = {"train.py", "options/base_options.py"}
    assert project.subclassed_elsewhere(files, among) == {"options/base_options.py": ("BaseOptions",)}


def test_a_method_of_an_object_handed_to_another_files_function_is_code_other_files_run() -> None:
    """train.py picks its data set class by name from the `datasets` package
    (`eval('datasets.' + name)(...)`) and hands the object to `engine.validate`, which
    calls `data.score(...)`: each class of the package that defines `score` runs it for
    the run, on every process. A method the function never calls, or a class that does
    not define it, is not named; nor is a call only the main process makes."""
    sources = {
        "train.py": (
            "import datasets\nimport engine\nfrom models import Net\n\n"
            "name = 'pairs'\nvalid = eval('datasets.' + name)(root='.')\nnet = Net()\n"
            "engine.validate(valid, net=net)\n"
        ),
        "engine.py": "def validate(data, net):\n    data.score(net)\n    net.forward(1)\n",
        "models.py": "class Net:\n    def forward(self, x):\n        return x\n\n    def unused(self):\n        pass\n",
        "datasets/__init__.py": "from .pairs import PairSet as pairs\nfrom .triples import TripleSet as triples\n",
        "datasets/pairs.py": "class PairSet:\n    def score(self, net):\n        open('out.json', 'w').write('{}')\n",
        "datasets/triples.py": "class TripleSet:\n    def other(self):\n        pass\n",
    }
    files = project.index(sources)
    assert files["train.py"].picked["valid"] == (("datasets/pairs.py", "PairSet"), ("datasets/triples.py", "TripleSet"))
    called = project.called_elsewhere({p: t.encode() for p, t in sources.items()}, files)
    assert called["datasets/pairs.py"] == ("PairSet.score",)
    assert "datasets/triples.py" not in called
    assert called["models.py"] == ("Net", "Net.forward")


@pytest.mark.parametrize("flag, written_once", [
    ("torch.distributed.get_rank() == 0", True),
    ("args.local_rank in [-1, 0]", True),
    ("True", False),
])
def test_a_save_behind_a_flag_every_caller_sets_to_a_main_process_test_runs_once(tmp_path, flag, written_once) -> None:
    """lufficc/SSD's CheckPointer: `save_to_disk = dist_util.get_rank() == 0` in train.py,
    handed to the class, and `if not self.save_to_disk: return` before its torch.save. The
    class's file cannot tell what the flag means; every call of it in the run says it. A
    call that leaves the flag out (default None) saves nothing at all."""
    train = textwrap.dedent(f'''\
        import argparse

        import torch

        import engine
        from saver import Saver

        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=-1)
        args = parser.parse_args()
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
        to_disk = {flag}
        saver = Saver(model, "out", to_disk)
        engine.fit(model, optimizer, loader, saver)
    ''')
    fit = textwrap.dedent('''\
        import torch


        def fit(model, optimizer, loader, saver):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            saver.save("last")
    ''')
    saver = textwrap.dedent('''\
        import os

        import torch


        class Saver:
            def __init__(self, model, folder, to_disk=None):
                self.model = model
                self.folder = folder
                self.to_disk = to_disk

            def save(self, name):
                if not self.to_disk:
                    return
                torch.save(self.model.state_dict(), os.path.join(self.folder, name + ".pt"))
    ''')
    viewer = "from saver import Saver\nimport torch\n\nSaver(torch.nn.Linear(4, 1), 'out').save('view')\n"
    root = _project(tmp_path, **{"train.py": train, "engine.py": fit, "saver.py": saver, "viewer.py": viewer})
    results = _results([os.path.join(root, name) for name in ("train.py", "engine.py", "saver.py")])
    named = [f.code for f in results["saver.py"].findings]
    assert ("AM510" not in named) is written_once, results["saver.py"].findings


def test_a_second_learner_trained_beside_a_handed_model_is_named_where_it_is_driven(tmp_path) -> None:
    """pytorch-a2c's GAIL: main.py hands its policy to a trainer left as written (AM001 says
    so) and also drives `discr.update(...)`, a discriminator of a file the run only reads
    that owns its optimizer. AM916 names that call, beside the policy; the trainer's
    calls, which AM001 already covers, are not named again."""
    learner = textwrap.dedent('''
        import torch

        class Discriminator(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = torch.nn.Linear(3, 1)
                self.optimizer = torch.optim.Adam(self.trunk.parameters())

            def update(self, obs):
                loss = self.trunk(obs).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
    ''')
    fixture = FIXTURES_HELPERS.parents[2] / "project-rl-set-up-seeds-its-environments" / "input"
    main = (fixture / "main.py").read_text().replace(
        "from trainer import Trainer\n", "from trainer import Trainer\nfrom learner import Discriminator\n"
    ).replace("agent = Trainer(policy, lr=0.01)\n", "agent = Trainer(policy, lr=0.01)\ndiscr = Discriminator()\n").replace(
        "    loss = agent.update(", "    discr.update(obs.to(device))\n    loss = agent.update("
    )
    files = {name: (fixture / name).read_text() for name in ("envs.py", "model.py", "trainer.py")}
    folder = Path(_project(tmp_path, **files, **{"main.py": main, "learner.py": learner}))
    results = _results([str(folder / name) for name in ("main.py", "envs.py", "model.py", "trainer.py")])
    driven = [f for f in results["main.py"].findings if f.code == "AM916"]
    assert [f.start.line for f in driven] == [main.splitlines().index("    discr.update(obs.to(device))") + 1], driven
    assert "trains beside `policy`" in driven[0].message and "learner.py" in driven[0].message
    assert results["main.py"].after == main


@pytest.mark.parametrize("rank, named", [("i", True), ("int(os.environ['RANK'])", False)])
def test_a_path_named_by_a_rank_parameter_is_one_per_process_unless_callers_count_items(tmp_path, rank, named) -> None:
    """pytorch-a2c's `make_env(env_id, seed, rank, log_dir)` names its Monitor file
    `<log_dir>/<rank>.monitor.csv`, and `make_vec_envs` calls it for `i in range(count)`:
    that `rank` is an environment's index, the same N names on every process (AM517).
    Given the process's rank, the file is each process's own."""
    envs = textwrap.dedent(f'''
        import os
        from stable_baselines3.common.monitor import Monitor

        def make_env(env, seed, rank, log_dir):
            def _thunk():
                return Monitor(env, os.path.join(log_dir, str(rank)))
            return _thunk

        def make_vec_envs(env, seed, count, log_dir):
            return [make_env(env, seed, {rank}, log_dir)() for i in range(count)]
    ''')
    main = "import torch\nfrom envs import make_vec_envs\n\nenvs = make_vec_envs(None, 1, 4, 'logs')\n"
    results = _results([_project(tmp_path, **{"main.py": main, "envs.py": envs})])
    kept_open = [f for f in results["envs.py"].findings if f.code == "AM517"]
    assert bool(kept_open) is named, results["envs.py"].findings
    if named:
        assert "Monitor()" in kept_open[0].message and "give each process a file of its own" in kept_open[0].message


def test_a_module_whose_gradients_are_cleared_by_its_own_zero_grad_is_no_optimizer() -> None:
    """pytorch-a2c's ACKTR keeps the policy (`self.actor_critic = actor_critic`) and calls
    `self.actor_critic.zero_grad()` before its Fisher loss, clipping
    `self.actor_critic.parameters()` after: a module, not the optimizer AM914 had said
    `evaluate(actor_critic, ...)` receives (an optimizer factory reading `model.parameters()`
    makes no model of its parameter either)."""
    from migrator.project.index import _functions

    functions = _functions(ast.parse(textwrap.dedent('''\
        import torch


        class Agent:
            def __init__(self, actor_critic, lr):
                self.actor_critic = actor_critic
                self.optimizer = torch.optim.SGD(actor_critic.parameters(), lr=lr)

            def update(self, obs):
                self.actor_critic.zero_grad()
                loss = self.actor_critic(obs).sum()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.actor_critic.parameters(), 0.5)
                self.optimizer.step()


        def clear(opt):
            opt.zero_grad()
    ''')))
    assert "actor_critic" not in dict(functions["Agent"].param_roles)
    assert dict(functions["clear"].param_roles) == {"opt": "optimizer"}


def test_a_class_built_on_torch_s_optimizer_gets_no_accelerator_of_its_own(tmp_path) -> None:
    """pytorch-a2c's KFACOptimizer(optim.Optimizer) keeps the model it is handed and an SGD
    it steps inside its own `step`: an optimizer its user builds, not a set-up to give an
    Accelerator and prepare in its `__init__`."""
    kfac = textwrap.dedent('''\
        import torch
        import torch.optim as optim


        class KFACOptimizer(optim.Optimizer):
            def __init__(self, model, lr=0.25):
                super().__init__(model.parameters(), dict(lr=lr))
                self.model = model
                self.optim = optim.SGD(model.parameters(), lr=lr)

            def step(self):
                self.optim.step()
    ''')
    results = _results([_project(tmp_path, **{"kfac.py": kfac})])
    assert results["kfac.py"].after == kfac, results["kfac.py"].after
    assert "AM001" not in {f.code for f in results["kfac.py"].findings}


def test_a_writer_some_runs_do_without_is_not_named_where_it_is_handed(tmp_path) -> None:
    """3D-ResNets makes `tb_writer = SummaryWriter(...)` on the master node only and None
    elsewhere, and hands it to `train_epoch`, which tests `if tb_writer is not None`: its uses
    there need no guard, and there is no AM520 at the making for them to point to."""
    engine = textwrap.dedent('''\
        import torch


        def train_epoch(epoch, loader, model, opt, tb_writer=None):
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if tb_writer is not None:
                tb_writer.add_scalar("train/loss", loss.item(), epoch)
    ''')
    train = textwrap.dedent('''\
        import os
        import torch
        from torch.utils.tensorboard import SummaryWriter
        from engine import train_epoch

        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
        loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
        if int(os.environ.get("RANK", 0)) == 0:
            tb_writer = SummaryWriter(log_dir="runs")
        else:
            tb_writer = None
        for epoch in range(3):
            train_epoch(epoch, loader, model, opt, tb_writer)
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "engine.py": engine})])
    assert not [f for r in results.values() for f in r.findings if f.code == "AM520"], results["engine.py"].findings


def test_a_helper_of_another_file_wrapping_the_model_is_named_with_the_batches_its_wrap_moved(tmp_path) -> None:
    """3D-ResNets' `make_data_parallel(model, ...)` (model.py) wraps the model in
    DataParallel, which moved every batch onto the GPU: AM219 says to drop the call, and
    that batches of loaders left out of prepare() then need a move of their own."""
    helpers = textwrap.dedent('''\
        import torch


        def make_data_parallel(model, device):
            return torch.nn.DataParallel(model).to(device)
    ''')
    main = textwrap.dedent('''\
        import torch
        from helpers import make_data_parallel

        device = torch.device("cuda")
        model = make_data_parallel(torch.nn.Linear(4, 2), device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
        loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    ''')
    results = _results([_project(tmp_path, **{"main.py": main, "helpers.py": helpers})])
    named = [f.message for f in results["main.py"].findings if f.code == "AM219"]
    assert named and "drop the call" in named[0] and "need `.to(accelerator.device)`" in named[0], results["main.py"].findings


def test_a_template_layer_only_copied_in_a_model_picked_by_module_name_is_known_where_the_model_is_built(tmp_path, monkeypatch) -> None:
    """Chinese-Text-Classification: run.py picks its model's module by name
    (`x = import_module('models.' + name)`, then `x.Model(config)`) and hands the model to
    train() of another file; models/Transformer.py keeps `self.encoder`, a module of its
    own, only to stack `copy.deepcopy` copies of it, so its parameters never get a gradient
    and DDP stops at the second step: the layer is known where the model is built (AM228
    names it there in a set-up left as written, or gives its Accelerator the option)."""
    transformer = textwrap.dedent('''\
        import copy
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.feed_forward = nn.Linear(dim, dim)

            def forward(self, x):
                return self.feed_forward(x)


        class Model(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.encoder = Encoder(config.dim)
                self.encoders = nn.ModuleList([copy.deepcopy(self.encoder) for _ in range(2)])
                self.fc = nn.Linear(config.dim, 2)

            def forward(self, x):
                for encoder in self.encoders:
                    x = encoder(x)
                return self.fc(x)
    ''')
    run = textwrap.dedent('''\
        import sys
        from importlib import import_module
        from train_eval import train

        x = import_module('models.' + sys.argv[1])
        config = x.Config()
        model = x.Model(config)
        train(config, model)
    ''')
    train_eval = textwrap.dedent('''\
        import torch


        def train(config, model):
            optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
            for x, y in config.batches:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.load_state_dict(torch.load(config.save_path))
    ''')
    config = "class Config:\n    dim = 4\n    lr = 0.1\n    batches = []\n    save_path = 'best.pt'\n"
    files = {"run.py": run, "train_eval.py": train_eval, "models/Transformer.py": transformer + "\n\n" + config}
    files["models/Linear.py"] = "import torch.nn as nn\n\n\nclass Model(nn.Linear):\n    pass\n\n\n" + config
    root = Path(_project(tmp_path, **files))
    sources = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.py")}
    monkeypatch.chdir(root)
    assert project.linked(sources) == set(sources)
    indexed = project.index({p: data.decode() for p, data in sources.items()})
    built = {c.target for c in indexed["run.py"].calls if c.spelling == "x.Model"}
    assert built == {("models/Transformer.py", "Model"), ("models/Linear.py", "Model")}
    unused = dict(project.unused_models(sources, indexed)["run.py"])
    assert unused == {"x.Model": "layer self.encoder Encoder of `Model`, whose copies (`copy.deepcopy`) run in its place, in models/Transformer.py"}


@pytest.mark.parametrize("test, named", [("'fc.weight' in name", False), ("name.endswith('fc.weight')", False), ("name == 'fc.weight'", True)])
def test_a_parameter_name_searched_for_its_end_keeps_matching_under_ddp_s_prefix(tmp_path, test, named) -> None:
    """A max-norm constraint over `model.named_parameters()` that picks its weight by
    `'fc.weight' in name` still finds `module.fc.weight` on the DDP wrapper: no AM205
    (reader R20's false alarm); an exact `name == 'fc.weight'` no longer matches."""
    script = textwrap.dedent(f'''\
        import torch

        model = torch.nn.Sequential()
        model.add_module("fc", torch.nn.Linear(4, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
        for x, y in torch.utils.data.DataLoader(data, batch_size=4):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            with torch.no_grad():
                for name, param in model.named_parameters():
                    if {test}:
                        param.clamp_(-1, 1)
    ''')
    results = _results([_project(tmp_path, **{"train.py": script})])
    uses = [f for f in results["train.py"].findings if f.code == "AM205"]
    assert bool(uses) is named, results["train.py"].findings


def test_a_keyword_only_or_starred_rank_parameter_in_a_path_is_read_without_failing(tmp_path) -> None:
    """The loop-count reading of a rank-named parameter (analysis/saving.py) looks the
    parameter up among the positional ones; a keyword-only `rank` or a `*ranks` is not
    there, and the file is still migrated, not failed with an internal error."""
    script = textwrap.dedent('''\
        import os
        import torch

        def make(log_dir, *, rank):
            def _thunk():
                with open(os.path.join(log_dir, str(rank)), "w") as f:
                    f.write("x")
            return _thunk

        def many(log_dir, *ranks):
            return [open(os.path.join(log_dir, str(r)), "w") for r in ranks]

        fns = [make("logs", rank=i) for i in range(3)]
        many("logs", 0, 1)
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in torch.randn(3, 2, 2):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    ''')
    result = _results([_project(tmp_path, **{"train.py": script})])["train.py"]
    assert result.status is not FileStatus.FAILED, result.error


def test_both_classes_a_name_may_hold_are_the_code_other_files_run(tmp_path) -> None:
    """MUNIT's train.py binds `trainer` to MUNIT_Trainer in one branch and UNIT_Trainer in the
    next, then calls `trainer.resume(...)`: both classes' resume run on every process. The
    file's Accelerator goes into the first class; the second class's load gets no
    map_location from it, so it is named with the remedy (reader R18, session 32)."""
    trainer = textwrap.dedent('''\
        import torch


        class First:
            def __init__(self, size):
                self.net = torch.nn.Linear(size, 2)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def update(self, x, y):
                self.opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(self.net(x), y)
                loss.backward()
                self.opt.step()

            def resume(self, path):
                self.net.load_state_dict(torch.load(path + "/first.pt"))


        class Second:
            def __init__(self, size):
                self.net = torch.nn.Linear(size, 2)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def update(self, x, y):
                self.opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(self.net(x), y)
                loss.backward()
                self.opt.step()

            def resume(self, path):
                self.net.load_state_dict(torch.load(path + "/second.pt"))
    ''')
    train = textwrap.dedent('''\
        import sys
        import torch
        from trainer import First, Second

        if sys.argv[1] == "first":
            trainer = First(4)
        elif sys.argv[1] == "second":
            trainer = Second(4)
        else:
            sys.exit("first or second")
        trainer.resume("checkpoints")
        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
        loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
        for x, y in loader:
            trainer.update(x, y)
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "trainer.py": trainer})])
    loads = {f.start.line: f.message for f in results["trainer.py"].findings if f.code == "AM521"}
    assert set(loads) == {16, 31}, results["trainer.py"].findings
    assert 'no Accelerator reaches `resume`; pass `map_location="cpu"` there' in loads[31]


def test_a_class_of_another_file_renamed_in_the_caller_is_followed(tmp_path) -> None:
    """Autoformer's run.py says `Exp = Exp_Main` in main(), then `exp = Exp(args)` and
    `exp.test(setting)`: the methods it calls are code other files run on every process,
    so the test's writes are named (reader R24: result.txt appended N times, unnamed)."""
    experiment = textwrap.dedent('''\
        import torch


        class Experiment:
            def __init__(self, size):
                self.model = torch.nn.Linear(size, 1)

            def train(self, loader):
                opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    torch.nn.functional.mse_loss(self.model(x), y).backward()
                    opt.step()

            def test(self, setting):
                f = open("result.txt", "a")
                f.write(setting + "\\n")
                f.close()
    ''')
    run = textwrap.dedent('''\
        import torch
        from experiment import Experiment


        def main():
            Exp = Experiment
            data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
            exp = Exp(4)
            exp.train(loader)
            exp.test("first")


        if __name__ == "__main__":
            main()
    ''')
    results = _results([_project(tmp_path, **{"run.py": run, "experiment.py": experiment})])
    writes = [f for f in results["experiment.py"].findings if f.code == "AM517"]
    assert [f.start.line for f in writes] == [16], results["experiment.py"].findings


@pytest.mark.parametrize("caller_seeds", [False, True])
def test_a_library_split_in_code_other_files_run_is_named_unless_a_caller_seeds_it(tmp_path, caller_seeds) -> None:
    """ClusterGCN's clustering.py splits each cluster with `train_test_split` and no
    `random_state`, called from main.py, which seeds only torch: every process draws its own
    split (reader R24). A caller that seeds NumPy alike makes the draws agree."""
    machine = textwrap.dedent('''\
        import torch
        from sklearn.model_selection import train_test_split


        class Machine:
            def __init__(self, nodes):
                self.nodes = nodes

            def decompose(self):
                self.train_nodes, self.test_nodes = train_test_split(self.nodes, test_size=0.2)
    ''')
    seed = "    np.random.seed(0)\n" if caller_seeds else ""
    main = (
        "import numpy as np\nimport torch\nfrom machine import Machine\n\n\ndef main():\n"
        "    torch.manual_seed(0)\n" + seed + "    machine = Machine(list(range(100)))\n    machine.decompose()\n"
        "    model = torch.nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for node in machine.train_nodes:\n        opt.zero_grad()\n        model(torch.randn(1, 4)).sum().backward()\n"
        "        opt.step()\n\n\nif __name__ == \"__main__\":\n    main()\n"
    )
    results = _results([_project(tmp_path, **{"main.py": main, "machine.py": machine})])
    splits = [f for f in results["machine.py"].findings if f.code == "AM227"]
    if caller_seeds:
        assert not splits, splits
    else:
        assert [f.start.line for f in splits] == [10], results["machine.py"].findings
        assert "none seeds NumPy first: pass `random_state=0` here" in splits[0].message


def test_a_load_helper_of_a_handed_model_is_not_sent_to_the_main_process(tmp_path) -> None:
    """BigGAN's train.py calls `utils.load_weights(G, ...)` on the model it hands to a
    training left as written: a load changes the model, so every process makes it; a
    helper that only reads the state (`utils.show(G)`) may run on the main process alone
    (reader R23: the advice to load on the main process only broke the resume)."""
    files = {
        "models.py": (
            "import torch\n\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = torch.nn.Linear(4, 4)\n        self.optim = torch.optim.SGD(self.parameters(), lr=0.1)\n\n"
            "    def forward(self, x):\n        return self.fc(x)\n"
        ),
        "engine.py": (
            "def make_train(G):\n    def train(x):\n        G.optim.zero_grad()\n        loss = G(x).pow(2).mean()\n"
            "        loss.backward()\n        G.optim.step()\n        return loss.item()\n    return train\n"
        ),
        "utils.py": (
            "import torch\n\n\ndef load_weights(G, path):\n    G.load_state_dict(torch.load(path))\n\n\n"
            "def show(G):\n    print(G.state_dict().keys())\n"
        ),
        "train.py": (
            "import sys\nimport torch\nimport engine\nimport models\nimport utils\n\ndevice = \"cuda\"\n"
            "G = models.Net().to(device)\nif len(sys.argv) > 1:\n    utils.load_weights(G, sys.argv[1])\nutils.show(G)\n"
            "train = engine.make_train(G)\nfor x in torch.randn(10, 8, 4):\n    train(x.to(device))\n"
        ),
    }
    results = _results([_project(tmp_path, **files)])
    notes = {f.start.line: f.message for f in results["train.py"].findings if f.code == "AM205"}
    assert "hand `utils.load_weights` `accelerator.unwrap_model(G)`)" in notes[10], notes
    assert "hand `utils.show` `accelerator.unwrap_model(G)`, on the main process only" in notes[11], notes


def test_a_function_handed_to_a_partial_by_another_file_is_code_other_files_run(tmp_path) -> None:
    """BigGAN's train.py makes `sample = functools.partial(utils.sample, G=G, ...)` and its
    training calls the partial: `utils.sample` runs on every process, and its
    `nn.parallel.data_parallel(G, ...)` fails on all but the first (AM919, reader R23)."""
    utils = textwrap.dedent('''\
        import torch
        import torch.nn as nn


        def sample(G, parallel):
            z = torch.randn(8, 4)
            with torch.no_grad():
                if parallel:
                    return nn.parallel.data_parallel(G, (z,))
                return G(z)
    ''')
    train = textwrap.dedent('''\
        import functools
        import torch
        import utils

        G = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(G.parameters(), lr=0.1)
        sampler = functools.partial(utils.sample, G=G, parallel=True)
        data = torch.utils.data.TensorDataset(torch.randn(32, 4))
        for (x,) in torch.utils.data.DataLoader(data, batch_size=8):
            opt.zero_grad()
            G(x).pow(2).mean().backward()
            opt.step()
        print(sampler().shape)
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "utils.py": utils})])
    calls = [f for f in results["utils.py"].findings if f.code == "AM919"]
    assert [f.start.line for f in calls] == [9], results["utils.py"].findings
    assert "other files of the run call this code on every process" in calls[0].message


def test_a_part_a_forward_runs_under_a_grad_switch_is_named_where_other_files_train_it(tmp_path) -> None:
    """BigGAN's G_D runs its generator under `torch.set_grad_enabled(train_G)`, and the
    discriminator's step passes `train_G=False`: the generator's parameters get no gradient
    on those steps, and DDP over the pair stops at the next one without
    find_unused_parameters=True (reader R23's 2-process probe). A switch that is no
    parameter of forward is not this."""
    models = textwrap.dedent('''\
        import torch
        import torch.nn as nn


        class Pair(nn.Module):
            def __init__(self, G, D):
                super().__init__()
                self.G = G
                self.D = D

            def forward(self, z, train_G=False):
                with torch.set_grad_enabled(train_G):
                    fake = self.G(z)
                with torch.set_grad_enabled(True):
                    return self.D(fake)
    ''')
    train = textwrap.dedent('''\
        import torch
        import models

        G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
        pair = models.Pair(G, D)
        opt_G = torch.optim.SGD(G.parameters(), lr=0.1)
        opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
        data = torch.utils.data.TensorDataset(torch.randn(32, 4))
        for (z,) in torch.utils.data.DataLoader(data, batch_size=8):
            opt_D.zero_grad()
            pair(z).mean().backward()
            opt_D.step()
            opt_G.zero_grad()
            (-pair(z, train_G=True).mean()).backward()
            opt_G.step()
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "models.py": models})])
    switched = [f for f in results["models.py"].findings if f.code == "AM230"]
    assert [(f.start.line, f.start.col) for f in switched] == [(12, 14)], results["models.py"].findings
    assert "`self.G(...)` under `torch.set_grad_enabled(train_G)`" in switched[0].message


def test_a_file_removed_by_code_other_files_run_is_named_as_a_race(tmp_path) -> None:
    """BigGAN's MetricsLogger, built by train.py on every process, removes its old log:
    `if os.path.exists(self.fname): os.remove(self.fname)`. The process that finds the file
    gone after the others checked fails with FileNotFoundError (reader R26's probe)."""
    logs = textwrap.dedent('''\
        import os
        import torch


        class MetricsLogger:
            def __init__(self, fname):
                self.fname = fname
                if os.path.exists(self.fname):
                    os.remove(self.fname)

            def log(self, value):
                print(value)
    ''')
    train = textwrap.dedent('''\
        import torch
        import logs

        logger = logs.MetricsLogger("metrics.jsonl")
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.utils.data.TensorDataset(torch.randn(32, 4))
        for (x,) in torch.utils.data.DataLoader(data, batch_size=8):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            logger.log(loss.item())
    ''')
    results = _results([_project(tmp_path, **{"train.py": train, "logs.py": logs})])
    removals = [f for f in results["logs.py"].findings if f.code == "AM517"]
    assert [f.start.line for f in removals] == [9], results["logs.py"].findings
    assert "fails (FileNotFoundError)" in removals[0].message
