"""What a project's own distribution helpers do, read from their bodies (project/dist_helpers.py)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from migrator import project
from migrator.api import migrate_paths
from migrator.config import Config
from migrator.project.dist_helpers import Helper, summarise

UTILS = textwrap.dedent('''\
    import logging
    import os

    import torch
    import torch.distributed as dist


    def ready():
        return dist.is_available() and dist.is_initialized()


    def world():
        if not ready():
            return 1
        return dist.get_world_size()


    def rank():
        if not ready():
            return 0
        return dist.get_rank()


    def main_process():
        return rank() == 0


    def save_main(*args, **kwargs):
        if main_process():
            torch.save(*args, **kwargs)


    def mean_over_ranks(t):
        if world() > 1:
            dist.all_reduce(t)
            t /= world()
        return t


    def setup_for_distributed(is_master):
        pass


    def log_to(path):
        logging.getLogger().addHandler(logging.FileHandler(path))


    def join(opts):
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            opts.rank = int(os.environ["RANK"])
            opts.world_size = int(os.environ["WORLD_SIZE"])
            opts.gpu = int(os.environ["LOCAL_RANK"])
        elif "SLURM_PROCID" in os.environ:
            opts.rank = int(os.environ["SLURM_PROCID"])
            opts.gpu = opts.rank % torch.cuda.device_count()
        else:
            opts.distributed = False
            return
        opts.distributed = True
        opts.dist_url = "env://"
        dist.init_process_group(backend="nccl", init_method=opts.dist_url)
        setup_for_distributed(opts.rank == 0)
''')


def test_each_helper_is_read_from_its_body_whatever_its_name() -> None:
    found = summarise(ast.parse(UTILS))
    assert found["world"] == Helper("num_processes")
    assert found["rank"] == Helper("process_index")
    assert found["main_process"] == Helper("is_main_process")
    assert found["save_main"] == Helper("save_on_master")
    assert found["mean_over_ranks"] == Helper("reduced")
    assert found["log_to"] == Helper("log_file")
    assert "ready" not in found and "setup_for_distributed" not in found
    join = found["join"]
    assert join.kind == "setup" and join.prints == "setup_for_distributed"
    # the SLURM branch agrees with the launcher's (rank, and the local rank from it);
    # a string set on the holder has no meaning we know
    assert dict(join.attributes) == {
        "rank": "process_index", "world_size": "num_processes", "gpu": "local_process_index",
        "distributed": "distributed", "dist_url": "",
    }


def test_callers_learn_the_helpers_they_call_and_the_attributes_read(tmp_path) -> None:
    main = textwrap.dedent('''\
        import misc


        def run(opts):
            misc.join(opts)
            if opts.distributed:
                print(misc.rank(), misc.world())
    ''')
    sources = {str(tmp_path / "misc.py"): UTILS.encode(), str(tmp_path / "run.py"): main.encode()}
    found = project.distribution_calls(sources, project.index(sources))
    calls = {spelling: rest for spelling, *rest in found[str(tmp_path / "run.py")]}
    assert calls["misc.rank"][0] == "process_index"
    assert calls["misc.world"][0] == "num_processes"
    kind, attributes, prints = calls["misc.join"]
    assert kind == "setup" and prints == "misc.setup_for_distributed"
    # read by this file only (the caller's analysis keeps those it still reads); `dist_url`
    # and `world_size` no file mentions
    assert ("distributed", "distributed", False) in attributes
    assert not {a for a, *_ in attributes} & {"dist_url", "world_size", "gpu"}


def test_a_setup_helper_setting_an_attribute_of_unknown_meaning_that_is_read_stays(tmp_path) -> None:
    main = "import misc\n\n\ndef run(opts):\n    misc.join(opts)\n    print(opts.dist_url)\n"
    sources = {str(tmp_path / "misc.py"): UTILS.encode(), str(tmp_path / "run.py"): main.encode()}
    found = project.distribution_calls(sources, project.index(sources))
    assert "misc.join" not in {spelling for spelling, *_ in found.get(str(tmp_path / "run.py"), ())}


SILENCING_UTILS = textwrap.dedent('''\
    import os

    import torch.distributed as dist


    def setup_for_distributed(is_master):
        import builtins as __builtin__
        builtin_print = __builtin__.print

        def print(*args, **kwargs):
            if is_master or kwargs.pop("force", False):
                builtin_print(*args, **kwargs)

        __builtin__.print = print


    def init_distributed_mode(args):
        if args.dist_on_itp:
            args.rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        args.dist_url = "env://"
        dist.init_process_group(backend="nccl", init_method=args.dist_url)
        setup_for_distributed(args.rank == 0)


    def plain(args):
        return args
''')
SILENCED_MAIN = textwrap.dedent('''\
    import torch
    import utils


    def main(args):
        utils.{call}(args)
        print(args.dist_url)
        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.ones(1, 2)).sum()
            loss.backward()
            optimizer.step()
            print("step", step, loss.item())
''')


@pytest.mark.parametrize("call, silenced", [("init_distributed_mode", True), ("plain", False)])
def test_prints_of_a_run_whose_helper_silences_print_are_left_alone(tmp_path, call, silenced) -> None:
    """ConvNeXt's `init_distributed_mode` sets an attribute of unknown meaning that its caller
    reads (`args.dist_url`), so the migration cannot convert it; it still calls
    `setup_for_distributed`, and every print after it runs once: AM511 says nothing."""
    (tmp_path / "utils.py").write_text(SILENCING_UTILS)
    (tmp_path / "main.py").write_text(SILENCED_MAIN.format(call=call))
    found = project.print_silencer_calls(
        {str(p): p.read_bytes() for p in tmp_path.iterdir()},
        project.index({str(p): p.read_bytes() for p in tmp_path.iterdir()}),
    )
    assert (str(tmp_path / "main.py") in found) is silenced
    results = migrate_paths([str(tmp_path)], Config())
    codes = [f.code for r in results if r.path.endswith("main.py") for f in r.findings]
    assert ("AM511" in codes) is not silenced


def test_a_script_that_replaces_print_itself_keeps_its_prints(tmp_path) -> None:
    """simsiam: `builtins.print = print_pass` on the other processes, in the file itself."""
    script = SILENCED_MAIN.format(call="plain").replace(
        "import utils\n", "import builtins\n\nimport utils\n"
    ).replace("    utils.plain(args)\n", "    if args.gpu != 0:\n        builtins.print = lambda *a, **k: None\n")
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "utils.py").write_text(SILENCING_UTILS)
    (result,) = migrate_paths([str(tmp_path / "train.py")], Config())
    assert "AM511" not in [f.code for f in result.findings]
    assert "accelerator.backward(loss)" in result.after


def test_print_replaced_on_a_flag_every_process_shares_is_not_silencing(tmp_path) -> None:
    """`if args.quiet: builtins.print = ...` silences every process or none: the training
    loop's print still prints once per process, and is converted."""
    script = SILENCED_MAIN.format(call="plain").replace(
        "import utils\n", "import builtins\n\nimport utils\n"
    ).replace("    utils.plain(args)\n", "    if args.quiet:\n        builtins.print = lambda *a, **k: None\n")
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "utils.py").write_text(SILENCING_UTILS)
    (result,) = migrate_paths([str(tmp_path / "train.py")], Config())
    assert 'accelerator.print("step", step, loss.item())' in result.after


PLACING_TOOLS = textwrap.dedent('''\
    import torch


    def model_device(n_gpu, model):
        device = torch.device("cuda:0" if n_gpu else "cpu")
        if n_gpu > 1:
            model = torch.nn.DataParallel(model, device_ids=list(range(n_gpu)))
        return model.to(device), device


    def on_device(n_gpu, model):
        device = torch.device("cuda:0" if n_gpu else "cpu")
        return model.to(device), device
''')
PLACED_TRAIN = textwrap.dedent('''\
    import torch

    from tools import {helper}


    def main(n_gpu):
        model = torch.nn.Linear(2, 2)
        model, device = {helper}(n_gpu, model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.ones(8, 2), batch_size=4)
        for x in loader:
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
''')


def test_a_helper_wrapping_the_model_it_is_handed_is_read_from_its_body() -> None:
    found = summarise(ast.parse(PLACING_TOOLS))
    assert found["model_device"] == Helper("wraps_model")
    assert "on_device" not in found  # a move alone is no wrap


@pytest.mark.parametrize("helper, refused", [("model_device", True), ("on_device", False)])
def test_a_call_of_another_files_model_wrapping_helper_is_named_and_refused(tmp_path, helper, refused) -> None:
    """lonePatient's trainer: `model_device(n_gpu, model)` of another file wraps the model
    in DataParallel; kept beside prepare(), two wrappers nest, with no finding before."""
    (tmp_path / "tools.py").write_text(PLACING_TOOLS)
    (tmp_path / "train.py").write_text(PLACED_TRAIN.format(helper=helper))
    results = migrate_paths([str(tmp_path)], Config())
    (train,) = [r for r in results if r.path.endswith("train.py")]
    messages = {f.code: f.message for f in train.findings}
    assert ("AM219" in messages) is refused
    assert (train.after == train.before) is refused
    if refused:
        assert "`model_device(...)`" in messages["AM219"] and "nest" in messages["AM955"]
        lint = migrate_paths([str(tmp_path)], Config(fix=False))
        assert "AM219" in [f.code for r in lint if r.path.endswith("train.py") for f in r.findings]


def test_a_helper_reducing_a_copy_of_its_argument_is_a_reducer() -> None:
    """Swin's `reduce_tensor`: `rt = tensor.clone()`, then `dist.all_reduce(rt)`."""
    helper = (
        "import torch.distributed as dist\n\n\ndef reduce_tensor(tensor):\n    rt = tensor.clone()\n"
        "    dist.all_reduce(rt, op=dist.ReduceOp.SUM)\n    rt /= dist.get_world_size()\n    return rt\n"
    )
    assert summarise(ast.parse(helper))["reduce_tensor"] == Helper("reduced")
