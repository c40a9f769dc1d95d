"""The hand-written patterns of real training scripts, found once per pass.

Bundles what precision.py, accumulation.py, distributed.py and metrics.py find, and the
Accelerator options they call for, into one read-only value on ScriptAnalysis
(`analysis.patterns`). Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from migrator.analysis.accumulation import Accumulation, accumulations
from migrator.analysis.collect import Facts
from migrator.analysis.distributed import DistributionFacts, distribution_facts
from migrator.analysis.metrics import MetricsGather, metrics_gathers
from migrator.analysis.options import AcceleratorOption, accelerator_options
from migrator.analysis.precision import PrecisionFacts, precision_facts
from migrator.analysis.roles import RoleTable


@dataclass(frozen=True, eq=False)
class Patterns:
    precision: PrecisionFacts
    accumulations: tuple[Accumulation, ...]
    distribution: DistributionFacts
    metrics: tuple[MetricsGather, ...]
    options: tuple[AcceleratorOption, ...] = field(default_factory=tuple)

    @property
    def option_names(self) -> frozenset[str]:
        """Names the options read: the Accelerator must be created after they are bound."""
        return frozenset(n for o in self.options for n in o.names)


def find_patterns(
    module: cst.Module,
    facts: Facts,
    roles: RoleTable,
    backward_loops: set[int],
    prepared: frozenset[str],
    parent: Callable,
    rank_audience: Callable,
    vanishing: frozenset[int] = frozenset(),
) -> Patterns:
    """`rank_audience(expr)` says whether a test holds on the main process only (the
    lint's analysis.branches answers it); `vanishing` are ids of nodes other steps remove
    (device moves that prepare() makes redundant)."""
    precision = precision_facts(facts, parent)
    accs = accumulations(facts, roles, backward_loops, prepared)
    return Patterns(
        precision=precision,
        accumulations=accs,
        distribution=distribution_facts(module, facts, roles, parent, rank_audience, vanishing),
        metrics=metrics_gathers(facts, roles, backward_loops, prepared, parent),
        options=accelerator_options(precision, accs, facts, parent),
    )
