"""analysis/saving.py and removal.py: what a save unwraps, where its barrier goes, and which
node goes when a statement goes."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.removal import removal_unit
from migrator.analysis.saving import saves


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _code(analysis: ScriptAnalysis, node: cst.CSTNode | None) -> str | None:
    return analysis.module.code_for_node(node).strip().splitlines()[0] if node is not None else None


TRAIN = """
import torch
def save_checkpoint(state, path):
    torch.save(state, path)
def main(args):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if epoch % 10 == 0:
            if args.local_rank == 0:
                torch.save(model.state_dict(), "m.pt")
        if args.rank == 0:
            save_checkpoint({"model": model.state_dict()}, "c.pt")
        torch.save(out, f"preds_{args.rank}.pt")
"""


def test_barriers_are_lifted_out_of_every_if_and_helpers_wait_at_their_call_site() -> None:
    analysis = _analyze(TRAIN)
    found = {_code(analysis, s.call): s for s in saves(analysis)}
    direct = found['torch.save(model.state_dict(), "m.pt")']
    assert _code(analysis, direct.anchor) == "if epoch % 10 == 0:"
    assert [_code(analysis, m) for m in direct.models] == ["model"]
    helper = found["torch.save(state, path)"]
    assert _code(analysis, helper.anchor) == "if args.rank == 0:"  # at the call site, not inside
    assert [_code(analysis, m) for m in helper.models] == ["model"]  # in the argument at the call site
    assert 'torch.save(out, f"preds_{args.rank}.pt")' not in found  # one file per process


def test_an_if_left_empty_goes_and_an_else_left_empty_goes_alone() -> None:
    analysis = _analyze(
        """
        if args.cuda:
            model.cuda()
        if args.distributed:
            keep()
        else:
            sampler = None
        """
    )
    lines = [s for s in analysis.module.body]
    moved = lines[0].body.body[0]
    assert removal_unit(moved, analysis.parent, analysis.imports) is lines[0]
    orphan = lines[1].orelse.body.body[0]
    assert removal_unit(orphan, analysis.parent, analysis.imports) is lines[1].orelse


def test_an_if_with_side_effects_in_its_test_stays() -> None:
    analysis = _analyze("if setup():\n    model.cuda()\n")
    statement = analysis.module.body[0].body.body[0]
    assert removal_unit(statement, analysis.parent, analysis.imports) is statement
