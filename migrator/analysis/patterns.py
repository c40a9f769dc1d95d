"""The hand-written patterns of real training scripts, found once per pass.

Bundles what precision.py, accumulation.py, distributed.py, ddp_options.py and metrics.py find, and the
Accelerator options they call for, into one read-only value on ScriptAnalysis
(`analysis.patterns`). Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import libcst as cst

from migrator.analysis.accumulation import Accumulation, accumulations
from migrator.analysis.collect import Facts
from migrator.analysis.ddp_options import DdpOptions, ddp_options
from migrator.analysis.names import dotted_name
from migrator.analysis.device import device_variables
from migrator.analysis.device_choice import DeviceChoice, device_choices, training_cpu
from migrator.analysis.distributed import DistributionFacts, distribution_facts
from migrator.analysis.loop import local_callee
from migrator.analysis.meters import MeterSync, meter_syncs
from migrator.analysis.metrics import MetricsGather, metrics_gathers, sharded_loop
from migrator.analysis.options import AcceleratorOption, accelerator_options, handler_option
from migrator.analysis.precision import PrecisionFacts, precision_facts
from migrator.analysis.roles import Role, RoleTable


@dataclass(frozen=True, eq=False)
class Patterns:
    precision: PrecisionFacts
    accumulations: tuple[Accumulation, ...]
    distribution: DistributionFacts
    metrics: tuple[MetricsGather, ...]
    options: tuple[AcceleratorOption, ...] = field(default_factory=tuple)
    devices: tuple[DeviceChoice, ...] = field(default_factory=tuple)  # device_choice.py
    cpu_problem: str | None = None  # why the user's CPU choice cannot become `cpu=`
    ddp: DdpOptions = field(default_factory=lambda: DdpOptions((), ()))  # ddp_options.py
    meters: tuple[MeterSync, ...] = ()  # meters.py

    @property
    def option_names(self) -> frozenset[str]:
        """Names the options read: the Accelerator must be created after they are bound."""
        return frozenset(n for o in self.options for n in o.names)

    @property
    def option_attributes(self) -> frozenset[str]:
        """The attributes the options read through those names (`self.opt` of
        `cpu=self.opt.no_cuda`): where one is assigned in the creating function, the
        Accelerator comes after that assignment too."""
        return frozenset(a for o in self.options for a in _attributes_read(o.value))


def find_patterns(
    module: cst.Module,
    facts: Facts,
    roles: RoleTable,
    backward_loops: set[int],
    prepared: frozenset[str],
    parent: Callable,
    rank_audience: Callable,
    vanishing: frozenset[int] = frozenset(),
    training_scope: cst.CSTNode | None = None,
    models: Mapping[str, str] | None = None,
    helpers: Mapping[str, list] | None = None,
    meter_classes: frozenset[str] = frozenset(),
) -> Patterns:
    """`rank_audience(expr)` says whether a test holds on the main process only (the
    lint's analysis.branches answers it); `vanishing` are ids of nodes other steps remove
    (device moves that prepare() makes redundant); `models` are model classes of other
    files of the run whose parameters get no gradient (ddp_options.py); `helpers` the calls of
    other files' distribution helpers (distributed.py)."""
    precision = precision_facts(facts, parent)
    accs = accumulations(facts, roles, backward_loops, prepared)
    devices = device_choices(facts, [v.binding for v in device_variables(facts)], parent)
    cpu, cpu_problem = training_cpu(devices, (module,) if training_scope is None else (module, training_scope))
    options = accelerator_options(precision, accs, facts, parent)
    meters = meter_syncs(facts, meter_classes, lambda loop: sharded_loop(loop, facts, roles, prepared), parent) if meter_classes else ()
    ddp = ddp_options(facts, parent, models, training_scope, module)
    if ddp.handler_code is not None:
        options += (handler_option(ddp),)
    if cpu is not None:
        options += (AcceleratorOption("cpu", cpu, _cpu_names(devices, cpu)),)
    elif not devices and _trains(facts, backward_loops) and _never_on_a_device(facts, roles):
        options += (AcceleratorOption("cpu", "True", frozenset()),)
    return Patterns(
        precision=precision,
        accumulations=accs,
        distribution=distribution_facts(module, facts, roles, parent, rank_audience, vanishing, helpers),
        metrics=metrics_gathers(
            facts, roles, backward_loops, prepared, parent,
            frozenset(s for s, (kind, *_) in (helpers or {}).items() if kind == "reduced"),
            frozenset(id(c) for m in meters for c in m.updates),
        ),
        meters=meters,
        options=options,
        devices=devices,
        cpu_problem=cpu_problem,
        ddp=ddp,
    )


def _trains(facts: Facts, backward_loops: set[int]) -> bool:
    """A loop calls backward, or a function a loop calls does, or a closure does that is
    handed to `optimizer.step(closure)` (LBFGS: the closure is defined in the step loop and
    run by the optimizer)."""
    if backward_loops:
        return True
    stepped = {
        arg.value.value for c in facts.calls
        if isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "step" and c.loops
        for arg in c.node.args if isinstance(arg.value, cst.Name)
    }
    # ... or a function a loop calls (SimGNN's `loss = self.process_batch(batch)` in fit's loop)
    looped = {local_callee(c.node.func) for c in facts.calls if c.loops} - {None}
    return any(
        isinstance(c.node.func, cst.Attribute) and c.node.func.attr.value == "backward"
        and isinstance(c.scope, cst.FunctionDef) and (c.scope.name.value in stepped or c.scope.name.value in looped)
        for c in facts.calls
    )


def _never_on_a_device(facts: Facts, roles: RoleTable) -> bool:
    """A script that never names a device (no `.cuda()`, no `.to(<device>)`, no
    `device=`, no `torch.device`) and has no DataLoader for prepare() to place: it trains
    on the CPU, with tensors it builds itself, so the migration keeps it there
    (`cpu=True`) rather than move the model alone to a GPU its inputs never reach."""
    if roles.names(Role.DATALOADER):
        return False
    for c in facts.calls:
        func = c.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to"):
            return False
        if (c.qualified or c.func or "").endswith(("torch.device", "set_device")):
            return False
        if any(arg.keyword is not None and arg.keyword.value == "device" for arg in c.node.args):
            return False
    return True


def _cpu_names(devices: tuple[DeviceChoice, ...], cpu: str) -> frozenset[str]:
    """The names `cpu=<condition>` reads: the Accelerator is created after they are bound."""
    return next(c.names for c in devices if c.cpu == cpu)


def _attributes_read(code: str) -> set[str]:
    """`self.opt` and `self.opt.no_cuda` for `self.opt.no_cuda`: every dotted prefix of the
    attribute chains an option's value reads."""
    try:
        expression = cst.parse_expression(code)
    except cst.ParserSyntaxError:
        return set()
    found: set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            name = dotted_name(node)
            if name:
                parts = name.split(".")
                found.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))

    expression.visit(_Find())
    return found
