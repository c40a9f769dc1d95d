"""analysis/saving.py and removal.py: what a save unwraps, where its barrier goes, and which
node goes when a statement goes."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.removal import removal_unit
from migrator.analysis.saving import paired_loads, saves, state_dict_saved


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
        if evaluate(model) > best:
            torch.save(model, "best.pt")
"""


def test_barriers_are_lifted_out_of_ifs_that_may_differ_and_helpers_wait_at_their_call_site() -> None:
    analysis = _analyze(TRAIN)
    found = {_code(analysis, s.call): s for s in saves(analysis)}
    direct = found['torch.save(model.state_dict(), "m.pt")']
    assert _code(analysis, direct.anchor) == "if args.local_rank == 0:"  # inside the periodic branch
    assert _code(analysis, found['torch.save(model, "best.pt")'].anchor) == "if evaluate(model) > best:"
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


PAIRS = """
import os
import tempfile
import torch
from tempfile import TemporaryDirectory
model = torch.nn.Linear(2, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    torch.save(model.state_dict(), "best.pt")
with TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "last.pt")
    torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path))
scratch = tempfile.mkdtemp()
torch.save(model.state_dict(), scratch + "/m.pt")
with open("w.pt", "wb") as f:
    torch.save(model.state_dict(), f)
with open("w.pt", "rb") as g:
    state = torch.load(g)
model.load_state_dict(torch.load("best.pt"))
earlier = torch.load("other.pt")
"""


def test_paths_each_process_makes_for_itself_are_not_saves_to_share() -> None:
    analysis = _analyze(PAIRS)
    found = sorted(_code(analysis, s.call) for s in saves(analysis))
    assert found == ['torch.save(model.state_dict(), "best.pt")', "torch.save(model.state_dict(), f)"]


def test_loads_of_the_saved_path_are_paired_also_through_an_opened_file() -> None:
    analysis = _analyze(PAIRS)
    found = {_code(analysis, s.call): s for s in saves(analysis)}
    best = paired_loads(analysis, found['torch.save(model.state_dict(), "best.pt")'].call)
    assert [_code(analysis, c) for c in best] == ['torch.load("best.pt")']
    opened = found["torch.save(model.state_dict(), f)"]
    assert _code(analysis, opened.opened) == 'with open("w.pt", "wb") as f:'
    assert _code(analysis, opened.anchor) == 'with open("w.pt", "wb") as f:'  # the open truncates first
    assert [_code(analysis, c) for c in paired_loads(analysis, opened.call)] == ["torch.load(g)"]


def test_a_saved_state_dict_is_told_from_one_used_in_memory() -> None:
    analysis = _analyze(
        """
        import torch
        def main(model, target):
            torch.save(model.state_dict(), "a.pt")
            state = model.state_dict()
            torch.save(state, "b.pt")
            target.load_state_dict(model.state_dict())
        """
    )
    calls = [c.node for c in analysis.facts.calls if c.func == "model.state_dict"]
    assert [state_dict_saved(analysis, c) for c in calls] == [True, True, False]


def test_a_save_in_a_method_called_under_an_if_waits_before_the_call() -> None:
    analysis = _analyze(
        """
        import torch
        class Trainer:
            def __init__(self, model, gpu_id):
                self.model, self.gpu_id = model, gpu_id
            def _save(self):
                torch.save(self.model.state_dict(), "c.pt")
            def train(self):
                for epoch in range(2):
                    step()
                    if self.gpu_id == 0:
                        self._save()
        def helper(model):
            torch.save(model.state_dict(), "h.pt")
        def main(model, flag):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            if flag:
                helper(model)
            if not flag:
                helper(model)
        if __name__ == "__main__":
            main()
        """
    )
    found = {_code(analysis, s.call): s for s in saves(analysis)}
    assert _code(analysis, found['torch.save(self.model.state_dict(), "c.pt")'].anchor) == "if self.gpu_id == 0:"
    assert found['torch.save(model.state_dict(), "h.pt")'].anchor is None  # two conditional callers


def test_a_barrier_stays_in_a_shared_branch_only_when_no_if_further_out_may_differ() -> None:
    """BLIP: `if utils.is_main_process(): if args.evaluate: ... else: torch.save(...)`: the
    inner test is a setting, but the outer one holds on one process only."""
    analysis = _analyze(
        """
        import torch
        for epoch in range(3):
            if utils.is_main_process():
                if args.evaluate:
                    log()
                else:
                    torch.save(model.state_dict(), "a.pt")
            if epoch % 2 == 0:
                with open("b.pt", "wb") as f:
                    torch.save(model.state_dict(), f)
        """
    )
    anchors = [_code(analysis, s.anchor) for s in saves(analysis)]
    assert anchors == ["if utils.is_main_process():", 'with open("b.pt", "wb") as f:']


def test_no_barrier_where_a_process_may_have_left_the_iteration_already() -> None:
    """`if loss.item() > 1.0: continue` above the save: a process that took it would never
    reach a barrier anywhere below, so there is none (the main process saves on its own)."""
    analysis = _analyze(
        """
        import torch
        step = 0
        for x in loader:
            loss = model(x)
            if loss.item() > 1.0:
                continue
            step += 1
            if step % 5 == 0:
                torch.save(model.state_dict(), "ckpt.pt")
        """
    )
    (save,) = saves(analysis)
    assert save.anchor is None


def test_a_path_bound_from_the_rank_is_each_process_s_own() -> None:
    """BLIP's `result_file = os.path.join(dir, '%s_rank%d.json' % (name, utils.get_rank()))`,
    then `open(result_file, 'w')`: one file per process, through the name; a name also
    bound to a shared path is not."""
    from migrator.analysis.saving import per_process_path

    analysis = _analyze("""
        import os
        def save(result, name, rank_of):
            result_file = os.path.join("out", "%s_rank%d.json" % (name, rank_of()))
            shared = os.path.join("out", name)
            if name:
                shared = result_file
            open(result_file, "w").write(result)
            open(shared, "w").write(result)
    """)
    opened = [c for c in analysis.facts.calls if c.func == "open"]
    assert [per_process_path(analysis, c.node.args[0].value) for c in opened] == [True, False]
