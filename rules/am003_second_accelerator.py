"""AM003: a second `Accelerator()` where one already exists."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.rule import Example, Rule


class SecondAccelerator(Rule):
    """## What it does
    Reports an `Accelerator(...)` constructed where another one already exists: a second
    one in the same function (or at module level), or one in a function when the module
    builds one too. Constructions in the two branches of one `if`/`else`
    (`Accelerator(log_with="all")` or `Accelerator()`, as the Hugging Face examples do), of
    a conditional expression, or of a `try`/`except` are alternatives, not a second one.

    ## Why is this bad?
    Accelerate keeps its process state in shared singletons: a second `Accelerator` reuses
    the first one's state, so its own `mixed_precision=`, `gradient_accumulation_steps=` or
    `cpu=` is silently ignored or raises, and objects prepared by one are unknown to the
    other (`save_state` misses them, `accumulate` counts the wrong micro steps). The
    bundled runtime has no singletons, so there the two set up the process group twice.
    Either way the script no longer means what it says.

    ## Example
    ```python
    accelerator = Accelerator()
    ...
    accelerator = Accelerator(mixed_precision="fp16")
    ```

    Use instead:
    ```python
    accelerator = Accelerator(mixed_precision="fp16")
    ```

    ## Known limits
    Two Accelerators built in two different functions are not reported: only one of the
    functions may run.
    """

    code = "AM003"
    name = "second-accelerator"
    message = "A second `Accelerator()` while the one on line {line} exists: they share (or fight over) one process state"
    examples = (
        Example(
            before=(
                "from runtime import Accelerator\n\naccelerator = Accelerator()\n\n"
                "def main():\n    acc = Accelerator(gradient_accumulation_steps=4)\n"
            ),
            at=("6:11",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        made: list[cst.Call] = []
        for fact in analysis.facts.calls:
            qualified = analysis.imports.qualify(fact.node.func) or dotted_name(fact.node.func) or ""
            if qualified.rsplit(".", 1)[-1] == "Accelerator":
                made.append(fact.node)
        for i, later in enumerate(made):
            for earlier in made[:i]:
                if self._coexist(earlier, later):
                    self.report(later, line=analysis.position(earlier).start.line)
                    break

    def _coexist(self, earlier: cst.Call, later: cst.Call) -> bool:
        analysis = self.analysis
        first, second = analysis.scope_of(earlier), analysis.scope_of(later)
        if first is not second and not isinstance(first, cst.Module) and not isinstance(second, cst.Module):
            return False
        return not self._alternatives(earlier, later)

    def _alternatives(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """True when `a` and `b` sit in different arms of one if/else, conditional
        expression or try/except, so at most one of them runs."""
        path_a = self._path(a)
        below_a = {id(up): child for child, up in zip(path_a, path_a[1:])}
        child = b
        up = self.analysis.parent(b)
        while up is not None:
            if id(up) in below_a:
                return _different_arms(up, below_a[id(up)], child)
            child, up = up, self.analysis.parent(up)
        return False

    def _path(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        path = [node]
        while (up := self.analysis.parent(path[-1])) is not None:
            path.append(up)
        return path


def _different_arms(common: cst.CSTNode, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    if isinstance(common, (cst.If, cst.IfExp)):
        arms = {id(common.body), id(common.orelse)}
        return id(a) in arms and id(b) in arms and a is not b
    if isinstance(common, cst.Try):
        handlers = {id(h) for h in common.handlers}
        return (a is common.body and id(b) in handlers) or (b is common.body and id(a) in handlers)
    return False
