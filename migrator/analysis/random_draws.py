"""Values drawn from Python's or NumPy's global generator, which each process seeds on its
own: `run_id = random.randint(1, 100000)` differs on every process unless the script seeds
the generator alike first (`random.seed(args.seed)`).

Nothing here edits the tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.walk import descendants

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

DRAWS = {
    "random.random", "random.uniform", "random.choice", "random.randint", "random.randrange",
    "random.gauss", "random.sample", "random.shuffle",
    "numpy.random.rand", "numpy.random.randn", "numpy.random.uniform", "numpy.random.choice",
    "numpy.random.randint", "numpy.random.random", "numpy.random.normal",
}
SEEDS = {"random.seed", "numpy.random.seed"}
# Seeding helpers that seed torch, NumPy and `random` at once.
SEED_ALL = frozenset({
    "accelerate.utils.set_seed", "accelerate.set_seed", "runtime.set_seed", "runtime.rng.set_seed",
    "transformers.set_seed", "pytorch_lightning.seed_everything", "lightning.seed_everything",
})
# A name made up at random: different on every process whatever the seed.
_UNIQUE = {"uuid.uuid4", "uuid.uuid1"}


def unseeded_draw(analysis: "ScriptAnalysis", expr: cst.CSTNode, depth: int = 3) -> cst.Call | None:
    """A draw `expr` is built from, through the bindings of its names in its own scope (up
    to `depth` hops), that no seeding call above it makes alike on every process."""
    scope = analysis.scope_of(expr)
    # a seed above the draw in its own scope, or at module level (run at import): one in
    # another function may run later (semseg seeds in `train()`, called after the draw)
    seeds = [
        c.node for c in analysis.facts.calls
        if (c.qualified or "") in SEEDS and (c.scope is scope or c.scope is analysis.module) and not per_process_seed(c.node)
    ]
    values, names, seen = [expr], set(), set()
    for _ in range(depth + 1):
        for value in values:
            for node in descendants(value):
                qualified = analysis.imports.qualify(node.func) or "" if isinstance(node, cst.Call) else ""
                if qualified in _UNIQUE:
                    return node
                if qualified in DRAWS and not any(analysis.order(s) < analysis.order(node) for s in seeds):
                    return node
                if isinstance(node, cst.Name):
                    names.add(node.value)
        values = [
            b.value for b in analysis.facts.bindings
            if b.name in names - seen and b.value is not None and analysis.scope_of(b.statement) is scope
        ]
        seen |= names
    return None


def per_process_seed(seed: cst.Call) -> bool:
    """`random.seed(args.seed + rank)`: a seed of its own on every process makes the draws differ."""
    text = cst.Module([]).code_for_node(seed).lower()
    return any(word in text for word in ("rank", "process_index", "local_process_index"))


def unique_draw(call: cst.Call, analysis: "ScriptAnalysis") -> bool:
    """A name made up at random (`uuid.uuid4()`): no seed makes it alike."""
    return (analysis.imports.qualify(call.func) or "") in _UNIQUE
