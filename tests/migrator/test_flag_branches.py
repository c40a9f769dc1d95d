"""Flag-style scripts (analysis/flag_branches.py, AM217, AM102, AM205): the launch test is
read whole, the device spelled from the local rank is the Accelerator's, and an if/else
on the flag collapses to its distributed branch only when that branch gives the other's
values on one process."""

from __future__ import annotations

import textwrap

from migrator.api import migrate_source

HEAD = """
import os
import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader


def main(dataset):
"""
TAIL = """
    torch.manual_seed(seed)
    model = torch.nn.Linear(2, 2).to(device)
    if ddp:
        model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(dataset, batch_size=4):
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(world, loss.item())
"""


def _migrate(body: str) -> str:
    source = HEAD + textwrap.indent(textwrap.dedent(body), "    ") + TAIL
    return migrate_source(source, "train.py").after


def test_a_launch_test_becomes_the_process_count_and_the_branches_collapse() -> None:
    after = _migrate("""
        ddp = int(os.environ.get("RANK", -1)) != -1
        if ddp:
            init_process_group(backend="nccl")
            rank = int(os.environ["RANK"])
            world = int(os.environ["WORLD_SIZE"])
            device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
            seed = 1337 + rank
        else:
            world = 1
            seed = 1337
            device = "cuda" if torch.cuda.is_available() else "cpu"
    """)
    assert "ddp" not in after  # read by nothing once DDP's wrap goes
    assert "else:" not in after and "process_index != -1" not in after
    assert "world = accelerator.num_processes" in after
    assert "seed = 1337 + rank" in after
    assert "device = accelerator.device" in after and "cuda:" not in after


def test_branches_that_differ_on_one_process_both_stay() -> None:
    after = _migrate("""
        ddp = "RANK" in os.environ
        if ddp:
            init_process_group(backend="nccl")
            world = int(os.environ["WORLD_SIZE"])
            seed = int(os.environ["RANK"])
            device = "cuda"
        else:
            world = 1
            seed = 7
            device = "cuda" if torch.cuda.is_available() else "cpu"
    """)
    assert "ddp = accelerator.num_processes > 1" in after
    assert "seed = accelerator.process_index" in after and "seed = 7" in after
    assert "else:" in after and after.count("device = accelerator.device") == 2


def test_a_device_spelled_from_the_local_rank_option_is_the_accelerators() -> None:
    after = _migrate("""
        ddp = args.local_rank != -1
        world = 1
        seed = 0
        device = "cuda:%d" % args.local_rank
    """)
    assert "device = accelerator.device" in after and "cuda:%d" not in after


def test_ddp_sync_switch_stays_on_the_prepared_model() -> None:
    source = textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader


        def main(dataset):
            model = torch.nn.Linear(2, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model = torch.nn.parallel.DistributedDataParallel(model)
            for i, (x, y) in enumerate(DataLoader(dataset, batch_size=4)):
                model.require_backward_grad_sync = i % 2 == 1
                loss = torch.nn.functional.mse_loss(model(x), y) / 2
                loss.backward()
                if i % 2 == 1:
                    optimizer.step()
                    optimizer.zero_grad()
    """)
    after = migrate_source(source, "train.py").after
    assert "    model.require_backward_grad_sync = i % 2 == 1" in after


def test_an_assert_that_a_launcher_started_the_script_stays() -> None:
    after = _migrate("""
        assert "LOCAL_RANK" in os.environ, "run me with torchrun"
        assert int(os.environ.get("RANK", -1)) != -1
        ddp = True
        world = int(os.environ["WORLD_SIZE"])
        seed = 0
        device = "cuda"
    """)
    assert 'assert "LOCAL_RANK" in os.environ' in after and "accelerator.prepare(" in after
    assert 'assert int(os.environ.get("RANK", -1)) != -1' in after


def test_the_verifier_refuses_a_launch_test_rewritten_in_part() -> None:
    from migrator.verify import distribution
    from migrator.verify.pair import Pair

    before = "import os\nimport torch\nmodel = torch.nn.Linear(2, 2)\nddp = int(os.environ.get('RANK', -1)) != -1\n"
    after = (
        "import torch\nfrom runtime import Accelerator\naccelerator = Accelerator()\nmodel = torch.nn.Linear(2, 2)\n"
        "model = accelerator.prepare(model)\nddp = accelerator.process_index != -1\n"
    )
    problems = distribution.check(Pair.of(before, after))
    assert any("never is" in p.message for p in problems), problems
