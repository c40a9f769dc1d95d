"""Running-meter classes of other files of the run, read from their `update`.

`from utils import AverageMeter` in the engine: the class is in utils.py, which the
engine's own analysis cannot read. The engine is migrated with `Config.project_meters`
naming the calls (`AverageMeter`, `utils.AverageMeter`) of classes that keep the
sum/count/avg bookkeeping (analysis/meters.py), so their meters are added up across
processes after a loop over a prepared loader, as a class written in the file is.
"""

from __future__ import annotations

from migrator.analysis.meters import meter_classes
from migrator.project.index import FileIndex


def meter_calls(sources: dict[str, bytes], files: dict[str, FileIndex]) -> dict[str, tuple[str, ...]]:
    """For each file of the run that builds a meter of another file: the calls as spelled there."""
    classes: dict[str, frozenset[str]] = {}
    out = {}
    for path, f in files.items():
        calls = set()
        for c in f.calls:
            owner = c.target[0]
            if owner == path:
                continue
            if owner not in classes:
                classes[owner] = meter_classes(sources.get(owner, b"").decode("utf-8", "replace"))
            if c.target[1] in classes[owner]:
                calls.add(c.spelling)
        if calls:
            out[path] = tuple(sorted(calls))
    return out
