"""AM919: a model spreads its batch over GPUs itself, with the functional `data_parallel`."""

from __future__ import annotations

import libcst as cst

from migrator.analysis.reach import RUN_CALLS_IT, run_by_other_files
from migrator.edits import remove, replace
from migrator.rule import Example, FixAvailability, Rule

_DATA_PARALLEL = {"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}
# data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None)
_PARAMS = ("module", "inputs", "device_ids", "output_device", "dim", "module_kwargs")
_CALLABLE = (cst.Name, cst.Attribute, cst.Subscript, cst.Call)


class DataParallelInForward(Rule):
    """## What it does
    Replaces `nn.parallel.data_parallel(module, inputs, device_ids)` (the DCGAN example's
    `forward`: `nn.parallel.data_parallel(self.main, input, range(self.ngpu))` under
    `if input.is_cuda and self.ngpu > 1`) by the plain call `module(*inputs)`, in a script
    the migration gives an Accelerator. A form whose plain call would not give the same
    result is left as it is and reported by the verifier.

    ## Why is this bad?
    After the migration each process owns one device. `data_parallel` scatters the batch
    over `device_ids` (GPUs other processes own) and expects the module's parameters on
    `device_ids[0]`: on every process but the first it raises. On one device the plain
    call computes what `data_parallel` gathered; the launcher (`accel-launch
    --nproc-per-node N`) now does the spreading, one process per GPU, so a flag like
    `--ngpu` no longer spreads anything (the verifier says so beside the migration).

    ## Example
    ```python
    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            return nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        return self.main(input)
    ```

    Use instead:
    ```python
    def forward(self, input):
        return self.main(input)
    ```

    Once the call is plain both branches do the same, so the `if` goes when its test only
    reads and compares (`input.is_cuda and self.ngpu > 1`); a test that calls something
    (`torch.cuda.device_count() > 1`) keeps its branches.

    ## Known limits
    Rewritten only when the plain call is equivalent: `inputs` is a tuple written out, the
    `*args` parameter, or a plain parameter of the enclosing function (taken to hold one
    input: a tuple passed there would have been unpacked by `data_parallel`);
    `output_device` is absent or None (the plain call's result stays on this process's
    device); `module_kwargs` becomes `**module_kwargs`. `device_ids` and `dim` only say how
    to split, and go. `nn.DataParallel(...)` is AM210's. In code other files of the run
    call on every process, in a file given no Accelerator, the call is named and left as
    written.
    """

    code = "AM919"
    name = "data-parallel-in-forward"
    message = (
        "`{callee}(...)` spreads the batch over GPUs of one process; with one device per process the "
        "plain call `{plain}` computes the same{note}"
    )
    fix_title = "Call the module directly"
    fix = FixAvailability.SOMETIMES
    examples = (
        Example(
            before=(
                "import torch\nfrom torch import nn\n\n\nclass G(nn.Module):\n    def forward(self, x):\n"
                "        return nn.parallel.data_parallel(self.main, x, range(2))\n\n\n"
                "model = G()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            ),
            after=(
                "import torch\nfrom torch import nn\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n\n\n"
                "class G(nn.Module):\n    def forward(self, x):\n        return self.main(x)\n\n\n"
                "model = G()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "model, optimizer = accelerator.prepare(model, optimizer)\n"
            ),
            at=("7:16",),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        analysis = self.analysis
        if (analysis.imports.qualify(node.func) or "") not in _DATA_PARALLEL:
            return
        if not analysis.migrating:
            self._in_code_run_elsewhere(node)
            return
        plain = _plain_call(node, _function_of(analysis, node))
        if plain is None:
            return  # the verifier reports it beside the migration (migrator/verify/distribution.py)
        callee = cst.Module([]).code_for_node(node.func)
        edit = _collapsed_branch(analysis, node, plain) or replace(node, plain)
        self.report(node, edits=[edit], callee=callee, plain=cst.Module([]).code_for_node(plain), note="")

    def _in_code_run_elsewhere(self, node: cst.Call) -> None:
        """In a file given no Accelerator, code other files of the run call on every
        process (BigGAN-PyTorch's `utils.sample`, reached through a `functools.partial`
        of train.py, under `--parallel`): on every process but the first the call raises
        ("module must have its parameters and buffers on device cuda:0")."""
        config = self.ctx.config
        if not config.run_callers or not run_by_other_files(self.analysis, node, config.run_callers, config.project_unpassed):
            return
        plain = _plain_call(node, _function_of(self.analysis, node))
        bound = _bound(node)
        module = bound.get("module") if bound is not None else None
        shown = cst.Module([]).code_for_node(plain) if plain is not None else (
            f"{cst.Module([]).code_for_node(module)}(...)" if module is not None else "of the module"
        )
        note = (
            f" ({RUN_CALLS_IT}, and this file gets no Accelerator: each launched process owns one GPU, so on every "
            "process but the first it fails (the module is not on cuda:0); call the module directly, with its inputs "
            "on this process's device)"
        )
        self.report(node, callee=cst.Module([]).code_for_node(node.func), plain=shown, note=note)


def _collapsed_branch(analysis, call: cst.Call, plain: cst.Call):
    """`if <test>: out = dp(m, x)  else: out = m(x)`: once the call is plain both branches
    are one statement, so the `if` goes (an `if` whose body returns what the next
    statement returns, likewise). Only for a test that reads and compares (no call that
    could do something); None when the shape is anything else."""
    line = analysis.parent(analysis.parent(call))
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or line.body[0] is not analysis.parent(call):
        return None
    block = analysis.parent(line)
    branch = analysis.parent(block)
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1 or not isinstance(branch, cst.If):
        return None
    if not _reads_only(branch.test):
        return None
    rewritten = _code(line.deep_replace(call, plain))
    if isinstance(branch.orelse, cst.Else):
        other = branch.orelse.body.body
        if len(other) == 1 and isinstance(other[0], cst.SimpleStatementLine) and _code(other[0]) == rewritten:
            return replace(branch, other[0].with_changes(leading_lines=branch.leading_lines))
        return None
    if branch.orelse is None and isinstance(line.body[0], cst.Return):
        siblings = analysis.parent(branch)
        body = list(getattr(siblings, "body", ()))
        at = next((i for i, s in enumerate(body) if s is branch), None)
        if at is not None and at + 1 < len(body) and isinstance(body[at + 1], cst.SimpleStatementLine):
            if _code(body[at + 1]) == rewritten and not branch.leading_lines:
                return remove(branch)
    return None


def _reads_only(test: cst.BaseExpression) -> bool:
    """Names, attributes, constants, comparisons and boolean logic: no call, no side effect."""
    if isinstance(test, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(test, cst.Attribute):
        return _reads_only(test.value)
    if isinstance(test, cst.BooleanOperation):
        return _reads_only(test.left) and _reads_only(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _reads_only(test.expression)
    if isinstance(test, cst.Comparison):
        return _reads_only(test.left) and all(_reads_only(c.comparator) for c in test.comparisons)
    return False


def _code(line: cst.SimpleStatementLine) -> str:
    return cst.Module([]).code_for_node(line.with_changes(leading_lines=())).strip()


def _function_of(analysis, node: cst.CSTNode) -> cst.FunctionDef | None:
    scope = analysis.scope_of(node)
    return scope if isinstance(scope, cst.FunctionDef) else None


def _bound(call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """data_parallel's arguments by parameter name; None for a call we cannot read."""
    bound: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is None:  # positional arguments come first: the i-th is _PARAMS[i]
            if i >= len(_PARAMS):
                return None
            bound[_PARAMS[i]] = arg.value
        elif arg.keyword.value in _PARAMS and arg.keyword.value not in bound:
            bound[arg.keyword.value] = arg.value
        else:
            return None
    return bound if "module" in bound and "inputs" in bound else None


def _is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _plain_call(call: cst.Call, function: cst.FunctionDef | None) -> cst.Call | None:
    """`module(*inputs, **module_kwargs)` when that computes what data_parallel returns."""
    bound = _bound(call)
    if bound is None or not isinstance(bound["module"], _CALLABLE):
        return None
    if "output_device" in bound and not _is_none(bound["output_device"]):
        return None  # data_parallel gathers there; the plain call's result stays where the module is
    args = _inputs(bound["inputs"], function)
    if args is None:
        return None
    kwargs = bound.get("module_kwargs")
    if kwargs is not None and not _is_none(kwargs):
        args.append(cst.Arg(kwargs, star="**"))
    module = bound["module"].with_changes(lpar=[], rpar=[]) if not isinstance(bound["module"], cst.Call) else bound["module"]
    return cst.Call(module, [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])


def _inputs(inputs: cst.BaseExpression, function: cst.FunctionDef | None) -> list[cst.Arg] | None:
    """The positional arguments data_parallel hands the module: a tuple is unpacked, any
    other value is the one input."""
    if isinstance(inputs, cst.Tuple):
        if any(isinstance(e, cst.StarredElement) for e in inputs.elements):
            return None
        return [cst.Arg(e.value) for e in inputs.elements]
    if _is_none(inputs):
        return []
    if not isinstance(inputs, cst.Name) or function is None:
        return None
    params = function.params
    if isinstance(params.star_arg, cst.Param) and params.star_arg.name.value == inputs.value:
        return [cst.Arg(inputs, star="*")]  # `def forward(self, *inputs)`: always a tuple
    plain = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    if inputs.value in plain and inputs.value not in _rebound(function):
        return [cst.Arg(inputs)]
    return None


def _rebound(function: cst.FunctionDef) -> set[str]:
    """Names assigned in the function body (a parameter rebound may hold a tuple)."""
    names: set[str] = set()

    class _Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            names.update(n.value for n in _names(node.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            names.update(n.value for n in _names(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            names.update(n.value for n in _names(node.target))

        def visit_For(self, node: cst.For) -> None:
            names.update(n.value for n in _names(node.target))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

    function.visit(_Targets())
    return names


def _names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []
