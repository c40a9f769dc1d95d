"""AM212: a `DistributedSampler` made by hand."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.distributed import sampler_arg_edit
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class DistributedSampler(Rule):
    """## What it does
    Removes a hand-made `DistributedSampler`: its definition (also
    `DistributedSampler(ds) if args.distributed else None`), the `sampler=` argument of
    the DataLoader, and `sampler.set_epoch(epoch)` (with an `if` that only guarded it),
    also when reached through the loader (`loader.sampler.set_epoch(epoch)`,
    `self.train_data.sampler.set_epoch(epoch)`) once no DistributedSampler is left.
    The DataLoader gets the sampler's shuffling: `shuffle=(train_sampler is None)` becomes
    `shuffle=True` (`shuffle=False` for `DistributedSampler(ds, shuffle=False)`).
    `RandomSampler(ds) if args.local_rank == -1 else DistributedSampler(ds)` keeps the
    `RandomSampler(ds)`.

    ## Why is this bad?
    `accelerator.prepare(loader)` shards the data across processes itself and reshuffles
    every epoch. A hand-made `DistributedSampler` needs a process group at construction
    (it fails on one process), and sharding twice gives each process 1/N² of the data.

    ## Example
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=(sampler is None))
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
    ```

    Use instead:
    ```python
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    for epoch in range(epochs):
        ...
    ```

    In a run of several files, a loader another file's function hands back built with a
    DistributedSampler (`build_loader(config)`) is kept out of prepare() (AM201 says so);
    where the file prepares it anyway, the call is named: it would be sharded twice, so
    the file is left as written until the sampler goes there or the prepare() does.

    ## Known limits
    A sampler used in other ways (`len(sampler)`, passed to a function) is reported,
    not removed.
    """

    code = "AM212"
    name = "distributed-sampler"
    message = "`{name}` shards the data by hand; accelerator.prepare() shards the DataLoader{note}"
    fix_title = "Remove the DistributedSampler; the prepared DataLoader shards and shuffles"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "ds = torch.utils.data.TensorDataset(torch.zeros(8, 2))\n"
                "sampler = DistributedSampler(ds)\n"
                "loader = DataLoader(ds, batch_size=2, sampler=sampler, shuffle=(sampler is None))\n"
                "for epoch in range(2):\n    sampler.set_epoch(epoch)\n"
                "    for (x,) in loader:\n        model(x).sum().backward()\n"
            ),
            after=(
                "import torch\nfrom torch.utils.data import DataLoader\nfrom runtime import Accelerator\n\n"
                "accelerator = Accelerator()\n\n"
                "model = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "ds = torch.utils.data.TensorDataset(torch.zeros(8, 2))\n"
                "loader = DataLoader(ds, batch_size=2, shuffle=True)\n"
                "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
                "for epoch in range(2):\n"
                "    for (x,) in loader:\n        accelerator.backward(model(x).sum())\n"
            ),
            at=("7:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        if analysis.patterns is None or not analysis.migrating:
            return
        self._sharded_elsewhere()
        facts = analysis.patterns.distribution
        for sampler in facts.samplers:
            if sampler.replacement is not None:
                edits = [replace(sampler.binding.value, sampler.replacement)]  # type: ignore[arg-type]
                self.report(sampler.statement, edits=edits, remove_imports=facts.import_cleanup, name=sampler.name, note="")
            elif sampler.blockers:
                blocker = sampler.blockers[0]
                use = " ".join(cst.Module([]).code_for_node(analysis.statement_of(blocker) or blocker).split())
                rebound = any(b.target is blocker for b in analysis.facts.bindings)
                if rebound:  # `sampler = RepeatSampler(...)` in another branch: a sampler prepare() does not replace
                    note = (
                        f" (left as written: the name is also bound by `{use[:60]}`, a sampler the Accelerator's "
                        "sharding does not replace; the loader's `sampler=` must stay)"
                    )
                else:
                    note = f" (left as written: it is also used in `{use[:60]}`; drop that use, then the sampler)"
                self.report(sampler.statement, name=sampler.name, note=note)
            else:
                self.report(sampler.statement, edits=facts.removal(sampler.statement), name=sampler.name, note="")
        orphans = facts.orphan_set_epochs
        together = facts.removal(orphans[0]) if orphans else None  # also carries the `sampler=` edits
        for arg in facts.inline_samplers:
            edits = together if together is not None else [sampler_arg_edit(arg)]
            self.report(arg.arg, edits=edits, remove_imports=facts.import_cleanup, name="DistributedSampler(...)", note="")
        for statement in orphans:
            code = cst.Module([]).code_for_node(statement).strip()
            note = f" (`{code[:60]}` goes with it: a plain sampler has no set_epoch, the prepared loader reshuffles)"
            self.report(statement, edits=facts.removal(statement), name="DistributedSampler", note=note)

    def _sharded_elsewhere(self) -> None:
        """A loader another file's builder shards, prepared here too (the migration keeps
        such a loader out of prepare(): analysis/plan.py, SHARDED)."""
        sharded = set(self.ctx.config.project_sharded_loaders)
        prepared = self.analysis.prepared
        for c in self.analysis.facts.calls if sharded else ():
            bound = self.analysis.parent(c.node)
            names = {dotted_name(t.target) for t in bound.targets} if isinstance(bound, cst.Assign) else set()
            if c.func in sharded and names & prepared:
                note = (
                    f" again: `{c.func}(...)` hands back loaders another file of the project builds with a "
                    "DistributedSampler, so each process would read 1/N² of the data (left as written: build them "
                    "there with a plain sampler, `shuffle=True` for training, then prepare them here)"
                )
                self.report(c.node, name="DistributedSampler", note=note)
