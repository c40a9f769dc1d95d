"""Unit tests of the script analysis: imports, roles, training block, prepare plan,
device variables and which device moves prepare() makes redundant."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import Role, ScriptAnalysis, analyze, dotted_name


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _code(analysis: ScriptAnalysis, node: cst.CSTNode) -> str:
    return analysis.module.code_for_node(node).strip()


@pytest.mark.parametrize(
    "imports,expr,expected",
    [
        ("import torch", "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm_"),
        ("import torch.nn as nn", "nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm_"),
        ("from torch.nn.utils import clip_grad_norm_ as c", "c", "torch.nn.utils.clip_grad_norm_"),
        ("from torch import optim", "optim.SGD", "torch.optim.SGD"),
        ("import torch.optim", "torch.optim.Adam", "torch.optim.Adam"),
        ("import numpy as np", "torch.zeros", None),
    ],
)
def test_imports_resolve_aliases(imports: str, expr: str, expected: str | None) -> None:
    analysis = _analyze(f"{imports}\n{expr}\n")
    node = cst.parse_expression(expr)
    assert analysis.imports.qualify(node) == expected


def test_roles_by_construction() -> None:
    analysis = _analyze(
        """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader
        from transformers import get_linear_schedule_with_warmup
        class Net(nn.Module):
            pass
        class Deeper(Net):
            pass
        model = Deeper()
        criterion = nn.CrossEntropyLoss()
        opt = torch.optim.AdamW(model.parameters())
        loader = DataLoader(range(4))
        sched = get_linear_schedule_with_warmup(opt, 0, 10)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        betas = get_beta_schedule(beta_schedule="linear", beta_start=1e-4, beta_end=0.02)
        """
    )
    roles = analysis.roles
    assert roles.of("betas") is None  # ddim's noise schedule: built on no optimizer, no learning-rate scheduler
    assert roles.of("model") is Role.MODEL
    assert roles.of("opt") is Role.OPTIMIZER
    assert roles.of("loader") is Role.DATALOADER
    assert roles.of("sched") is Role.SCHEDULER
    assert roles.of("plateau") is Role.SCHEDULER
    # torch's losses hold no parameters: nothing to prepare (Bonnetal's criterion, spread with
    # nn.DataParallel, was put in prepare() and its weighted move removed)
    assert roles.of("criterion") is None


def test_roles_by_use() -> None:
    analysis = _analyze(
        """
        import torch
        model = build_model()
        opt = make_optimizer(model)
        loaders = get_loaders()
        train_data = loaders[0]
        for x, y in train_data:
            opt.zero_grad()
            model(x).backward()
            opt.step()
        """
    )
    assert analysis.roles.of("opt") is Role.OPTIMIZER
    assert analysis.roles.of("train_data") is Role.DATALOADER


def test_optimizers_kept_in_a_container_are_not_named_objects() -> None:
    analysis = _analyze(
        """
        import torch
        nets = build_nets()
        optims = {}
        for name in nets:
            optims[name] = torch.optim.Adam(nets[name].parameters())
        both = [torch.optim.SGD(nets[0].parameters()), torch.optim.SGD(nets[1].parameters())]
        named = dict(g=torch.optim.Adam(nets[0].parameters()), d=torch.optim.Adam(nets[1].parameters()))
        for step in range(3):
            for optim in optims.values():
                optim.zero_grad()
        """
    )
    # `optim` is one entry at a time: preparing it would prepare nothing the set-up keeps
    assert analysis.roles.of("optim") is None
    from migrator.analysis.roles import optimizer_containers

    assert optimizer_containers(analysis.facts, analysis.parent) == ["optims", "both", "named"]


def test_a_model_handed_out_with_its_optimizer_whatever_the_factory_calls_it() -> None:
    """`model, optimizer = build(lr)` where build() names them `net`, `opt`: the model is
    prepared with its optimizer (before, only the optimizer and the loader were: N
    unsynchronised copies, reader R2 of the fifteenth session)."""
    analysis = _analyze(
        """
        import torch

        def build(lr):
            net = torch.nn.Linear(4, 2)
            opt = torch.optim.SGD(net.parameters(), lr=lr)
            return net, opt

        def main(loader):
            model, optimizer = build(0.1)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    )
    assert analysis.roles.of("model") is Role.MODEL
    assert analysis.plan is not None and [g.names for g in analysis.plan.groups] == [("model", "optimizer", "loader")]


def test_an_optimizer_from_a_factory_named_for_it_and_handed_the_model() -> None:
    """deep-person-reid: `optimizer = torchreid.optim.build_optimizer(model, **kwargs)`
    after `model = nn.DataParallel(model).cuda()`: the wrapped model is a model through
    the move, and a call named for building an optimizer that is handed it returns one.
    Handed no model (`get_optimizer(cfg)`, which may return the class), it is not."""
    analysis = _analyze(
        """
        import torch
        import torch.nn as nn
        import torchreid

        def main(cfg):
            model = torchreid.models.build_model(cfg.name)
            model = nn.DataParallel(model).cuda()
            optimizer = torchreid.optim.build_optimizer(model, lr=0.1)
            optimizer_class = get_optimizer(cfg)
            engine = Engine(model, optimizer)
        """
    )
    assert analysis.roles.of("model") is Role.MODEL
    assert analysis.roles.of("optimizer") is Role.OPTIMIZER
    assert analysis.roles.of("optimizer_class") is None


def test_an_object_built_around_an_optimizer_is_not_one_to_prepare() -> None:
    """BERT-pytorch: `self.optim_schedule = ScheduledOptim(self.optim, ...)` forwards
    `zero_grad()` and the step to the Adam it holds; prepare() takes the Adam and refuses
    the wrapper (reader R2, sixteenth session)."""
    analysis = _analyze(
        """
        import torch

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optim = torch.optim.Adam(self.model.parameters(), lr=1e-4)
                self.optim_schedule = ScheduledOptim(self.optim, 256, n_warmup_steps=10)

            def step(self, loss):
                self.optim_schedule.zero_grad()
                loss.backward()
                self.optim_schedule.step_and_update_lr()
        """
    )
    assert analysis.roles.of("self.optim") is Role.OPTIMIZER
    assert analysis.roles.of("self.optim_schedule") is None


def test_the_model_of_an_optimizer_known_by_its_use() -> None:
    """semseg: the optimizer's class comes from a factory, so only `optimizer.step()`
    says it is one; the model whose parameters it takes is a model all the same (its
    saved state dict is then unwrapped)."""
    analysis = _analyze(
        """
        import torch
        model = get_model(cfg)
        optimizer = get_optimizer(cfg)(model.parameters(), lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        """
    )
    assert analysis.roles.of("optimizer") is Role.OPTIMIZER
    assert analysis.roles.of("model") is Role.MODEL


def test_the_set_up_goes_to_the_caller_of_an_optimizer_factory() -> None:
    """SRGAN: `define_optimizer(g_model, d_model, config)` builds and returns the
    optimizers, `main()` keeps them, the models, the resume loads and the loop: the
    prepare() goes into main() after the loads, not into the factory (where the models
    it borrows would never reach the caller). A resume helper handed the optimizer too
    (`load_resume(model, ema, optimizer)`) restores it and says nothing of its owner: the
    EMA it is handed is not prepared."""
    analysis = _analyze(
        """
        import torch
        from torch.optim.swa_utils import AveragedModel

        def define_optimizer(model):
            optimizer = torch.optim.Adam(model.parameters())
            return optimizer

        def main():
            model = Net()
            ema = AveragedModel(model)
            optimizer = define_optimizer(model)
            model, ema, optimizer = load_resume(model, ema, optimizer)
            for x in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
        """
    )
    plan = analysis.plan
    assert plan is not None and plan.block.scope.name.value == "main"
    assert [g.names for g in plan.groups] == [("model", "optimizer")]
    assert _code(analysis, plan.groups[0].after).startswith("model, ema, optimizer = load_resume(")
    spawned = _analyze(
        """
        import torch
        import torch.multiprocessing as mp

        def worker(rank):
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            return optimizer

        def main():
            mp.spawn(worker, nprocs=2)
            optimizer = worker(0)
        """
    )
    assert spawned.plan is not None and spawned.plan.block.scope.name.value == "worker"
    library = _analyze(
        """
        import torch

        def create_optimizer(args, model):
            groups = [{"params": [p for p in model.parameters() if p.ndim > 1]}]
            optimizer = torch.optim.AdamW(groups, lr=args.lr)
            return optimizer
        """
    )
    assert library.plan is None  # ConvNeXt's optim_factory.py: built for a caller in another file


def test_parameter_owners_become_models() -> None:
    analysis = _analyze(
        """
        import torch
        encoder = load_encoder()
        opt = torch.optim.SGD(list(encoder.parameters()) + [p for p in head.parameters()], lr=1)
        """
    )
    assert analysis.roles.of("encoder") is Role.MODEL
    assert analysis.roles.of("head") is Role.MODEL


def test_training_block_is_the_function_that_builds_the_optimizer() -> None:
    analysis = _analyze(
        """
        import torch
        def train(model, loader, opt):
            for x in loader:
                model(x).backward()
        def main():
            \"\"\"Docstring.\"\"\"
            import os
            model = torch.nn.Linear(1, 1)
            opt = torch.optim.SGD(model.parameters(), lr=1)
            loader = torch.utils.data.DataLoader(range(3))
            train(model, loader, opt)
        """
    )
    block = analysis.training_block
    assert isinstance(block.owner, cst.FunctionDef) and block.owner.name.value == "main"
    assert analysis.first_training_use == 5
    assert _code(analysis, analysis.setup.before) == "model = torch.nn.Linear(1, 1)"


def test_main_guard_is_a_training_block() -> None:
    analysis = _analyze(
        """
        import torch
        if __name__ == "__main__":
            model = torch.nn.Linear(1, 1)
            opt = torch.optim.SGD(model.parameters(), lr=1)
        """
    )
    assert isinstance(analysis.training_block.owner, cst.If)
    assert analysis.plan.names == {"model", "opt"}


def test_no_optimizer_means_no_training() -> None:
    analysis = _analyze("import torch\nmodel = torch.nn.Linear(1, 1)\nmodel.cuda()\n")
    assert analysis.training_block is None
    assert analysis.setup is None and analysis.plan is None
    assert not analysis.migrating


def test_plan_orders_roles_and_places_after_last_definition() -> None:
    analysis = _analyze(
        """
        import torch
        loader = torch.utils.data.DataLoader(range(8))
        model = torch.nn.Linear(1, 1)
        teacher = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1)
        print("ready")
        for x in loader:
            model(x).backward()
        """
    )
    (group,) = analysis.plan.groups
    assert group.names == ("model", "opt", "loader")  # teacher is not trained: left alone
    assert _code(analysis, group.after) == "opt = torch.optim.SGD(model.parameters(), lr=1)"


def test_plan_applies_the_scheduler_convention() -> None:
    analysis = _analyze(
        """
        import torch
        loader = torch.utils.data.DataLoader(range(8))
        model = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1)
        steps = 3 * len(loader)
        by_batch = torch.optim.lr_scheduler.StepLR(opt, 5)
        by_epoch = torch.optim.lr_scheduler.StepLR(opt, 1)
        by_len = torch.optim.lr_scheduler.LinearLR(opt, total_iters=steps)
        for epoch in range(3):
            for x in loader:
                model(x).backward()
                by_batch.step()
                by_len.step()
            by_epoch.step()
        """
    )
    plan = analysis.plan
    assert plan.names == {"model", "opt", "loader", "by_batch"}
    left_out = dict(plan.left_out)
    assert "per epoch" in left_out["by_epoch"]
    assert "len(dataloader)" in left_out["by_len"]


def test_plan_splits_when_len_comes_before_the_model() -> None:
    analysis = _analyze(
        """
        import torch
        loader = torch.utils.data.DataLoader(range(8))
        total = len(loader)
        model = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1)
        """
    )
    first, second = analysis.plan.groups
    assert first.names == ("loader",) and _code(analysis, first.after).startswith("loader =")
    assert second.names == ("model", "opt")


def test_objects_defined_after_training_starts_are_not_prepared() -> None:
    analysis = _analyze(
        """
        import torch
        model = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1)
        for x in torch.utils.data.DataLoader(range(2)):
            model(x).backward()
        test_loader = torch.utils.data.DataLoader(range(2))
        """
    )
    assert "test_loader" not in analysis.plan.names


def test_device_variables_and_surviving_uses() -> None:
    analysis = _analyze(
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        other = "cuda:1"
        model = torch.nn.Linear(1, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1)
        for x in torch.utils.data.DataLoader(range(2)):
            noise = torch.randn(1, device=device)
        """
    )
    assert {v.name for v in analysis.device_variables} == {"device", "other"}
    assert analysis.surviving_device_uses["device"] == 1  # the randn; the model move goes
    assert analysis.surviving_device_uses["other"] == 0


def test_droppable_moves_are_prepared_models_and_batches_only() -> None:
    analysis = _analyze(
        """
        import torch
        device = torch.device("cuda")
        model = torch.nn.Linear(1, 1)
        model.to(device)
        teacher = torch.nn.Linear(1, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1)
        loader = torch.utils.data.DataLoader(range(2))
        for i, (x, y) in enumerate(loader):
            x = x.to(device)
            inputs = y[0].cuda()
            z = {k: v.to(device) for k, v in y.items()}
            i.to(device)
            fresh = torch.ones(1).to(device)
            model(x).backward()
        """
    )
    droppable = {
        _code(analysis, m.call) for m in analysis.device_moves if id(m.call) in analysis.droppable_moves
    }
    kept = {
        _code(analysis, m.call) for m in analysis.device_moves if id(m.call) not in analysis.droppable_moves
    }
    assert droppable == {"model.to(device)", "x.to(device)", "y[0].cuda()", "v.to(device)"}
    assert kept == {"torch.nn.Linear(1, 1).to(device)", "i.to(device)", "torch.ones(1).to(device)"}


def test_existing_accelerator_and_prepare_are_found() -> None:
    analysis = _analyze(
        """
        from accelerate import Accelerator
        acc = Accelerator()
        model, opt = acc.prepare(model, opt)
        """
    )
    assert analysis.accelerator_names == ("acc",)
    (call,) = analysis.prepare_calls
    assert call.args == ("model", "opt") and call.targets == ("model", "opt")
    assert analysis.plan is None and analysis.setup is None
    assert analysis.accelerator == "acc"


def test_dotted_name() -> None:
    assert dotted_name(cst.parse_expression("self.model.encoder")) == "self.model.encoder"
    assert dotted_name(cst.parse_expression("f().x")) is None


def test_a_function_that_returns_a_dataloader_hands_out_a_loader() -> None:
    analysis = _analyze(
        """
        import torch
        from torch.utils.data import DataLoader

        def prepare_dataloader(ds, batch_size):
            def collate(items):
                return items
            return DataLoader(ds, batch_size=batch_size, collate_fn=collate)

        def maybe(ds):
            if ds is None:
                return None
            return DataLoader(ds)

        train_data = prepare_dataloader(ds, 8)
        other = maybe(ds)
        """
    )
    assert analysis.roles.of("train_data") is Role.DATALOADER  # the nested collate's return does not count
    assert analysis.roles.of("other") is None  # one return is not a loader


MODEL_OWNING_ITS_OPTIMIZER = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class Graph(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 2)
            self.optimizer = torch.optim.Adam(self.parameters(), lr=0.1)


    class Runner:
        def __init__(self):
            self.net = nn.Linear(4, 2)
''')


def test_layers_an_nn_module_builds_on_itself_are_parts_not_models() -> None:
    """SR-GNN's SessionGraph: AM201 listed `self.embedding`, `self.head`, ... as models to
    prepare; the model is the instance, prepared where it is made. A plain class's
    `self.net` stays a model."""
    roles = _analyze(MODEL_OWNING_ITS_OPTIMIZER).roles
    assert roles.of("self.embedding") is None and roles.of("self.head") is None
    assert roles.of("self.optimizer") is Role.OPTIMIZER
    assert roles.of("self.net") is Role.MODEL


def test_a_model_whose_parameters_feed_an_optimizer_built_inside_another_call_is_a_model() -> None:
    """Speech-Transformer's train.py wraps its torch optimizer in one of the project's
    (`TransformerOptimizer(torch.optim.Adam(model.parameters()), ...)`) and hands both to
    `Solver(...)`: nothing named `model` a model, so AM914 stayed silent on the hand-over."""
    analysis = _analyze(
        "import torch\nfrom optimizer import TransformerOptimizer\nfrom nets import Transformer\n\n"
        "model = Transformer()\nopt = TransformerOptimizer(torch.optim.Adam(model.parameters()), 4000)\n"
    )
    assert analysis.roles.of("model") is Role.MODEL
    assert analysis.roles.of("opt") is None  # the project's wrapper is no torch optimizer


def test_a_part_of_an_nn_module_with_an_optimizer_of_its_own_stays_a_model() -> None:
    """MUNIT's trainer is an nn.Module holding two generators and two discriminators, each
    stepped by an optimizer over its own parameters: those parts are the models it trains."""
    roles = _analyze(
        "import torch\nimport torch.nn as nn\n\n\nclass Trainer(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.gen = nn.Linear(2, 2)\n        self.dis = nn.Linear(2, 1)\n"
        "        self.gen_opt = torch.optim.Adam(self.gen.parameters())\n"
    ).roles
    assert roles.of("self.gen") is Role.MODEL and roles.of("self.dis") is None
