"""The verifier on its own: pairs of (original, migration) it must refuse or accept.

Each refusal case is a shape a rule once produced on real code; each acceptance case is
a correct migration that an earlier version of a check refused.
"""

from __future__ import annotations

import textwrap

import pytest

from migrator.verify import verify

HEAD = "import torch\nfrom runtime import Accelerator\n"


def _codes(before: str, after: str) -> list[tuple[str, int]]:
    return [(p.code, p.line) for p in verify(textwrap.dedent(before), textwrap.dedent(after))]


def test_identical_texts_have_nothing_to_say() -> None:
    text = "import torch\nx = torch.zeros(2)\n"
    assert verify(text, text) == []


def test_text_ast_cannot_parse_is_not_judged() -> None:
    assert verify("x = 1\n", "x = (\n") == []


# AM950: names ------------------------------------------------------------------------
def test_prepare_above_the_accelerator_is_refused() -> None:
    before = """
        import torch
        def main():
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
    """
    after = """
        import torch
        def main():
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model, opt = accelerator.prepare(model, opt)
            accelerator = Accelerator()
    """
    assert ("AM950", 5) in _codes(before, after)


def test_prepare_of_an_object_bound_in_one_branch_only() -> None:
    before = """
        import torch
        def main(args):
            model = Net()
            if args.train:
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                if args.train:
                    optimizer.step()
    """
    after = """
        import torch
        def main(args):
            accelerator = Accelerator()
            model = Net()
            if args.train:
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model, optimizer = accelerator.prepare(model, optimizer)
            for x in loader:
                if args.train:
                    optimizer.step()
    """
    assert ("AM950", 7) in _codes(before, after)


@pytest.mark.parametrize(
    "branch",
    [
        "if a:\n        model = Net()\n    else:\n        model = Big()",
        "if a:\n        model = Net()\n    else:\n        raise SystemExit('no model')",
        "try:\n        model = Net()\n    except ImportError:\n        model = Big()",
        "if a:\n        model = Net()\n    elif b:\n        model = Big()\n    model.train()",  # read below anyway
    ],
)
def test_prepare_of_an_object_bound_on_every_path(branch: str) -> None:
    body = f"def main(a, b):\n    {branch}\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    after = body.replace("def main(a, b):\n", "def main(a, b):\n    accelerator = Accelerator()\n") + (
        "    model, opt = accelerator.prepare(model, opt)\n"
    )
    assert not [c for c in _codes(HEAD + body, HEAD + after) if c[0] == "AM950"]


def test_undefined_names_the_script_already_had_are_not_blamed() -> None:
    before = "import torch\nprint(undefined_thing)\n"
    after = "import torch\nfrom runtime import Accelerator\naccelerator = Accelerator()\nprint(undefined_thing)\n"
    assert _codes(before, after) == []


def test_keyword_passed_from_a_function_without_an_accelerator() -> None:
    before = """
        def stylize(args):
            pass
        def main():
            stylize(None)
    """
    after = """
        def stylize(args, *, accelerator):
            pass
        def main():
            stylize(None, accelerator=accelerator)
    """
    assert ("AM950", 5) in _codes(before, after)


def test_self_attribute_read_in_init_before_it_is_assigned() -> None:
    before = """
        class Trainer:
            def __init__(self, config):
                self.config = config
    """
    after = """
        class Trainer:
            def __init__(self, config):
                self.accelerator = Accelerator(mixed_precision="fp16" if self.config.amp else "no")
                self.config = config
    """
    assert ("AM950", 4) in _codes(before, after)


# AM951: whole set-ups ----------------------------------------------------------------
def test_optimizer_prepared_without_its_model() -> None:
    before = """
        import torch
        encoder = Encoder()
        def train(loader):
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
    """
    after = HEAD + textwrap.dedent("""
        encoder = Encoder()
        def train(loader):
            accelerator = Accelerator()
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
            opt = accelerator.prepare(opt)
    """)
    assert "AM951" in [c for c, _ in _codes(before, after)]


def test_model_prepared_without_the_optimizer_a_grad_scaler_steps() -> None:
    """SRGAN: the models are prepared where they are built, the optimizers elsewhere, and
    only a GradScaler steps them (`scaler.step(optimizer)`)."""
    before = """
        import torch
        def build():
            return Net()
        def optimizers(model):
            return torch.optim.Adam(model.parameters())
        model = build()
        optimizer = optimizers(model)
        scaler.step(optimizer)
    """
    after = HEAD + textwrap.dedent("""
        def build():
            accelerator = Accelerator()
            model = Net()
            model = accelerator.prepare(model)
            return model
        def optimizers(model):
            optimizer = torch.optim.Adam(model.parameters())
            return optimizer
        model = build()
        optimizer = optimizers(model)
        scaler.step(optimizer)
    """)
    assert "AM951" in [c for c, _ in _codes(before, after)]


def test_a_model_prepared_in_a_function_that_only_borrows_it() -> None:
    """SRGAN's `define_optimizer(g_model, d_model, config)` returns the optimizers only:
    models prepared there would never reach the training loop."""
    before = """
        import torch
        def define_optimizer(model):
            optimizer = torch.optim.Adam(model.parameters())
            return optimizer
    """
    after = HEAD + textwrap.dedent("""
        def define_optimizer(model):
            accelerator = Accelerator()
            optimizer = torch.optim.Adam(model.parameters())
            model, optimizer = accelerator.prepare(model, optimizer)
            return optimizer
    """)
    assert [p.message for p in verify(textwrap.dedent(before), after) if "inside `define_optimizer()`" in p.message]
    kept = after.replace("return optimizer", "return model, optimizer")
    assert "AM951" not in [c for c, _ in _codes(before, kept)]


def test_weight_decay_groups_lead_back_to_the_model() -> None:
    before = """
        import torch
        model = Net()
        params = list(model.named_parameters())
        groups = [{"params": [p for n, p in params if "bias" not in n]}]
        opt = torch.optim.AdamW(groups, lr=1e-3)
    """
    after = HEAD + textwrap.dedent("""
        accelerator = Accelerator()
        model = Net()
        params = list(model.named_parameters())
        groups = [{"params": [p for n, p in params if "bias" not in n]}]
        opt = torch.optim.AdamW(groups, lr=1e-3)
        opt = accelerator.prepare(opt)
    """)
    assert any("model `model`" in p.message for p in verify(textwrap.dedent(before), after))


def test_training_loop_over_an_unprepared_loader() -> None:
    before = """
        import torch
        from torch.utils.data import DataLoader
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(data)
        for x in loader:
            model(x).sum().backward()
    """
    after = HEAD + textwrap.dedent("""
        from torch.utils.data import DataLoader
        accelerator = Accelerator()
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt = accelerator.prepare(model, opt)
        loader = DataLoader(data)
        for x in loader:
            accelerator.backward(model(x).sum())
    """)
    assert "AM951" in [c for c, _ in _codes(before, after)]


def test_a_tqdm_of_the_same_name_in_another_function_is_another_variable() -> None:
    """vq-vae-2: `train()` shows its own `loader = tqdm(loader)`; main() prepares the
    DataLoader it built under that name."""
    before = """
        import torch
        def train(loader):
            loader = tqdm(loader)
        def main():
            loader = DataLoader(data)
            train(loader)
    """
    after = HEAD + textwrap.dedent("""
        def train(loader):
            loader = tqdm(loader)
        def main():
            accelerator = Accelerator()
            loader = DataLoader(data)
            loader = accelerator.prepare(loader)
            train(loader)
    """)
    assert "AM951" not in [c for c, _ in _codes(before, after)]


def test_a_tqdm_object_given_to_prepare() -> None:
    before = "import torch\nbar = tqdm(loader)\n"
    after = HEAD + "accelerator = Accelerator()\nbar = tqdm(loader)\nbar = accelerator.prepare(bar)\n"
    assert "AM951" in [c for c, _ in _codes(before, after)]


# AM952: stale uses -------------------------------------------------------------------
PREPARED = HEAD + "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel, opt = accelerator.prepare(model, opt)\n"
ORIGINAL = "import torch\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"


@pytest.mark.parametrize(
    "use",
    [
        "z = model.decode(h)",
        "h = model.init_hidden(4)",
        "w = model.module.weight",
        "target.load_state_dict(model.state_dict())",
        "torch.save(model.state_dict(), 'm.pt')",
        "model.load_state_dict(torch.load('m.pt'))",
        "sd = model.state_dict()\nfor k in sd:\n    other[k] = sd[k]",
    ],
)
def test_the_wrapper_used_like_the_module(use: str) -> None:
    assert "AM952" in [c for c, _ in _codes(ORIGINAL + use + "\n", PREPARED + use + "\n")]


@pytest.mark.parametrize(
    "use",
    [
        "model.train()\nout = model(x)",
        "n = sum(p.numel() for p in model.parameters())",
        "z = accelerator.unwrap_model(model).decode(h)",
        "best = {k: v.clone() for k, v in model.state_dict().items()}\nmodel.load_state_dict(best)",
    ],
)
def test_what_the_wrapper_answers_like_the_module(use: str) -> None:
    assert _codes(ORIGINAL + use + "\n", PREPARED + use + "\n") == []


def test_uses_before_prepare_and_of_another_binding_are_the_plain_module() -> None:
    before = ORIGINAL + "model.decode(h)\nmodel = Net()\nmodel.decode(h)\n"
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model.decode(h)\nmodel, opt = accelerator.prepare(model, opt)\nmodel = Net()\nmodel.decode(h)\n"
    )
    assert _codes(before, after) == []


def test_a_parameter_fed_only_unprepared_models_is_the_plain_module() -> None:
    before = ORIGINAL + "def greedy(model):\n    return model.encode(1)\ndef infer():\n    model = Net()\n    greedy(model)\n"
    after = PREPARED + "def greedy(model):\n    return model.encode(1)\ndef infer():\n    model = Net()\n    greedy(model)\n"
    assert _codes(before, after) == []


def test_set_epoch_left_after_its_sampler() -> None:
    before = "import torch\nloader = DataLoader(ds, sampler=DistributedSampler(ds))\nloader.sampler.set_epoch(0)\n"
    after = HEAD + "loader = DataLoader(ds, shuffle=True)\nloader.sampler.set_epoch(0)\n"
    assert "AM952" in [c for c, _ in _codes(before, after)]
    guarded = 'if hasattr(loader.sampler, "set_epoch"):\n    loader.sampler.set_epoch(0)\n'
    before_guarded = before.replace("loader.sampler.set_epoch(0)\n", guarded)
    after_guarded = after.replace("loader.sampler.set_epoch(0)\n", guarded)
    assert _codes(before_guarded, after_guarded) == []


def test_device_compared_as_a_string_after_it_became_a_torch_device() -> None:
    before = 'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\nif device == "cuda":\n    pass\n'
    after = HEAD + 'accelerator = Accelerator()\ndevice = accelerator.device\nif device == "cuda":\n    pass\n'
    assert "AM952" in [c for c, _ in _codes(before, after)]


# AM953: device moves -----------------------------------------------------------------
def test_move_removed_from_a_model_rebuilt_after_prepare() -> None:
    before = "import torch\nmodel = Net().to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\ntrain(model)\nmodel = Net().to(device)\n"
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = accelerator.prepare(model, opt)\ntrain(model)\nmodel = Net()\n"
    )
    assert _codes(before, after) == [("AM953", 5)]


def test_move_back_removed_after_the_model_went_to_the_cpu() -> None:
    before = "import torch\nmodel = Net().to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel.cpu()\nmodel.to(device)\n"
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = accelerator.prepare(model, opt)\nmodel.cpu()\n"
    )
    assert ("AM953", 5) in _codes(before, after)


def test_batch_moves_go_only_for_prepared_loaders() -> None:
    before = (
        "import torch\nmodel = Net().to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for batch in loader:\n    batch = {k: v.to(device) for k, v in batch.items()}\n"
        "for x in other:\n    x = x.to(device)\n"
    )
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
        "for batch in loader:\n    pass\nfor x in other:\n    pass\n"
    )
    assert _codes(before, after) == [("AM953", 7)]


def test_a_model_fed_cpu_tensors_it_never_placed() -> None:
    before = "import torch\nseq = Seq()\nopt = torch.optim.LBFGS(seq.parameters())\nx = torch.from_numpy(data).double()\nout = seq(x)\n"
    after = HEAD + (
        "accelerator = Accelerator()\nseq = Seq()\nopt = torch.optim.LBFGS(seq.parameters())\n"
        "seq, opt = accelerator.prepare(seq, opt)\nx = torch.from_numpy(data).double()\nout = seq(x)\n"
    )
    assert [c for c, _ in _codes(before, after)] == ["AM953"]


def test_move_removed_before_a_checkpoint_loader_rebinds_the_model() -> None:
    """`model, opt, epoch = load_checkpoint(model, opt, path)` between the removed move and
    the prepare(): the loader hands the same model back, and prepare() places it."""
    before = (
        "import torch\ndef train(resume):\n    model = Net().to(device)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    if resume:\n        model, opt, epoch = utils.load_checkpoint(model, opt, 'ckpt.pt')\n    model(x).sum().backward()\n"
    )
    after = HEAD + (
        "accelerator = Accelerator()\ndef train(resume):\n    model = Net()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    if resume:\n        model, opt, epoch = utils.load_checkpoint(model, opt, 'ckpt.pt')\n"
        "    model, opt = accelerator.prepare(model, opt)\n    model(x).sum().backward()\n"
    )
    assert _codes(before, after) == []


def test_move_removed_before_a_call_that_needs_the_model_on_its_device() -> None:
    """apex's `amp.initialize(model, opt)` checks that the model is on the GPU already."""
    before = (
        "import torch\nmodel = Net().to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = amp.initialize(model, opt)\nmodel(x).sum().backward()\n"
    )
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = amp.initialize(model, opt)\nmodel, opt = accelerator.prepare(model, opt)\nmodel(x).sum().backward()\n"
    )
    assert _codes(before, after) == [("AM953", 2)]


# AM954: calls ------------------------------------------------------------------------
def test_required_parameter_with_no_caller_in_the_file() -> None:
    before = "def test(model, loader):\n    pass\n"
    after = "def test(model, loader, *, accelerator):\n    pass\n"
    assert _codes(before, after) == [("AM954", 1)]


def test_method_calls_of_the_same_name_are_not_callers() -> None:
    before = "def train(model):\n    model.train()\ndef main():\n    train(m)\n"
    after = "def train(model, *, accelerator):\n    model.train()\ndef main():\n    accelerator = 1\n    train(m, accelerator=accelerator)\n"
    assert _codes(before, after) == []


# AM916: silence ----------------------------------------------------------------------
def test_training_code_with_its_set_up_elsewhere_is_named() -> None:
    from migrator.verify.silence import silent_training

    text = "class T(Base):\n    def epoch(self):\n        loss.backward()\n        self.optimizer.step()\n"
    assert [(p.code, p.line) for p in silent_training(text)] == [("AM916", 3), ("AM916", 4)]


def test_a_wrap_in_a_file_that_builds_the_optimizer_from_a_factory_is_named_once() -> None:
    """yassouali's BaseTrainer: the wrap goes, the model is prepared with its optimizer
    there, and the training loader where it is built (reader R4: preparing loaders at the
    wrap would size the Poly schedule from the whole data set and unshard the prefetcher)."""
    from migrator.verify.silence import wrapped_for_training

    text = (
        "import torch\n\n\nclass Base:\n    def __init__(self, model, config, loader):\n"
        "        self.model = torch.nn.DataParallel(model)\n"
        "        self.optimizer = getattr(torch.optim, config['optim'])(self.model.parameters())\n"
        "        self.other = torch.nn.DataParallel(model)\n"
    )
    found = wrapped_for_training(text)
    assert [(p.code, p.line) for p in found] == [("AM916", 6)], found
    assert "the training loader where it is built" in found[0].message and "stays out of prepare()" in found[0].message


def test_migrated_code_is_not_silent_training() -> None:
    from migrator.verify.silence import silent_training

    text = "accelerator = Accelerator()\naccelerator.backward(loss)\noptimizer.step()\n"
    assert silent_training(text) == []


def test_the_engine_reports_silent_training_through_the_cli(tmp_path) -> None:
    import subprocess
    import sys

    script = tmp_path / "trainer.py"
    script.write_text("import torch\n\n\nclass T(Base):\n    def epoch(self):\n        self.optimizer.zero_grad()\n        self.loss.backward()\n")
    run = subprocess.run([sys.executable, "-m", "migrator", str(script), "--diff", "--no-cache"], capture_output=True, text=True)
    assert "7:9: AM916" in run.stdout and run.returncode == 1, run.stdout + run.stderr


def test_a_set_up_in_a_function_nothing_here_calls() -> None:
    before = "import torch\ndef train(rank, model):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model(x).sum().backward()\n"
    after = HEAD + (
        "def train(rank, model):\n    accelerator = Accelerator()\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model, opt = accelerator.prepare(model, opt)\n"
        "    model(x).sum().backward()\n"
    )
    assert ("AM954", 3) in _codes(before, after)
    entry = after.replace("def train(rank, model)", "def main(rank, model)")
    assert _codes(before.replace("def train", "def main"), entry) == []


def test_a_set_up_handing_its_training_elsewhere_without_a_loader_is_refused() -> None:
    """`Engine(model, optimizer).run()`: the engine trains on data it reads itself, which no
    prepare() here shards; with the loader prepared, or a backward here, the set-up is whole."""
    before = "import torch\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nEngine(model, opt).run()\n"
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = accelerator.prepare(model, opt)\nEngine(model, opt).run()\n"
    )
    assert _codes(before, after) == [("AM951", 4)]
    with_loader = after.replace("prepare(model, opt)", "prepare(model, opt, train_loader)").replace(
        "model, opt =", "model, opt, train_loader ="
    )
    assert _codes(before.replace("model = Net()", "model, train_loader = Net(), make_loader()"), with_loader.replace(
        "model = Net()", "model, train_loader = Net(), make_loader()"
    )) == []
    handed_model_only = after.replace("Engine(model, opt)", "Engine(model)")
    assert _codes(before, handed_model_only) == []


# AM955: one distributed engine -------------------------------------------------------
def test_a_script_distributed_by_another_engine_is_left_whole() -> None:
    before = "import torch\nimport horovod.torch as hvd\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    after = HEAD + "import horovod.torch as hvd\naccelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel, opt = accelerator.prepare(model, opt)\n"
    assert ("AM955", 2) in _codes(before, after)


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("from apex import amp", "apex.amp"),
        ("import apex.amp as amp", "apex.amp"),
        ("from apex.parallel import DistributedDataParallel", "distributes with NVIDIA apex"),
        ("from apex.optimizers import FusedAdam", None),
    ],
)
def test_which_parts_of_apex_are_another_engine(line: str, refused: str | None) -> None:
    """apex.amp is mixed precision by hand (refused with what to convert it to), apex.parallel
    a distributed engine; fused optimizers work under the Accelerator's wrap."""
    use = "model, opt = amp.initialize(model, opt)\n" if "amp" in line else ""
    before = f"import torch\n{line}\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n{use}"
    after = HEAD + f"{line}\naccelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n{use}model, opt = accelerator.prepare(model, opt)\n"
    problems = [p for p in verify(before, after) if p.code == "AM955"]
    if refused is None:
        assert problems == []
    else:
        assert len(problems) == 1 and refused in problems[0].message


@pytest.mark.parametrize(
    "kept",
    ["sampler = DistributedSampler(ds)", "model = DistributedDataParallel(model)", "dist.all_reduce(loss)", "meter.all_reduce()"],
)
def test_hand_made_distribution_left_beside_the_accelerator(kept: str) -> None:
    before = ORIGINAL + kept + "\n"
    after = PREPARED + kept + "\n"
    assert "AM955" in [c for c, _ in _codes(before, after)]


def test_guarded_collectives_are_not_refused_and_in_model_data_parallel_is_a_note() -> None:
    kept = (
        "if dist.is_initialized():\n    dist.all_reduce(loss)\n"
        "class G(nn.Module):\n    def forward(self, x):\n        return nn.parallel.data_parallel(self.main, x, range(2))\n"
    )
    found = verify(ORIGINAL + kept, PREPARED + kept)
    assert [(p.code, p.blocking) for p in found] == [("AM919", False)]


def test_the_prepared_model_moved_to_the_cpu_and_back() -> None:
    moved = "model.eval().cpu()\ntorch.save(model.state_dict(), 'm.pt')\nmodel.to(device).train()\n"
    assert "AM952" in [c for c, _ in _codes(ORIGINAL + moved, PREPARED + moved.replace("torch.save(model.state_dict()", "accelerator.save(accelerator.unwrap_model(model).state_dict()"))]


def test_one_object_prepared_under_two_names() -> None:
    before = ORIGINAL + "self.optimizer = opt\n"
    after = PREPARED.replace("model, opt = accelerator.prepare(model, opt)", "self.optimizer = opt\nmodel, opt, self.optimizer = accelerator.prepare(model, opt, self.optimizer)")
    assert "AM955" in [c for c, _ in _codes(before, after)]


def test_an_optimizer_from_a_factory_still_names_its_model() -> None:
    before = "import torch\nnet = Net()\noptimizer = build(params=net.parameters(), lr=0.1)\nddp = net\n"
    after = HEAD + "accelerator = Accelerator()\nnet = Net()\noptimizer = build(params=net.parameters(), lr=0.1)\noptimizer = accelerator.prepare(optimizer)\nddp = net\n"
    assert "AM951" in [c for c, _ in _codes(before, after)]


def test_a_ddp_option_the_wrap_removal_would_drop() -> None:
    wrap = "model = DistributedDataParallel(model, device_ids=[0], broadcast_buffers=False)\n"
    assert [p.blocking for p in verify(ORIGINAL + wrap, PREPARED) if p.code == "AM918"] == [False]
    plain = "model = DistributedDataParallel(model, device_ids=[0], find_unused_parameters=False)\n"
    assert _codes(ORIGINAL + plain, PREPARED) == []


def test_a_device_name_bound_to_two_devices() -> None:
    before = 'import torch\nDEVICE = torch.device("cuda")\ndef main():\n    global DEVICE\n    DEVICE = torch.device("cpu")\n'
    after = HEAD + 'accelerator = Accelerator()\nDEVICE = accelerator.device\ndef main():\n    global DEVICE\n    DEVICE = torch.device("cpu")\n'
    before += "model = Net()\n"
    after += "model = Net()\nmodel = accelerator.prepare(model)\n"
    assert ("AM953", 5) in _codes(before, after)
    local = after.replace("    global DEVICE\n", "")  # another function's own device: not the same name
    assert _codes(before.replace("    global DEVICE\n", ""), local) == []


def test_a_project_helper_that_sets_up_the_process_group_beside_the_accelerator() -> None:
    kept = "utils.init_distributed_mode(args)\n"
    assert "AM955" in [c for c, _ in _codes(ORIGINAL + kept, PREPARED + kept)]


def test_a_file_saved_on_the_main_process_read_right_after_on_every_process() -> None:
    before = "import torch, shutil\ndef save(state, name):\n    torch.save(state, name)\n    shutil.copyfile(name, 'best.pt')\n"
    after = HEAD + "import shutil\ndef save(state, name, *, accelerator):\n    accelerator.save(state, name)\n    shutil.copyfile(name, 'best.pt')\n"
    assert "AM952" in [c for c, _ in _codes(before, after)]
    gated = after.replace("    shutil.copyfile", "    accelerator.wait_for_everyone()\n    shutil.copyfile")
    assert "AM952" not in [c for c, _ in _codes(before, gated)]


def test_none_or_a_plateau_scheduler_given_to_prepare() -> None:
    before = ORIGINAL + "enc_opt = Adam(enc.parameters()) if tune else None\nsched = ReduceLROnPlateau(opt)\n"
    after = PREPARED.replace("model, opt = accelerator.prepare(model, opt)\n", "") + (
        "enc_opt = Adam(enc.parameters()) if tune else None\nsched = ReduceLROnPlateau(opt)\n"
        "model, opt, enc_opt, sched = accelerator.prepare(model, opt, enc_opt, sched)\n"
    )
    messages = " ".join(p.message for p in verify(before, after))
    assert "may be None" in messages and "ReduceLROnPlateau" in messages


def test_a_removed_move_that_also_set_the_memory_format() -> None:
    before = "import torch\nmodel = Net().to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor x in loader:\n    x = x.to(device=device, memory_format=torch.channels_last)\n"
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt, loader = accelerator.prepare(model, opt, loader)\nfor x in loader:\n    pass\n"
    )
    assert any("memory_format" in p.message for p in verify(before, after))


def test_files_deleted_on_every_process_after_a_main_only_save() -> None:
    before = "import torch, glob, os\nfor e in range(3):\n    torch.save(state, f'{e}.pkl')\n    for f in glob.glob('*.pkl'):\n        os.remove(f)\n"
    after = HEAD + "import glob, os\naccelerator = Accelerator()\nfor e in range(3):\n    accelerator.save(state, f'{e}.pkl')\n    for f in glob.glob('*.pkl'):\n        os.remove(f)\n"
    assert "AM952" in [c for c, _ in _codes(before, after)]


def test_prepare_above_the_line_that_creates_the_optimizer_at_module_level() -> None:
    # pyflakes accepts the read (a later line, and a function's global, bind the name); on a
    # fresh run, without --resume, it is a NameError.
    load = "def load(path):\n    global model, optimizer\n    model, optimizer = torch.load(path)\n"
    before = (
        "import torch\n" + load + "model = Net()\nif args.resume:\n    load(args.resume)\n"
        "try:\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x in loader:\n        model(x).sum().backward()\nexcept KeyboardInterrupt:\n    pass\n"
    )
    after = HEAD + load + (
        "accelerator = Accelerator()\nmodel = Net()\nif args.resume:\n    load(args.resume)\n"
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n"
        "try:\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for x in loader:\n        accelerator.backward(model(x).sum())\nexcept KeyboardInterrupt:\n    pass\n"
    )
    assert [c for c, _ in _codes(before, after)] == ["AM950"]


def test_an_optimizer_over_a_list_the_model_parameters_were_appended_to() -> None:
    before = (
        "import torch\nmodel = Net().to(device)\ncriterion = torch.nn.CTCLoss().to(device)\ntrainable = []\n"
        "for p in filter(lambda p: p.requires_grad, model.parameters()):\n    trainable.append(p)\n"
        "optimizer = torch.optim.Adam(trainable, lr=1e-3)\n"
        "for x, y in loader:\n    criterion(model(x), y).backward()\n    optimizer.step()\n"
    )
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net().to(device)\ncriterion = torch.nn.CTCLoss()\ntrainable = []\n"
        "for p in filter(lambda p: p.requires_grad, model.parameters()):\n    trainable.append(p)\n"
        "optimizer = torch.optim.Adam(trainable, lr=1e-3)\n"
        "criterion, optimizer, loader = accelerator.prepare(criterion, optimizer, loader)\n"
        "for x, y in loader:\n    accelerator.backward(criterion(model(x), y))\n    optimizer.step()\n"
    )
    assert ("AM951", 7) in _codes(before, after)  # at the optimizer, in the original


def test_a_training_loop_over_a_loader_handed_to_the_class_must_draw_from_a_prepared_one() -> None:
    # `self.train_loader` comes from another file (the constructor's caller): no
    # DataLoader(...) here, but the name says what it is and a training loop draws from it
    before = (
        "import torch\n\n\nclass Solver:\n    def __init__(self, train_loader):\n"
        "        self.train_loader = train_loader\n        self.model = torch.nn.Linear(2, 1)\n"
        "        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)\n\n"
        "    def train(self):\n        for x in self.train_loader:\n            self.model(x).sum().backward()\n"
    )
    after = HEAD + (
        "\n\nclass Solver:\n    def __init__(self, train_loader):\n        self.accelerator = Accelerator()\n"
        "        self.train_loader = train_loader\n        self.model = torch.nn.Linear(2, 1)\n"
        "        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)\n"
        "        self.model, self.optimizer = self.accelerator.prepare(self.model, self.optimizer)\n\n"
        "    def train(self):\n        for x in self.train_loader:\n            self.accelerator.backward(self.model(x).sum())\n"
    )
    assert "AM951" in [c for c, _ in _codes(before, after)]


_MAIN_ONLY = textwrap.dedent('''\
    class Loop:
        def save(self):
            {save}
            self.accelerator.wait_for_everyone()

        def run(self):
            if self.accelerator.is_main_process:
                {call}
''')


def test_a_collective_the_migration_puts_under_the_main_process_is_refused() -> None:
    before = _MAIN_ONLY.format(save="torch.save(self.state, 'a.pt')", call="print('done')")
    after = _MAIN_ONLY.format(save="torch.save(self.state, 'a.pt')", call="self.save()")
    assert [p.code for p in verify(before, after)] == ["AM957"]


def test_an_accelerator_method_named_like_a_method_of_the_class_is_not_that_method() -> None:
    before = _MAIN_ONLY.format(save="torch.save(self.state, 'a.pt')", call="torch.save(self.state, 'b.pt')")
    after = _MAIN_ONLY.format(save="self.accelerator.save(self.state, 'a.pt')", call="self.accelerator.save(self.state, 'b.pt')")
    assert [p.code for p in verify(before, after)] == []


def test_moves_removed_under_a_device_flag_without_cpu_option_are_refused() -> None:
    before = textwrap.dedent('''\
        import torch
        args = get_args()
        net = torch.nn.Linear(2, 2)
        if args.gpu:
            net = net.cuda()
    ''')
    after = textwrap.dedent('''\
        import torch
        from runtime import Accelerator
        args = get_args()
        accelerator = Accelerator()
        net = torch.nn.Linear(2, 2)
        if args.gpu:
            pass
        net = accelerator.prepare(net)
    ''')
    assert [p.code for p in verify(before, after)] == ["AM953"]
    assert [p.code for p in verify(before, after.replace("Accelerator()", "Accelerator(cpu=not args.gpu)"))] == []


def test_moves_removed_under_a_gpu_index_option_name_the_negated_test() -> None:
    before = textwrap.dedent('''\
        import torch
        args = get_args()
        net = torch.nn.Linear(2, 2)
        if args.gpu is not None:
            net = net.cuda(args.gpu)
    ''')
    after = textwrap.dedent('''\
        import torch
        from runtime import Accelerator
        args = get_args()
        accelerator = Accelerator()
        net = torch.nn.Linear(2, 2)
        if args.gpu is not None:
            pass
        net = accelerator.prepare(net)
    ''')
    problems = verify(before, after)
    assert [p.code for p in problems] == ["AM953"]
    assert "Accelerator(cpu=not (args.gpu is not None))" in problems[0].message


def test_a_ddp_wrap_removed_while_the_model_is_prepared_nowhere_is_refused() -> None:
    before = textwrap.dedent('''\
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = torch.nn.Linear(2, 2).cuda()
        model = DDP(model, device_ids=[0])
        optimizer = make_optimizer(model)
        loader = torch.utils.data.DataLoader(range(8))
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
    ''')
    after = textwrap.dedent('''\
        import torch
        from runtime import Accelerator
        accelerator = Accelerator()
        model = torch.nn.Linear(2, 2)
        optimizer = make_optimizer(model)
        loader = torch.utils.data.DataLoader(range(8))
        optimizer, loader = accelerator.prepare(optimizer, loader)
        for x in loader:
            accelerator.backward(model(x).sum())
            optimizer.step()
    ''')
    problems = verify(before, after)
    assert "AM951" in [p.code for p in problems]
    assert any("wrap of `model`" in p.message for p in problems)
    fixed = after.replace("optimizer, loader = accelerator.prepare(optimizer, loader)", "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)")
    assert not any("wrap of" in p.message for p in verify(before, fixed))


def test_a_rank_read_where_no_accelerator_joined_the_group_is_refused_once_init_goes() -> None:
    before = textwrap.dedent('''\
        import torch
        import torch.distributed as dist

        def main():
            model = torch.nn.Linear(2, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)

        if __name__ == "__main__":
            dist.init_process_group("nccl")
            seed = 1 + dist.get_rank()
            main()
    ''')
    after = textwrap.dedent('''\
        import torch
        import torch.distributed as dist
        from runtime import Accelerator

        def main():
            accelerator = Accelerator()
            model = torch.nn.Linear(2, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model, opt = accelerator.prepare(model, opt)

        if __name__ == "__main__":
            seed = 1 + dist.get_rank()
            main()
    ''')
    problems = verify(before, after)
    assert any(p.code == "AM955" and "dist.get_rank()" in p.message for p in problems)
    inside = after.replace("    model, opt = accelerator.prepare(model, opt)\n", "    model, opt = accelerator.prepare(model, opt)\n    print(dist.get_rank())\n")
    inside = inside.replace("    seed = 1 + dist.get_rank()\n", "")
    assert inside.count("dist.get_rank()") == 1 and "print(dist.get_rank())" in inside
    assert not any("removed `init_process_group" in p.message for p in verify(before, inside))


_METERS_BEFORE = """
def run(loader, model, optimizer, meter):
    for x in loader:
        loss = model(x)
        {step}
        meter.update(loss.item(), x.size(0))
    return meter.avg
"""
_METERS_AFTER = """
def run(loader, model, optimizer, meter, *, accelerator):
    for x in loader:
        loss = model(x)
        {step}
        meter.update(loss.item(), x.size(0))
    for meter in (meter,):
        meter.sum, meter.count = accelerator.reduce(torch.tensor([meter.sum, meter.count]), reduction="sum").tolist()
        meter.avg = meter.sum / meter.count
    return meter.avg
"""


@pytest.mark.parametrize("step,said", [("pass", True), ("loss.backward()", False)])
def test_meters_added_up_after_an_evaluation_count_the_repeated_samples(step: str, said: bool) -> None:
    """An evaluation's meters count the samples the loader repeats (AM921, not blocking);
    a training loop's were trained on, and count as such."""
    after_step = "accelerator.backward(loss)" if step != "pass" else step
    problems = verify(_METERS_BEFORE.format(step=step), _METERS_AFTER.format(step=after_step))
    found = [p for p in problems if p.code == "AM921"]
    assert bool(found) is said
    assert all(not p.blocking and p.line == 3 and "`meter`" in p.message for p in found)


def test_a_checkpoint_loaded_into_a_wrapper_moved_on_the_way_is_named() -> None:
    """clovaai's `model = torch.nn.DataParallel(model).to(device)`, then
    `model.load_state_dict(torch.load(path))`: the pretrained files have `module.` keys, which
    the plain model of the migration does not (with `strict=False`, nothing would load)."""
    before = (
        "import torch\nmodel = Net()\nmodel = torch.nn.DataParallel(model).to(device)\n"
        "model.load_state_dict(torch.load(path), strict=False)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    )
    after = HEAD + (
        "accelerator = Accelerator()\nmodel = Net()\n"
        "model.load_state_dict(torch.load(path), strict=False)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, opt = accelerator.prepare(model, opt)\n"
    )
    assert ("AM920", 4) in _codes(before, after)
    problem = next(p for p in verify(before, after) if p.code == "AM920")
    assert "the other way round" not in problem.message  # it saves nothing
    saving = "torch.save(model.state_dict(), 'best.pth')\n"
    problem = next(p for p in verify(before + saving, after + saving) if p.code == "AM920")
    assert "another script that wraps the model before loading them" in problem.message


def test_a_script_distributed_by_another_engine_gets_the_refusal_alone() -> None:
    """OLMo: FSDP, its own process group and a loader sharded by rank. The refusal (AM955)
    is the whole answer: the rules' advice on converting it (prepare the model, drop the
    wrap, use the Accelerator's collectives) would contradict it (reader R1, sixteenth session)."""
    from migrator.api import migrate_source

    source = textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


        def main(loader):
            dist.init_process_group("nccl")
            torch.cuda.set_device(dist.get_rank())
            model = FSDP(torch.nn.Linear(4, 2).cuda())
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                print(loss.item())
    """)
    result = migrate_source(source, "train.py")
    assert result.after in (None, source)
    assert [f.code for f in result.findings] == ["AM955"], result.findings
    assert "already distributes with FSDP" in result.findings[0].message


def test_apex_imported_for_its_sync_batchnorm_and_an_unused_amp_is_no_other_engine() -> None:
    """SupContrast: `import apex; from apex import amp, optimizers` for `--syncBN`
    (`apex.parallel.convert_syncbn_model`), amp never called. apex's SyncBatchNorm works under
    the Accelerator's DDP; only its own DistributedDataParallel, or amp in use, keeps the file whole."""
    head = "import torch\ntry:\n    import apex\n    from apex import amp, optimizers\nexcept ImportError:\n    pass\n"
    body = "model = apex.parallel.convert_syncbn_model(Net())\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    after = head.replace("import torch\n", HEAD) + "accelerator = Accelerator()\n" + body + "model, opt = accelerator.prepare(model, opt)\n"
    assert [c for c in _codes(head + body, after) if c[0] == "AM955"] == []
    wrapped = body + "model = apex.parallel.DistributedDataParallel(model)\n"
    assert ("AM955", 3) in _codes(head + wrapped, after + "model = apex.parallel.DistributedDataParallel(model)\n")
    scaled = body + "with amp.scale_loss(loss, opt) as scaled:\n    scaled.backward()\n"
    assert [c for c in _codes(head + scaled, after + "with amp.scale_loss(loss, opt) as scaled:\n    scaled.backward()\n") if c[0] == "AM955"]


def test_a_batch_and_workers_sized_for_every_gpu_are_named() -> None:
    """clovaai: `opt.batch_size = opt.batch_size * opt.num_gpu` and `opt.workers = opt.workers *
    opt.num_gpu` sized DataParallel's one process; each launched process runs them too (reader
    R1, sixteenth session). A learning rate scaled by the GPU count is not a batch."""
    lines = (
        "opt.num_gpu = torch.cuda.device_count()\nopt.batch_size = opt.batch_size * opt.num_gpu\n"
        "opt.workers = opt.workers * opt.num_gpu\nopt.lr = opt.lr * opt.num_gpu\n"
    )
    before = "import torch\n" + lines + "model = Net()\nopt_ = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    after = HEAD + "accelerator = Accelerator()\n" + lines + "model = Net()\nopt_ = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel, opt_ = accelerator.prepare(model, opt_)\n"
    notes = [p for p in verify(before, after) if p.code == "AM917"]
    assert [(p.line, "batch" in p.message, "workers" in p.message) for p in notes] == [(3, True, False), (4, False, True)]


def test_visible_devices_set_in_the_script_are_named_before_and_after_the_accelerator() -> None:
    """AM108: before the Accelerator exists the line gives every launched process the same
    GPUs (Informer's exp_basic); once a migrated `main()` has made it first, CUDA has started
    and the line picks nothing, on one process too (DeepLabV3Plus's `--gpu_id`, reader R3)."""
    from migrator.api import migrate_source

    helper = 'import os\nimport torch\n\n\ndef acquire(gpu):\n    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)\n    return torch.device("cuda:0")\n'
    (found,) = [f for f in migrate_source(helper, "exp_basic.py").findings if f.code == "AM108"]
    assert "every launched process the same ones" in found.message
    script = textwrap.dedent("""\
        import os
        import torch


        def main(gpu, loader):
            model = torch.nn.Linear(4, 2)
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    """)
    result = migrate_source(script, "train.py")
    assert "accelerator = Accelerator()" in result.after
    (found,) = [f for f in result.findings if f.code == "AM108"]
    assert "no longer picks anything" in found.message


def test_only_an_evaluation_is_said_to_read_its_whole_data() -> None:
    """AM914: an evaluation handed loaders left out of prepare() computes on all the data on
    every process (a reassurance); a training function handed them trains on all of it, the
    defect, and is not described so (reader R3, sixteenth session: ternaus, pytorch-template)."""
    from migrator.api import migrate_source

    source = textwrap.dedent("""\
        import torch
        import engine

        train_loader = torch.utils.data.DataLoader(range(8), batch_size=2)
        val_loader = torch.utils.data.DataLoader(range(8), batch_size=2)
        model = torch.nn.Linear(1, 1)
        engine.train(model, train_loader)
        engine.evaluate(model, val_loader)
    """)
    found = {f.message.split("`")[1]: f.message for f in migrate_source(source, "main.py").findings if f.code == "AM914"}
    assert "sees all the data on every process" in found["engine.evaluate"]
    assert "sees all the data" not in found["engine.train"]



# AM959: a second backward through a prepared model ------------------------------------
_PENALTY = """
    import torch
    from runtime import Accelerator
    def main(loader):
        accelerator = Accelerator()
        D = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(D.parameters(), lr=0.1)
        D, opt, loader = accelerator.prepare(D, opt, loader)
        for (x,) in loader:
            x.requires_grad_(True)
            out = D(x)
            grad = torch.autograd.grad(outputs=out.sum(), inputs=x, create_graph=CREATE)[0]
            loss = out.mean() + ((grad.norm(2, dim=1) - 1) ** 2).mean()
            opt.zero_grad()
            accelerator.backward(loss)
            opt.step()
"""


def test_a_gradient_penalty_through_a_prepared_model_is_not_written() -> None:
    """Self-Attention-GAN's WGAN-GP: on 2 processes the next step stopped with "Expected to
    have finished reduction" (reader R1's probe, seventeenth session)."""
    before = "import torch\n"
    assert any(code == "AM959" for code, _ in _codes(before, _PENALTY.replace("CREATE", "True")))
    # a gradient with respect to the input alone (a saliency map) builds no second backward
    assert not any(code == "AM959" for code, _ in _codes(before, _PENALTY.replace("CREATE", "False")))


_TWO_LOSSES = """
    import torch
    from runtime import Accelerator
    def main(model, opt_a, opt_b, loader, fp16):
        accelerator = Accelerator()
        model, opt_a, opt_b, loader = accelerator.prepare(model, opt_a, opt_b, loader)
        for x in loader:
            losses = model(x)
            loss_a = losses[0] * 0.5
            opt_a.zero_grad()
            accelerator.backward(loss_a)
            opt_a.step()
            BETWEEN
            opt_b.zero_grad()
            accelerator.backward(SECOND)
            opt_b.step()
"""


def _two_losses(between: str = "pass", second: str = "losses[1]", cleared: bool = True) -> list[str]:
    after = _TWO_LOSSES.replace("BETWEEN", between).replace("SECOND", second)
    after = after if cleared else after.replace("opt_b.zero_grad()", "pass")
    return [p.message for p in verify("import torch\n", textwrap.dedent(after)) if p.code == "AM959"]


def test_two_backwards_of_one_forward_of_a_prepared_model_are_not_written() -> None:
    """pix2pixHD: one module returns the generator's and the discriminator's losses, each
    stepped by its own optimizer. DDP synchronises the first backward after a forward only:
    on 2 gloo processes the second one's gradients differed across ranks."""
    found = _two_losses()
    assert len(found) == 1 and "the prepared `model`" in found[0], found
    # `opt_b.zero_grad()` between: the first loss's gradient in what opt_b steps is thrown away
    # (a generator loss through the discriminator), so one summed backward would train differently
    assert "run a forward for each backward" in found[0] and "add the losses" not in found[0]
    summed = _two_losses(cleared=False)
    assert len(summed) == 1 and "add the losses into one backward" in summed[0], summed
    # a fresh forward for the second loss: each backward has its own
    assert not _two_losses("losses = model(x)")
    # what is detached carries no gradient back to the model
    assert not _two_losses(second="losses[1].detach() * torch.ones(1, requires_grad=True)")


def test_backwards_in_two_branches_of_one_if_are_one_backward() -> None:
    """`if fp16: scaled.backward() else: loss.backward()`: only one of them runs."""
    after = textwrap.dedent(_TWO_LOSSES).replace(
        "            accelerator.backward(loss_a)\n",
        "            if fp16:\n                accelerator.backward(loss_a * 2)\n            else:\n                accelerator.backward(loss_a)\n",
    ).replace("BETWEEN", "pass").replace("accelerator.backward(SECOND)", "pass")
    assert not [c for c, _ in _codes("import torch\n", after) if c == "AM959"]


def test_a_yaml_loader_class_handed_to_a_helper_is_no_data_loader() -> None:
    """FastSpeech2: `yaml.load(open(p), Loader=yaml.FullLoader)` in a script that drops
    `nn.DataParallel` was taken for an unprepared DataLoader handed to another file's code
    (a false AM953 refusal, reader R4, eighteenth session)."""
    from migrator.api import migrate_source
    from migrator.config import Config

    source = (
        "import torch\nimport yaml\nfrom configs import read\n\n"
        "config = read(open('c.yaml'), Loader=yaml.FullLoader)\n"
        "model = torch.nn.DataParallel(torch.nn.Linear(4, 2)).cuda()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)\n"
        "for x in loader:\n    optimizer.zero_grad()\n    model(x.cuda()).sum().backward()\n    optimizer.step()\n"
    )
    result = migrate_source(source, "train.py", Config())
    assert not [f for f in result.findings if f.code == "AM953"], result.findings
    assert "accelerator.backward(" in result.after


def test_an_optimizer_wrapper_of_the_project_is_not_prepared() -> None:
    """FastSpeech2: `model, optimizer = get_model(...)` returns a ScheduledOptim, a plain class
    holding a torch Adam, stepped with `optimizer.step_and_update_lr()`. Handed to prepare(),
    it raised TypeError at start on one process too (reader R6, eighteenth session)."""
    from migrator.api import migrate_source
    from migrator.config import Config

    source = (
        "import torch\nfrom utils.model import get_model\n\n"
        "model, optimizer = get_model()\nmodel = model.cuda()\n"
        "loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)\n"
        "for x in loader:\n    loss = model(x.cuda()).sum()\n    optimizer.zero_grad()\n"
        "    loss.backward()\n    optimizer.step_and_update_lr()\n"
    )
    result = migrate_source(source, "train.py", Config())
    assert result.after == source
    refusal = [f for f in result.findings if f.code == "AM951"]
    assert refusal and "`optimizer.step_and_update_lr`, which no torch optimizer has" in refusal[0].message, result.findings
    plain = migrate_source(source.replace("step_and_update_lr", "step"), "train.py", Config())
    assert "accelerator.prepare(" in plain.after, plain.findings
    asked = source.replace(  # Swin-Transformer asks first: a torch optimizer may lack the attribute
        "    optimizer.step_and_update_lr()\n",
        "    second = hasattr(optimizer, 'is_second_order') and optimizer.is_second_order\n    optimizer.step()\n",
    )
    assert "accelerator.prepare(" in migrate_source(asked, "train.py", Config()).after


def test_an_optimizer_a_model_builds_on_itself_is_named_for_the_model_s_maker() -> None:
    before = textwrap.dedent('''\
        import torch


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
                self.optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
    ''')
    after = before.replace("import torch\n", "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n").replace(
        "lr=0.1)\n", "lr=0.1)\n        self.optimizer = accelerator.prepare(self.optimizer)\n"
    )
    messages = [p.message for p in verify(before, after) if p.code == "AM951"]
    assert any("inside the model's own class" in m and "model.optimizer" in m for m in messages)


@pytest.mark.parametrize("loss, contrastive", [("SupConLoss(temperature=0.1)", True), ("torch.nn.CrossEntropyLoss()", False)])
def test_a_contrastive_loss_gets_no_advice_to_shrink_the_batch(loss, contrastive) -> None:
    """SupContrast's main_supcon.py: dividing the batch by the process count after the
    DataParallel wrap goes would shrink the set of samples SupConLoss contrasts N-fold
    (reader R1); it is told to gather the features instead."""
    before = textwrap.dedent(f'''\
        import torch
        from losses import SupConLoss

        model = torch.nn.DataParallel(torch.nn.Linear(4, 4))
        criterion = {loss}
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4)
        for x in loader:
            optimizer.zero_grad()
            criterion(model(x), torch.zeros(4, dtype=torch.long)).backward()
            optimizer.step()
    ''')
    after = before.replace("torch.nn.DataParallel(torch.nn.Linear(4, 4))", "torch.nn.Linear(4, 4)").replace(
        "        optimizer.step()\n", "        optimizer.step()\n"
    ).replace("loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4)\n",
              "loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4)\n"
              "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\n")
    (note,) = [p.message for p in verify(before, after) if p.code == "AM917"]
    assert ("gather the features" in note) is contrastive
    assert ("divide the batch size" in note) is not contrastive


def test_a_function_no_caller_here_reaches_is_not_said_to_be_called_from_module_level(tmp_path) -> None:
    """SR-GNN's model.py: `train_test` is called from main.py's main() only; AM301 said it was
    "also called from module level or used as a value" (reader R1)."""
    from migrator.api import migrate_paths
    from migrator.config import Config

    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent('''\
        import torch


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
                self.optimizer = torch.optim.SGD(self.parameters(), lr=0.1)


        def train_test(model, data):
            for x in data:
                loss = model(x).sum()
                loss.backward()
                model.optimizer.step()
    '''))
    (result,) = list(migrate_paths([str(path)], Config()))
    (note,) = [f.message for f in result.findings if f.code == "AM301"]
    assert "nothing in this file calls it" in note and "module level" not in note


def test_a_comprehension_over_a_progress_bar_bound_twice_is_read() -> None:
    """`t = tqdm(loader)` bound twice, one of them read by a comprehension: the loader it draws
    from is found without the comprehension's line (an internal error on 39 corpus files once)."""
    before = textwrap.dedent('''\
        import torch
        from tqdm import tqdm

        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4)
        t = tqdm(loader)
        sizes = [x.shape[0] for x in t]
        t = tqdm(loader)
        for x in t:
            model(x).sum().backward()
            optimizer.step()
    ''')
    after = before.replace("import torch\n", "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n").replace(
        "t = tqdm(loader)\nsizes", "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)\nt = tqdm(loader)\nsizes"
    )
    assert "accelerator.prepare(" in after
    assert not [p for p in verify(before, after) if p.code == "AM951"]
