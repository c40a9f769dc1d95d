"""AM223: a training setting drawn at random, differently on every process."""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis import dotted_name
from migrator.analysis.random_draws import DRAWS as _DRAWS, SEEDS as _SEEDS
from migrator.analysis.walk import descendants
from migrator.rule import Example, Rule

# Settings that decide how a run trains: in a file that only hands its set-up on (a
# `main.py` building a `Solver(config, ...)`), only these are reported.
_TRAINING_WORDS = re.compile(r"(lr|learning_rate|epoch|step|iter|batch|decay|warmup)", re.IGNORECASE)


class RandomSettingPerProcess(Rule):
    """## What it does
    Reports a value drawn at random outside any loop (`lr = random.random() * 5e-4`,
    `epochs = random.choice([100, 150])`) that ends up in a setting of the run: assigned
    to an attribute (`config.num_epochs = epochs`) or passed by keyword, in a file the
    migration gives an Accelerator or that hands its set-up to a training function or
    class of another file of the run (in any other file importing torch, only settings
    named like `lr`, `epochs`, `steps`, `batch_size`, `decay`), when no `random.seed(...)`
    (or NumPy's) came before it. Nothing is changed.

    ## Why is this bad?
    Under `accel-launch` every process runs the script and draws its own value: the
    processes train with different learning rates and, for a number of epochs or steps,
    a different number of them, so one waits forever in a collective the others never
    reach. A random search meant one draw per run.

    ## What to do by hand
    Seed the generator with the same value on every process before the draw
    (`random.seed(args.seed)`), or draw on the main process and share the value
    (`accelerate.utils.broadcast_object_list`).

    ## Example
    ```python
    epochs = random.choice([100, 150, 200])
    config.num_epochs = epochs
    ```

    Use instead:
    ```python
    random.seed(args.seed)  # the same on every process
    epochs = random.choice([100, 150, 200])
    config.num_epochs = epochs
    ```
    """

    code = "AM223"
    name = "random-setting-per-process"
    message = "`{draw}` draws a different value on every process, and it sets `{setting}`: the processes train with different settings (a different number of epochs waits forever); seed `random` alike on every process first"
    examples = (
        Example(
            before=(
                "import random\nimport torch\n\nmodel = torch.nn.Linear(2, 1)\n"
                "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "epochs = random.choice([2, 3])\nconfig.epochs = epochs\n"
                "for epoch in range(config.epochs):\n    model(torch.ones(2)).sum().backward()\n    optimizer.step()\n"
            ),
            at=("6:10",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        trains_here = analysis.migrating or bool(self.ctx.config.project_calls)
        if not trains_here and not any(q == "torch" or q.startswith("torch.") for q in analysis.imports.aliases.values()):
            return
        seeded = [c for c in analysis.facts.calls if (c.qualified or "") in _SEEDS]
        for c in analysis.facts.calls:
            if (c.qualified or "") not in _DRAWS or c.loops:
                continue
            if any(analysis.order(s.node) < analysis.order(c.node) for s in seeded):
                continue
            setting = self._setting_fed(c)
            if setting is None or "seed" in setting.lower():
                continue  # a seed drawn per process is what the processes should differ in
            if trains_here or _TRAINING_WORDS.search(setting):
                shown = f"{dotted_name(c.node.func) or c.qualified}()"
                self.report(c.node, draw=shown, setting=setting)

    def _setting_fed(self, draw) -> str | None:
        """The attribute or keyword the drawn value reaches (through names, two hops)."""
        analysis = self.analysis
        names: set[str] = set()
        for b in analysis.facts.bindings:
            if b.value is not None and any(n is draw.node for n in descendants(b.value)) and b.scope is draw.scope:
                if "." in b.name:
                    return b.name
                names.add(b.name)
        for _ in range(2):
            for b in analysis.facts.bindings:
                if b.value is None or b.scope is not draw.scope or b.name in names:
                    continue
                if any(_mentions(b.value, n) for n in names):
                    if "." in b.name:
                        return b.name
                    names.add(b.name)
        for c in analysis.facts.calls:
            if c.scope is not draw.scope:
                continue
            for arg in c.node.args:
                if arg.keyword is not None and any(_mentions(arg.value, n) for n in names):
                    return f"{dotted_name(c.node.func) or 'a call'}({arg.keyword.value}=...)"
        return None


def _mentions(tree: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in descendants(tree))
