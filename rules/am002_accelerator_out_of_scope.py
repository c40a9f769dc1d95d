"""AM002: a function uses `accelerator` but cannot see it."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.reach import injected_classes, threadable
from migrator.edits import insert_before, replace
from migrator.rule import Example, FixAvailability, Rule


class AcceleratorOutOfScope(Rule):
    """## What it does
    Finds functions that use `accelerator` (because the migration wrote
    `accelerator.backward(loss)` into `def train(model, device, loader, optimizer)`) while
    the Accelerator is created inside another function (`main()`). It adds a
    keyword-only parameter `accelerator` to the function and passes
    `accelerator=accelerator` at every call in the file.

    ## Why is this bad?
    Without it the first training step raises `NameError: name 'accelerator' is not
    defined`.

    ## Why a keyword-only parameter
    A global Accelerator would be created at import time and hide the dependency. A
    keyword-only parameter keeps every existing positional call working, shows the
    dependency in the signature, and fails loudly (`missing keyword argument
    'accelerator'`) at a caller in another file instead of training on one device.

    ## Classes
    A class that trains with objects built elsewhere (`Trainer(model, optimizer, loader)`
    in `main()`, which creates the Accelerator and prepares them where they are created)
    gets it the same way: `__init__(..., *, accelerator)` stores `self.accelerator =
    accelerator`, its methods use `self.accelerator`, and every `Trainer(...)` in the file
    passes `accelerator=accelerator`. This is done only when every instantiation is in the
    function that creates the Accelerator and no class here derives from it; otherwise
    the class is reported. A class that builds its own optimizer owns the Accelerator
    instead (`self.accelerator = Accelerator()` in `__init__`, see AM001).

    ## Example
    ```python
    def train(model, loader, optimizer):
        accelerator.backward(loss)
    def main():
        accelerator = Accelerator()
        train(model, loader, optimizer)
    ```

    Use instead:
    ```python
    def train(model, loader, optimizer, *, accelerator):
        accelerator.backward(loss)
    def main():
        accelerator = Accelerator()
        train(model, loader, optimizer, accelerator=accelerator)
    ```

    ## Known limits
    Methods, functions passed around as values, functions taking `**kwargs`, and
    functions also called from module-level code (where no Accelerator exists to pass)
    are reported, not changed.
    """

    code = "AM002"
    name = "accelerator-out-of-scope"
    message = "`{function}` uses `{accelerator}` but cannot see it"
    fix_title = "Pass the Accelerator as a keyword-only parameter"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "from runtime import Accelerator\n\ndef step(loss):\n    accelerator.backward(loss)\n\n"
                "def main():\n    accelerator = Accelerator()\n    step(1)\n"
            ),
            after=(
                "from runtime import Accelerator\n\ndef step(loss, *, accelerator):\n    accelerator.backward(loss)\n\n"
                "def main():\n    accelerator = Accelerator()\n    step(1, accelerator=accelerator)\n"
            ),
            at=("3:1",),
        ),
    )

    def visit_Module(self, node: cst.Module) -> None:
        analysis = self.analysis
        name = analysis.accelerator
        self._inject_into_classes(name)
        if analysis.binds(analysis.module, name):
            return
        facts = analysis.facts
        needy = {
            id(load.scope): load.scope
            for load in facts.loads
            if load.name == name and isinstance(load.scope, cst.FunctionDef)
            and not analysis.binds(load.scope, name)
        }
        for function in needy.values():
            self._report(function, name)

    def _inject_into_classes(self, name: str) -> None:
        """A class whose methods now use `self.accelerator` gets it through `__init__`."""
        for injected in injected_classes(self.analysis).values():
            init = injected.init
            if any(p.name.value == name for p in init.params.kwonly_params) or not _reads_self(injected.node, name):
                continue
            body = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
            first = next((s for i, s in enumerate(body) if not (i == 0 and _is_docstring(s))), None)
            if first is None:
                self.report(injected.node, function=injected.node.name.value, accelerator=f"self.{name}")
                continue
            store = cst.parse_statement(f"self.{name} = {name}\n")
            edits = [replace(init.params, _with_keyword_param(init.params, name)), insert_before(first, store)]
            edits += [replace(call, _with_keyword_arg(call, name)) for call in injected.calls]
            self.report(injected.node, edits=edits, function=injected.node.name.value, accelerator=f"self.{name}")

    def _report(self, function: cst.FunctionDef, name: str) -> None:
        analysis = self.analysis
        facts = analysis.facts
        fname = function.name.value
        fields = {"function": fname, "accelerator": name}
        calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == fname]
        if not threadable(analysis, function):
            self.report(function, **fields)
            return
        edits = [replace(function.params, _with_keyword_param(function.params, name))]
        for call in calls:
            edits.append(replace(call.node, _with_keyword_arg(call.node, name)))
        self.report(function, edits=edits, **fields)


def _with_keyword_arg(call: cst.Call, name: str) -> cst.Call:
    arg = cst.Arg(cst.Name(name), keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, arg])


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _reads_self(cls: cst.ClassDef, name: str) -> bool:
    """Some method reads `self.<name>`."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal found
            found = found or (isinstance(node.value, cst.Name) and node.value.value == "self" and node.attr.value == name)

    cls.visit(_Find())
    return found


def _with_keyword_param(params: cst.Parameters, name: str) -> cst.Parameters:
    new = cst.Param(cst.Name(name))
    star = params.star_arg
    if not isinstance(star, cst.Param) and not params.kwonly_params:
        star = cst.ParamStar()
        one_per_line = _one_per_line(params.params)
        if one_per_line is not None:
            # `a,\n    b,\n)`: the new `*, name,` gets a line of its own, before the `)`
            separator, closing = one_per_line
            last = params.params[-1].with_changes(comma=cst.Comma(whitespace_after=separator))
            new = new.with_changes(comma=cst.Comma(whitespace_after=closing))
            return params.with_changes(params=[*params.params[:-1], last], star_arg=star, kwonly_params=[new])
    return params.with_changes(star_arg=star, kwonly_params=[*params.kwonly_params, new])


def _one_per_line(params) -> tuple[cst.BaseParenthesizableWhitespace, cst.BaseParenthesizableWhitespace] | None:
    """(the break between two parameters, the break before `)`) when the parameters sit
    one per line with a trailing comma; else None."""
    if len(params) < 2:
        return None
    before_last, last = params[-2].comma, params[-1].comma
    if not (isinstance(before_last, cst.Comma) and isinstance(last, cst.Comma)):
        return None
    if not (isinstance(before_last.whitespace_after, cst.ParenthesizedWhitespace) and isinstance(last.whitespace_after, cst.ParenthesizedWhitespace)):
        return None
    return before_last.whitespace_after, last.whitespace_after
