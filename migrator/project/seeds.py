"""The global generators the callers of a file's code seed.

ClusterGCN's clustering.py splits each cluster's nodes with scikit-learn's
`train_test_split`, drawn from NumPy's global generator; main.py, which calls it, seeds
only torch. Under the launcher each process draws its own split. AM227 names such a split
in code other files of the run call on every process unless a caller seeds that
generator first (`Config.project_seeded`): the file alone cannot see its callers' seeds.
"""

from __future__ import annotations

import ast

from migrator.project.index import FileIndex, trees_mentioning
from migrator.analysis.ast_imports import qualify

# the global generators a seed sets, by the seed's qualified name
_SEEDS = {
    "numpy.random.seed", "random.seed", "torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all",
}
# helpers seeding them all at once
_SEED_ALL = {"accelerate.utils.set_seed", "accelerate.set_seed", "transformers.set_seed", "pytorch_lightning.seed_everything",
             "lightning.seed_everything"}


def seeded_by_callers(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run whose code other files call: the seeds those files call,
    the same on every process (no rank in the arguments), as qualified names."""
    seeds = {path: _seeds(tree, imports) for path, tree, imports in trees_mentioning(sources, files, (b"seed",))}
    out: dict[str, set[str]] = {}
    for path, f in files.items():
        for call in f.calls:
            if call.target[0] != path and seeds.get(path):
                out.setdefault(call.target[0], set()).update(seeds[path])
    return {path: tuple(sorted(found)) for path, found in out.items()}


def _seeds(tree: ast.Module, imports: dict[str, str]) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or "rank" in ast.unparse(node).lower():
            continue
        name = qualify(node.func, imports)
        if name in _SEEDS:
            found.add(name)
        elif name in _SEED_ALL:
            found |= {"numpy.random.seed", "random.seed", "torch.manual_seed"}
    return found
