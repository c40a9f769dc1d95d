"""A file that builds a model and hands it to the training of another file of the run that
gets no Accelerator (Config.project_drives): LightGCN's main.py building `Recmodel` for
Procedure.py, cnn-text-classification's main.py building `cnn` for `train.train` whose
migration is left as written. The file is part of the launched program, but nothing in
it is migrated: what it does to the devices is left for the hand migration to see.

Nothing here edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.names import dotted_name
from migrator.analysis.roles import Role

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis
    from migrator.config import Config


# how the findings on the model a set-up hands on (left as written) say so: the safety net
# (engine._beside_training) reads them as naming no missing set-up of this file
HANDS_TO = "the model this file hands to"
# AM001's words where the set-up hands its model on: "it builds `actor_critic` here and hands it to ..."
BUILDS_AND_HANDS = ("it builds `", "` here and hands it to the training of ")


def handed_name(message: str) -> str:
    """The model named in AM001's `BUILDS_AND_HANDS` words, or ""."""
    start, end = BUILDS_AND_HANDS
    before, found, after = message.partition(start)
    name, found_end, _ = after.partition(end)
    return name if found and found_end and "`" not in name else ""


@dataclass(frozen=True, eq=False)
class HandedModel:
    binding: object  # the first binding of the model handed on (collect.Binding)
    spelling: str  # the call that hands it, as spelled here (`train.train`)
    where: str  # the file that call trains in


def handed_model(analysis: "ScriptAnalysis", config: "Config") -> HandedModel | None:
    """The first model this file builds and hands to another file's training that gets no
    Accelerator, when the file has none of its own. A trainer that creates its own
    Accelerator and is migrated (Config.project_enters, not refused) gets one."""
    if analysis.accelerator_names or not config.project_drives:
        return None
    driven = {
        d[1]: d for d in config.project_drives  # line of the call → the drive
        if d[0] not in config.project_enters or d[0] in config.project_refused
    }
    models = set(analysis.roles.names(Role.MODEL)) | _moved_objects(analysis)
    # `agent = Trainer(policy, lr)`, then `agent.update(...)` driven: a trainer class left as written is handed the model
    files = {d[4]: d[3] for d in config.project_drives}
    built = {
        analysis.position(f.node).start.line: (f.func, 0, 0, files.get(f.func.rpartition(".")[2], ""))
        for f in analysis.facts.calls if f.func in config.project_enters and f.func in config.project_refused
    }
    handed = {}
    for fact in analysis.facts.calls:
        line = analysis.position(fact.node).start.line
        if line in built and fact.func == built[line][0]:
            for arg in fact.node.args:
                name = dotted_name(arg.value)
                if name in models:
                    handed.setdefault(name, built[line])
        elif line in driven:
            for arg in fact.node.args:
                name = dotted_name(arg.value)
                if name in models:
                    handed.setdefault(name, driven[line])
    bindings = sorted(
        (b for b in analysis.facts.bindings if b.name in handed and isinstance(b.value, cst.Call)),
        key=lambda b: analysis.order(b.target),
    )
    if not bindings:
        return None
    spelling, _, _, where, *_ = handed[bindings[0].name]
    return HandedModel(bindings[0], spelling, where)


def _moved_objects(analysis: "ScriptAnalysis") -> set[str]:
    """Names moved to a device here (`actor_critic.to(device)`, `policy = Policy().to(device)`): a model of a class of the
    run whose training is elsewhere, which this file never sees updated (a2c-ppo's Policy)."""
    out = {  # `policy = Policy().to(device)`
        b.name for b in analysis.facts.bindings
        if isinstance(b.value, cst.Call) and isinstance(b.value.func, cst.Attribute) and b.value.func.attr.value in ("to", "cuda")
    }
    for c in analysis.facts.calls:
        func = c.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
            name = dotted_name(func.value)
            if name:
                out.add(name)
    return out
