"""AM227: a train/validation split drawn at random, differently on every process."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.random_draws import SEED_ALL, per_process_seed
from migrator.analysis.reach import run_by_other_files
from migrator.rule import Example, Rule

# The split functions, and the seeds that make their draws alike on every process
# (the generator each one draws from when it is given none of its own).
_SPLITS = {
    "torch.utils.data.random_split": ("generator", 2, {"torch.manual_seed", "torch.random.manual_seed"}),
    "torch.utils.data.dataset.random_split": ("generator", 2, {"torch.manual_seed", "torch.random.manual_seed"}),
    "sklearn.model_selection.train_test_split": ("random_state", None, {"numpy.random.seed"}),
}
# A script whose split differs per process (AM958 shows the same one: rules import no rule).
_UNSEEDED_SPLIT = (
    "import torch\nfrom torch.utils.data import DataLoader, TensorDataset, random_split\n\n"
    "data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))\n"
    "train_set, val_set = random_split(data, [48, 16])\n"
    "loader = DataLoader(train_set, batch_size=8, shuffle=True)\n"
    "model = torch.nn.Linear(4, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x, y in loader:\n    optimizer.zero_grad()\n    ((model(x) - y) ** 2).mean().backward()\n"
    "    optimizer.step()\n"
)


class DataSplitPerProcess(Rule):
    """## What it does
    Reports a data set split at random with no seed of its own in a script that trains
    under the Accelerator (or that the migration gives one): `random_split(data, [n_train,
    n_val])` without `generator=`, `train_test_split(...)` without `random_state=`, where
    no `torch.manual_seed(...)` (for `random_split`) or `np.random.seed(...)` (for
    `train_test_split`), the same on every process, comes first. The migration of such a
    script is not written (AM958 says why); nothing is changed.

    ## Why is this bad?
    Under `accel-launch` every process runs the script and draws its own split: a sample
    one process holds out for validation is a training sample on another, so the
    validation metrics gathered over the processes score data the model trained on, and
    the prepared loader shards N different training sets. On one process nothing shows.

    ## Example
    ```python
    train_set, val_set = random_split(dataset, [n_train, n_val])
    ```

    Use instead: the same split on every process
    ```python
    train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
    ```
    (or `torch.manual_seed(args.seed)` before it; for scikit-learn, `random_state=0`).

    In a run of several files, a call of another file's helper that does the same by hand
    (SR-GNN's `split_validation`: `np.random.shuffle` of the indices, then `[:n_train]` and
    `[n_train:]`) is reported too, unless the generator it draws from is seeded first; so
    is a split in a launched script that drives a model object of the run, and a library
    split in code other files of the run call on every process, unless those files seed the
    generator it draws from first.

    ## Known limits
    Splits written by hand in the script itself (`np.random.permutation` of indices,
    `torch.randperm`) are not recognised. A seed in another function is not counted (it may run later), nor
    one under an `if` (`if args.seed is not None:` seeds nothing by default); a seed that
    adds the rank makes the draws differ and does not count either.
    """

    code = "AM227"
    name = "data-split-per-process"
    message = (
        "`{call}` splits the data at random without a seed, differently on every process: one process's validation "
        "samples are another's training samples; {remedy}"
    )
    examples = (Example(before=_UNSEEDED_SPLIT, at=("5:22",)),)

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        self._text_splits()
        # a launched script that drives a model object of the run splits on every process too
        if not (analysis.migrating or analysis.has_accelerator or self.ctx.config.project_drives):
            self._splits_run_elsewhere()
            return
        self._split_helpers()
        for c in analysis.facts.calls:
            spec = _SPLITS.get(c.qualified or "")
            if spec is None:
                continue
            keyword, position, seeds = spec
            if _given(c.node, keyword, position) or self._seeded_before(c, seeds | SEED_ALL):
                continue
            shown = f"{dotted_name(c.node.func) or c.qualified}(...)"
            suggestion = "generator=torch.Generator().manual_seed(0)" if keyword == "generator" else "random_state=0"
            seeded = "torch" if keyword == "generator" else "NumPy"
            self.report(c.node, call=shown, remedy=f"pass `{suggestion}` (or seed {seeded} alike on every process first)")

    def _splits_run_elsewhere(self) -> None:
        """In code other files of the run call on every process (ClusterGCN's
        `ClusteringMachine.decompose()`, splitting each cluster's nodes with
        `train_test_split`), a library split no seed of this file nor of those callers
        (`Config.project_seeded`) makes alike."""
        config = self.ctx.config
        if not config.run_callers:
            return
        for c in self.analysis.facts.calls:
            spec = _SPLITS.get(c.qualified or "")
            if spec is None:
                continue
            keyword, position, seeds = spec
            if _given(c.node, keyword, position) or self._seeded_before(c, seeds | SEED_ALL) or seeds & set(config.project_seeded):
                continue
            if not run_by_other_files(self.analysis, c.node, config.run_callers, config.project_unpassed):
                continue
            shown = f"{dotted_name(c.node.func) or c.qualified}(...)"
            suggestion = "generator=torch.Generator().manual_seed(0)" if keyword == "generator" else "random_state=0"
            seeded = "torch" if keyword == "generator" else "NumPy"
            remedy = (
                f"other files of the run call this code on every process, and none seeds {seeded} first: pass "
                f"`{suggestion}` here (or seed {seeded} alike on every process before the call)"
            )
            self.report(c.node, call=shown, remedy=remedy)

    def _text_splits(self) -> None:
        """`train_data, valid_data = train_data.split()` of a torchtext data set: drawn from
        Python's global `random` when no `random_state=` is given (prakashpandey9's
        load_data.py, reader R3, 29th session), in a script that is launched or in code
        other files of the run call on every process."""
        analysis = self.analysis
        texts = {
            b.name for b in analysis.facts.bindings
            if isinstance(b.value, cst.Call) and (analysis.imports.qualify(b.value.func) or "").startswith("torchtext.")
        }
        launched = analysis.migrating or analysis.has_accelerator
        for c in analysis.facts.calls:
            func = c.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "split" and dotted_name(func.value) in texts):
                continue
            if _given(c.node, "random_state", 3) or self._seeded_before(c, {"random.seed"} | SEED_ALL):
                continue
            if not launched and not run_by_other_files(analysis, c.node, self.ctx.config.run_callers, self.ctx.config.project_unpassed):
                continue
            remedy = (
                "torchtext draws the split from Python's `random`: call `random.seed(...)` with the same value on every "
                "process before it (or pass `random_state=` a state taken so)"
            )
            self.report(c.node, call=f"{dotted_name(func)}(...)", remedy=remedy)

    def _split_helpers(self) -> None:
        """A helper of another file that permutes with a global generator and cuts the
        data in two (SR-GNN's `split_validation`: `np.random.shuffle`; project/splits.py)."""
        helpers = {spelling: rest for spelling, *rest in self.ctx.config.project_splits}
        if not helpers:
            return
        for c in self.analysis.facts.calls:
            found = helpers.get(dotted_name(c.node.func) or "")
            if found is None:
                continue
            draw, seed, param, position = found
            if param:  # it reseeds with its own `seed=None` parameter: a seed set before is lost
                if _given(c.node, param, position if position >= 0 else None):
                    continue  # `seed=42`: the split seeds itself alike
                remedy = (
                    f"it draws its order with `{draw}` after `{seed}({param})`, which with `{param}` left to None "
                    f"seeds from the system: pass `{param}=` the same value on every process"
                )
            elif self._seeded_before(c, {seed} | SEED_ALL):
                continue
            else:
                remedy = f"it draws its order with `{draw}`: call `{seed}(...)` with the same value on every process before it"
            self.report(c.node, call=f"{dotted_name(c.node.func)}(...)", remedy=remedy)

    def _seeded_before(self, split, seeds: set[str]) -> bool:
        """A seed above the split in its own scope, or at module level, not per process."""
        analysis = self.analysis
        for c in analysis.facts.calls:
            if (c.qualified or "") not in seeds or analysis.order(c.node) > analysis.order(split.node):
                continue
            if (c.scope is split.scope or c.scope is analysis.module) and not per_process_seed(c.node) and not self._in_branch(c.node):
                return True
        return False

    def _in_branch(self, node: cst.CSTNode) -> bool:
        """`if args.seed is not None: torch.manual_seed(args.seed)`: a seed on some paths
        only (with the default, none at all)."""
        current = self.analysis.parent(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
            if isinstance(current, (cst.If, cst.Try, cst.While)):
                return True
            current = self.analysis.parent(current)
        return False


def _given(call: cst.Call, keyword: str, position: int | None) -> bool:
    """The split's own seed is passed (and is not None)."""
    for i, arg in enumerate(call.args):
        named = arg.keyword is not None and arg.keyword.value == keyword
        placed = arg.keyword is None and not arg.star and position is not None and i == position
        if named or placed:
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
    return False
