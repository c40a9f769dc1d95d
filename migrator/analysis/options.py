"""The arguments the Accelerator needs, computed once from what the script does by hand.

`mixed_precision` comes from its autocast calls (or GradScaler),
`gradient_accumulation_steps` from its accumulation loops, and `kwargs_handlers` from the
options of a hand-made DDP wrap or a model with parameters that get no gradient
(ddp_options.py). AM001 writes them when it
creates the Accelerator; when one already exists, the rule that rewrites the pattern adds
the missing argument to that call in the same fix. An argument can only be written where
the names it reads (`args` in `"fp16" if args.amp else "no"`) exist, so the setup is
placed after their binding (see `needed_names`) and `available()` checks existing calls.
Nothing here edits the tree.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import libcst as cst

from migrator.analysis.accumulation import Accumulation
from migrator.analysis.collect import Facts
from migrator.analysis.ddp_options import HANDLER, DdpOptions
from migrator.analysis.precision import PrecisionFacts
from migrator.analysis.walk import walk

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis
    from migrator.analysis.reach import AcceleratorHome


@dataclass(frozen=True)
class AcceleratorOption:
    """`keyword=value` for the Accelerator constructor; `names` are the names it reads."""

    keyword: str
    value: str
    names: frozenset[str]
    imports: tuple[str, ...] = ()  # names the value needs from the Accelerator's module
    fallback: "AcceleratorOption | None" = None  # a smaller value to write where `names` are not all bound

    @property
    def code(self) -> str:
        return f"{self.keyword}={self.value}"


def _free_names(code: str) -> frozenset[str]:
    names: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            walk(node.value, self)
            return False

    walk(cst.parse_expression(code), _Find())
    return frozenset(n for n in names if not hasattr(builtins, n))


def accelerator_options(
    precision: PrecisionFacts, accumulations: Sequence[Accumulation], facts: Facts, parent
) -> tuple[AcceleratorOption, ...]:
    """The options the script's hand-written patterns call for (empty for most scripts)."""
    out = []
    if precision.value is not None and precision.conflict is None and not precision.indirect:
        out.append(AcceleratorOption("mixed_precision", precision.value, _free_names(precision.value)))
    steps = {_caller_terms(a.steps, a.loop, facts, parent) for a in accumulations if a.migratable and a.steps}
    if len(steps) == 1:
        (value,) = steps
        out.append(AcceleratorOption("gradient_accumulation_steps", value, _free_names(value)))  # type: ignore[arg-type]
    return tuple(out)


def handler_option(ddp: "DdpOptions") -> AcceleratorOption:
    """`kwargs_handlers=[DistributedDataParallelKwargs(...)]`; it reads the names its values read."""
    names = frozenset().union(*(_free_names(code) for _, code in ddp.carried))
    literal = ddp.literal_code
    fallback = AcceleratorOption("kwargs_handlers", literal, frozenset(), (HANDLER,)) if literal and names else None
    return AcceleratorOption("kwargs_handlers", ddp.handler_code or "[]", names, (HANDLER,), fallback)


def _caller_terms(code: str, node: cst.CSTNode, facts: Facts, parent) -> str:
    """`accum_steps`, a parameter of `def train_epoch(..., accum_steps)` called once as
    `train_epoch(..., args.accum_steps)`, is `args.accum_steps` where the caller creates
    the Accelerator. Anything else stays as written."""
    head = code.split(".")[0]
    function = parent(node)
    while function is not None and not isinstance(function, cst.FunctionDef):
        function = parent(function)
    if function is None or head not in facts.params.get(id(function), ()) or id(function) in facts.method_of:
        return code
    calls = [c.node for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == function.name.value]
    if len(calls) != 1:
        return code
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    call = calls[0]
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == head), None)
    if value is None and head in positional:
        index = positional.index(head)
        plain = [a for a in call.args if a.keyword is None and a.star == ""]
        value = plain[index].value if index < len(plain) else None
    if value is None:
        return code
    return cst.Module([]).code_for_node(value).strip() + code[len(head):]


def option_of(options: Sequence[AcceleratorOption], keyword: str) -> AcceleratorOption | None:
    return next((o for o in options if o.keyword == keyword), None)


def has_keyword(call: cst.Call | None, keyword: str) -> bool:
    return call is not None and any(a.keyword is not None and a.keyword.value == keyword for a in call.args)


def available(analysis: "ScriptAnalysis", home: "AcceleratorHome", option: AcceleratorOption) -> bool:
    """Every name the option reads exists where the Accelerator is created: bound at module
    level, a parameter of the creating function, or bound in its scope above it."""
    facts = analysis.facts
    for name in option.names:
        if name in facts.imports.aliases:
            continue
        if isinstance(home.scope, cst.FunctionDef) and name in facts.params.get(id(home.scope), ()):
            continue
        ok = False
        for b in facts.bindings:
            if b.name != name:
                continue
            if b.scope is analysis.module and not isinstance(home.scope, cst.Module):
                ok = True
            elif b.scope is home.scope and analysis.order(b.statement) < home.line:
                ok = True
        if not ok:
            return False
    return True


def with_option(call: cst.Call, option: AcceleratorOption) -> cst.Call:
    """`Accelerator(...)` with `keyword=value` added."""
    arg = cst.Arg(
        cst.parse_expression(option.value),
        keyword=cst.Name(option.keyword),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, arg])


def setup_options(analysis: "ScriptAnalysis") -> tuple[AcceleratorOption, ...]:
    """The options AM001 writes into a new `Accelerator(...)`: those whose names exist
    where it goes (the others are reported by the rule that needs them)."""
    from migrator.analysis.reach import accelerator_home

    patterns = analysis.patterns
    home = accelerator_home(analysis)
    if patterns is None or home is None:
        return ()
    out = []
    for option in patterns.options:
        if not available(analysis, home, option):
            option = option.fallback  # type: ignore[assignment]
        if option is not None and available(analysis, home, option):
            out.append(option)
    return tuple(out)


def setup_arguments(analysis: "ScriptAnalysis") -> str:
    """The argument list of the new `Accelerator(...)`."""
    return ", ".join(o.code for o in setup_options(analysis))


def option_status(analysis: "ScriptAnalysis", keyword: str) -> tuple[cst.Call | None, AcceleratorOption | None, str | None]:
    """What a rule needs to make the Accelerator take the option `keyword`:
    (the existing call to add it to, or None when it is there already or AM001 writes it;
    the option; the reason it cannot be had, or None)."""
    from migrator.analysis.reach import CALLERS_STUB, accelerator_home

    patterns = analysis.patterns
    option = option_of(patterns.options, keyword) if patterns is not None else None
    home = accelerator_home(analysis)
    if option is None or home is None:
        return None, option, "no Accelerator is created for this code"
    if isinstance(home.scope, cst.FunctionDef) and home.scope.name.value == CALLERS_STUB:
        if home.call is not None and has_keyword(home.call, keyword):
            return None, option, None
        return None, option, f"the Accelerator comes from the caller in another file; pass `{option.code}` to it there by hand"
    if home.call is not None and has_keyword(home.call, keyword):
        return None, option, None
    if not available(analysis, home, option):
        names = ", ".join(f"`{n}`" for n in sorted(option.names))
        return None, option, f"{names} is not defined where the Accelerator is created; pass `{option.code}` to it by hand"
    return home.call, option, None
