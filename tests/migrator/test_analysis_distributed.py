"""analysis/distributed.py and removal.py: hand-made distribution, what goes, and the
removal fixes rules share."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _code(analysis: ScriptAnalysis, node: cst.CSTNode) -> str:
    return analysis.module.code_for_node(node).strip()


TRAINING = """
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

def main(args):
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.distributed:
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)
    model = torch.nn.Linear(2, 2)
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = DistributedSampler(ds) if args.distributed else None
    loader = DataLoader(ds, sampler=sampler, shuffle=(sampler is None))
    for epoch in range(2):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x in loader:
            model(x).sum().backward()
        if dist.get_rank() == 0:
            print(model.module)
"""


def test_distribution_facts_of_a_ddp_script() -> None:
    analysis = _analyze(TRAINING)
    facts = analysis.patterns.distribution
    assert [w.kind for w in facts.wraps] == ["DistributedDataParallel"]
    assert facts.wraps[0].statement is not None  # `model = DDP(model, ...)` goes whole
    (sampler,) = facts.samplers
    assert sampler.name == "sampler" and not sampler.blockers and len(sampler.set_epochs) == 1
    assert sampler.args[0].shuffle == "True"
    assert [_code(analysis, c) for c in facts.inits] == ['dist.init_process_group("nccl")']
    assert [_code(analysis, c) for c in facts.set_devices] == ["torch.cuda.set_device(local_rank)"]
    assert [(_code(analysis, t.node), t.main) for t in facts.rank_tests] == [("dist.get_rank() == 0", True)]
    assert [_code(analysis, m) for m in facts.module_accesses] == ["model.module"]
    # local_rank is read only by code that goes (set_device, DDP's device_ids): the binding goes
    (plumbing,) = facts.plumbing
    assert plumbing.prop == "local_process_index" and plumbing.statement is not None


def test_statements_of_one_if_share_one_removal_fix() -> None:
    analysis = _analyze(TRAINING)
    facts = analysis.patterns.distribution
    init = facts.removal(analysis.parent(facts.inits[0]))
    set_device = facts.removal(analysis.parent(facts.set_devices[0]))
    assert init is set_device
    (edit,) = [e for e in init.edits if not e.replaces or e.node is not None][:1]
    assert _code(analysis, edit.node).startswith("if args.distributed:")


def test_a_sampler_and_its_set_epoch_go_in_one_fix_with_the_dataloader_argument() -> None:
    analysis = _analyze(TRAINING)
    facts = analysis.patterns.distribution
    (sampler,) = facts.samplers
    fix = facts.removal(sampler.statement)
    assert fix is facts.removal(sampler.set_epochs[0])
    replaced = [_code(analysis, e.node) for e in fix.edits if e.replaces]
    assert any(code.startswith("DataLoader(") for code in replaced)


def test_main_process_tests_beyond_rank_zero() -> None:
    analysis = _analyze(
        """
        import torch.distributed as dist
        a = not args.distributed or dist.get_rank() == 0
        b = args.rank % ngpus_per_node == 0
        c = args.local_rank not in [-1, 0]
        d = dist.get_rank() == 0 and epoch % 2 == 0
        e = not accelerator.is_main_process
        """
    )
    tests = [(_code(analysis, t.node), t.main) for t in analysis.patterns.distribution.rank_tests]
    assert tests == [
        ("not args.distributed or dist.get_rank() == 0", True),
        ("args.rank % ngpus_per_node == 0", True),
        ("args.local_rank not in [-1, 0]", False),
        ("dist.get_rank() == 0", True),  # only the rank part of the `and`
    ]


def test_all_reduce_operations() -> None:
    analysis = _analyze(
        """
        import torch.distributed as dist
        dist.all_reduce(t)
        dist.all_reduce(stats["loss"], op=dist.ReduceOp.AVG)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        h = dist.all_reduce(t, async_op=True)
        """
    )
    reduces = analysis.patterns.distribution.all_reduces
    assert [r.reduction for r in reduces] == ["sum", "mean", None, None]
    assert "MAX" in reduces[2].reason and "async_op" in reduces[3].reason


def test_spawn_and_other_collectives_are_only_reported() -> None:
    analysis = _analyze(
        "import torch.multiprocessing as mp\nimport torch.distributed as dist\n"
        "mp.spawn(worker, nprocs=2)\ndist.broadcast(t, 0)\nif dist.is_initialized():\n    pass\n"
    )
    facts = analysis.patterns.distribution
    assert len(facts.spawns) == 1
    assert [_code(analysis, c.func) for c in facts.raw_calls] == ["dist.broadcast"]


def test_a_loop_variable_named_rank_is_not_the_process_rank() -> None:
    analysis = _analyze("for rank in range(4):\n    if rank == 0:\n        pass\nif args.rank == 0:\n    pass\n")
    assert [_code(analysis, t.node) for t in analysis.patterns.distribution.rank_tests] == ["args.rank == 0"]
