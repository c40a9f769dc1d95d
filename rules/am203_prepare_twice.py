"""AM203: the same object passed to `accelerator.prepare()` twice."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.rule import Example, Rule


class PrepareTwice(Rule):
    """## What it does
    Reports an object passed to `accelerator.prepare()` when it was already prepared and
    not rebuilt in between: a second `prepare()` of the same name in the same function
    (or of a module-level name), the same name twice in one call, and a `prepare()` inside
    a loop that prepares what the previous iteration returned.

    ## Why is this bad?
    `prepare()` does not check whether an object is already prepared. Accelerate wraps a
    model a second time (DistributedDataParallel around DistributedDataParallel, every
    state-dict key gets another `module.` prefix) and registers it twice, so `save_state`
    writes it twice and `load_state` restores the wrong entries. Nothing fails at the
    call; the damage shows up at the next checkpoint.

    ## Example
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    ...
    model = accelerator.prepare(model)
    ```

    Use instead:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    ```

    ## See also
    - huggingface/accelerate#3967: `prepare()` silently double-wraps models and
      double-serializes checkpoints when called twice on the same object
      (https://github.com/huggingface/accelerate/issues/3967)
    """

    code = "AM203"
    name = "prepare-twice"
    message = "`{name}` is prepared again{where}: prepare() wraps and registers it a second time"
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\nmodel = accelerator.prepare(model)\n"
            ),
            at=("8:29",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        facts = {id(c.node): c for c in analysis.facts.calls}
        calls = list(analysis.prepare_calls)  # in source order, as the analysis found them
        for i, prepare in enumerate(calls):
            seen: set[str] = set()
            for arg in prepare.call.args:
                name = dotted_name(arg.value)
                if name is None or arg.star:
                    continue
                if name in seen:
                    self.report(arg.value, name=name, where=" in the same call")
                    continue
                seen.add(name)
                earlier = self._earlier(calls[:i], prepare.call, name)
                if earlier is not None:
                    line = analysis.position(earlier).start.line
                    self.report(arg.value, name=name, where=f" (already prepared on line {line})")
                    continue
                fact = facts.get(id(prepare.call))
                if fact and fact.loops and not self._rebuilt_in(fact.loops[-1], name, prepare.statement):
                    line = analysis.position(fact.loops[-1]).start.line
                    self.report(arg.value, name=name, where=f" on every iteration of the loop on line {line}")

    def _earlier(self, earlier_calls, call: cst.Call, name: str) -> cst.Call | None:
        analysis = self.analysis
        scope = analysis.scope_of(call)
        for prepare in reversed(earlier_calls):
            if name not in prepare.args:
                continue
            here = analysis.position(call).start.line
            other = analysis.scope_of(prepare.call)
            if other is not scope and not (isinstance(other, cst.Module) and not analysis.binds(scope, name)):
                continue
            there = analysis.position(prepare.call).start.line
            rebuilt = [
                b for b in analysis.facts.bindings
                if b.name == name and b.scope is other and b.statement is not analysis.line_of(prepare.call)
                and there < analysis.position(b.statement).start.line < here
            ]
            if not rebuilt:
                return prepare.call
        return None

    def _rebuilt_in(self, loop: cst.For, name: str, statement: cst.CSTNode) -> bool:
        """Whether the loop body binds `name` anew (other than by this prepare)."""
        analysis = self.analysis
        for b in analysis.facts.bindings:
            if b.name != name or b.statement is analysis.parent(statement) or b.statement is statement:
                continue
            if b.statement is loop:  # the loop variable itself: a new object each time
                return True
            up = analysis.parent(b.statement)
            while up is not None and up is not loop:
                up = analysis.parent(up)
            if up is loop:
                return True
        return False
