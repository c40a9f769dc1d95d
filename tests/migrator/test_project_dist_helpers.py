"""What a project's own distribution helpers do, read from their bodies (project/dist_helpers.py)."""

from __future__ import annotations

import ast
import textwrap

from migrator import project
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
