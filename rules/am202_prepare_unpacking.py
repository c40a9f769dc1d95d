"""AM202: the names unpacked from `accelerator.prepare(...)` do not match its arguments."""

from __future__ import annotations

import libcst as cst

from migrator.analysis import dotted_name
from migrator.edits import replace
from migrator.rule import Example, FixAvailability, Rule


class PrepareUnpacking(Rule):
    """## What it does
    Checks `a, b, c = accelerator.prepare(x, y, z)` against its arguments:

    - the same names in another order (`optimizer, model = accelerator.prepare(model,
      optimizer)`): the targets are put back in the order of the arguments;
    - a name that receives another argument's prepared object (`model, opt =
      accelerator.prepare(opt, model2)`): reported;
    - as many names as arguments: `a, b = accelerator.prepare(x, y, z)` raises at once;
      `model, = accelerator.prepare(model)` unpacks the model itself, because `prepare()`
      of one object returns that object, not a one-element tuple (the trailing comma is
      dropped).

    ## Why is this bad?
    `prepare()` returns the objects in the order it was given them. Swapped names bind
    `model` to the prepared optimizer and `optimizer` to the model; the script may even
    run a few lines before failing far from the cause — or, for two dataloaders or two
    models of the same kind, train on the wrong one without any error.

    ## Example
    ```python
    optimizer, model = accelerator.prepare(model, optimizer)
    ```

    Use instead:
    ```python
    model, optimizer = accelerator.prepare(model, optimizer)
    ```

    ## Fix safety
    Reordering is offered only when the targets are exactly the argument names, in
    another order, so the fixed line binds every name to its own prepared object; that is
    always what was meant.
    """

    code = "AM202"
    name = "prepare-unpacking"
    message = "`{targets}` does not match the arguments of prepare(): {problem}"
    fix_title = "Unpack prepare() in the order of its arguments"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "optimizer, model = accelerator.prepare(model, optimizer)\n"
            ),
            after=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("7:1",),
        ),
        Example(
            before=(
                "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
                "model = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer, loader)\n"
            ),
            at=("7:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        for prepare in self.analysis.prepare_calls:
            statement = prepare.statement
            if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
                continue
            args = prepare.call.args
            if any(a.star or a.keyword is not None for a in args):
                continue
            target = statement.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)):
                self._check(statement, target, prepare.call)

    def _check(self, statement: cst.Assign, target: cst.Tuple | cst.List, call: cst.Call) -> None:
        elements = target.elements
        if any(isinstance(e, cst.StarredElement) for e in elements):
            return
        args = [dotted_name(a.value) for a in call.args]
        names = [dotted_name(e.value) for e in elements]
        shown = cst.Module([]).code_for_node(target).strip()
        if len(elements) != len(args) or len(args) == 1:
            self._count(statement, target, len(args), shown)
            return
        if None in names or None in args or names == args:
            return
        if sorted(names) == sorted(args):  # type: ignore[type-var]
            values = [e.with_changes(value=cst.parse_expression(args[i])) for i, e in enumerate(elements)]
            problem = "another order, so each name gets another object"
            self.report(statement, edits=[replace(target, target.with_changes(elements=values))], targets=shown, problem=problem)
            return
        for i, name in enumerate(names):
            if name in args and args.index(name) != i:
                problem = f"`{name}` gets the prepared `{args[i]}` (prepare() returns them in order)"
                self.report(statement, targets=shown, problem=problem)
                return

    def _count(self, statement: cst.Assign, target: cst.Tuple | cst.List, count: int, shown: str) -> None:
        if count == 1 and len(target.elements) == 1 and isinstance(target, cst.Tuple):
            element = target.elements[0].value
            new = element.with_changes(lpar=[], rpar=[])
            problem = "prepare() of one object returns the object itself, not a tuple"
            self.report(statement, edits=[replace(target, new)], targets=shown, problem=problem)
            return
        if count == len(target.elements):
            return  # `[model] = accelerator.prepare(model)`: a list target, fails loudly anyway
        problem = f"{len(target.elements)} names for {count} objects"
        self.report(statement, targets=shown, problem=problem)
