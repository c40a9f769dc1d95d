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


TORCHRUN_TRAINER = """
import os
import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

def setup():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group("nccl")

class Trainer:
    def __init__(self, model, data, optimizer):
        self.gpu = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu)
        self.data = data
        self.optimizer = optimizer
        self.restore()
        self.model = DDP(self.model, device_ids=[self.gpu])

    def restore(self):
        self.model.load_state_dict(torch.load("last.pt"))

    def step(self, x, y):
        self.optimizer.zero_grad()
        torch.nn.functional.mse_loss(self.model(x), y).backward()
        self.optimizer.step()

    def fit(self):
        for x, y in self.data:
            self.step(x.to(self.gpu), y.to(self.gpu))

def make_loader(ds):
    return DataLoader(ds, batch_size=4)

def main(ds):
    setup()
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    Trainer(model, make_loader(ds), optimizer).fit()
"""


def test_a_torchrun_trainer_prepares_at_its_ddp_wrap() -> None:
    analysis = _analyze(TORCHRUN_TRAINER)
    # the wrap names the model; the loop that hands its batch to a training method, the loader
    assert analysis.roles.of("self.model").value == "model"
    assert analysis.roles.of("self.data").value == "dataloader"
    # prepare() goes where DDP wrapped (after the restore), in place of the parameter `model`
    assert analysis.training_block.scope.name.value == "__init__"
    (group,) = analysis.plan.groups
    assert group.names == ("self.model", "self.optimizer", "self.data")
    assert _code(analysis, group.after).startswith("self.model = DDP(")
    # the Accelerator is made in main(), which builds the Trainer, and injected into it
    assert analysis.setup.block.scope.name.value == "main"
    assert analysis.accelerator_at(group.after) == "self.accelerator"
    # the local rank is a device index: moves to it are device moves prepare() makes redundant
    moved = {_code(analysis, m.call) for m in analysis.device_moves if id(m.call) in analysis.droppable_moves}
    assert moved == {"model.to(self.gpu)", "x.to(self.gpu)", "y.to(self.gpu)"}


def test_a_setup_helper_left_empty_goes_whole_with_its_calls() -> None:
    analysis = _analyze(TORCHRUN_TRAINER)
    facts = analysis.patterns.distribution
    fix = facts.removal(analysis.parent(facts.inits[0]))
    assert fix is facts.removal(analysis.parent(facts.set_devices[0]))
    removed = sorted(_code(analysis, e.node).splitlines()[0] for e in fix.edits)
    assert removed == ["def setup():", "setup()"]


def test_a_helper_that_keeps_a_statement_stays() -> None:
    analysis = _analyze(TORCHRUN_TRAINER.replace('    init_process_group("nccl")\n', '    init_process_group("nccl")\n    print("joined")\n'))
    facts = analysis.patterns.distribution
    fix = facts.removal(analysis.parent(facts.inits[0]))
    assert [_code(analysis, e.node) for e in fix.edits] == ['init_process_group("nccl")']


def test_a_device_spelled_from_the_local_rank_for_map_location() -> None:
    analysis = _analyze(
        """
        import os
        import torch

        gpu = int(os.environ["LOCAL_RANK"])
        loc = f"cuda:{gpu}"
        state = torch.load("a.pt", map_location=loc)
        other = torch.load("b.pt", map_location=f"cuda:{gpu}")
        shown = f"cuda:{gpu}"
        print(shown)
        """
    )
    strings = analysis.patterns.distribution.device_strings
    assert [analysis.line_of(s) is not None and _code(analysis, analysis.statement_of(s)) for s in strings] == [
        'loc = f"cuda:{gpu}"',
        'other = torch.load("b.pt", map_location=f"cuda:{gpu}")',
    ]  # `shown` is printed: a string it stays


def test_a_wrap_replaced_by_its_module_keeps_what_the_module_reads() -> None:
    code = TORCHRUN_TRAINER.replace(
        "        self.model = model.to(self.gpu)\n", ""
    ).replace("self.model = DDP(self.model, device_ids=[self.gpu])", "self.model = DDP(MODULE, device_ids=[self.gpu])")
    # the move inside the wrap goes with it (prepare places the model), so nothing reads the rank
    moved = _analyze(code.replace("MODULE", "model.to(self.gpu)"))
    assert {_code(moved, m.call) for m in moved.device_moves if id(m.call) in moved.droppable_moves} >= {"model.to(self.gpu)"}
    assert [p.statement is not None for p in moved.patterns.distribution.plumbing] == [True]
    # a module built from the rank still reads it once DDP(...) is gone: the binding stays
    built = _analyze(code.replace("MODULE", "make(self.gpu)"))
    assert [p.statement is not None for p in built.patterns.distribution.plumbing] == [False]
