"""The Accelerator facade in a single process (plain `python`): dispatch, accumulation, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runtime import Accelerator, set_seed
from runtime.prepared.dataloader import PreparedDataLoader
from runtime.prepared.optimizer import PreparedOptimizer
from runtime.prepared.scheduler import PreparedScheduler
from runtime.process import ENV_MIXED_PRECISION, ENV_USE_CPU


def parts():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(7, 2), torch.randn(7, 1)), batch_size=1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
    return model, optimizer, loader, scheduler


def test_single_process_without_environment():
    acc = Accelerator(cpu=True)
    assert (acc.device.type, acc.process_index, acc.local_process_index, acc.num_processes) == ("cpu", 0, 0, 1)
    assert acc.is_main_process and acc.is_local_main_process
    assert (acc.distributed_type.value, acc.mixed_precision, acc.sync_gradients) == ("NO", "no", True)
    acc.wait_for_everyone()
    acc.end_training()


def test_prepare_keeps_order_and_returns_one_object_alone():
    acc = Accelerator(cpu=True)
    model, optimizer, loader, scheduler = parts()
    got = acc.prepare(scheduler, loader, optimizer, model)  # scheduler first: still follows its optimizer
    assert [type(o) for o in got] == [PreparedScheduler, PreparedDataLoader, PreparedOptimizer, nn.Linear]
    assert got[0].optimizers == [got[2]]
    assert isinstance(acc.prepare(nn.Linear(1, 1)), nn.Linear)
    assert acc.prepare(got[2]) is got[2], "preparing a prepared object changes nothing"


def test_prepare_refuses_unknown_objects_and_orphan_schedulers():
    acc = Accelerator(cpu=True)
    with pytest.raises(TypeError, match="does not know how to prepare a dict"):
        acc.prepare({})
    _, _, _, scheduler = parts()
    with pytest.raises(ValueError, match="pass the optimizer to prepare"):
        acc.prepare(scheduler)


def test_launcher_settings_apply_unless_the_script_passes_its_own(monkeypatch):
    monkeypatch.setenv(ENV_MIXED_PRECISION, "bf16")
    monkeypatch.setenv(ENV_USE_CPU, "1")
    assert Accelerator().mixed_precision == "bf16"
    assert Accelerator(mixed_precision="no").mixed_precision == "no"
    assert Accelerator().device.type == "cpu"


def test_accumulate_syncs_every_k_micro_steps_and_on_the_last_batch():
    acc = Accelerator(cpu=True, gradient_accumulation_steps=3)
    model, optimizer, loader, _ = parts()
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    flags = []
    for x, y in loader:
        with acc.accumulate(model):
            flags.append(acc.sync_gradients)
    assert flags == [False, False, True, False, False, True, True]


def test_backward_divides_by_the_accumulation_steps():
    acc = Accelerator(cpu=True, gradient_accumulation_steps=4)
    weight = nn.Parameter(torch.ones(1))
    acc.backward((weight * 8).sum())
    assert weight.grad.item() == 2.0


def test_clipping_delegates_to_torch():
    acc = Accelerator(cpu=True)
    weight = nn.Parameter(torch.zeros(2))
    weight.grad = torch.tensor([3.0, 4.0])
    assert acc.clip_grad_norm_([weight], 1.0).item() == pytest.approx(5.0)
    assert weight.grad.norm().item() == pytest.approx(1.0)
    acc.clip_grad_value_([weight], 0.1)
    assert weight.grad.abs().max().item() == pytest.approx(0.1)


def test_collectives_are_identities_in_one_process(capsys):
    acc = Accelerator(cpu=True)
    _, _, loader, _ = parts()
    loader = acc.prepare(loader)
    gathered = torch.cat([acc.gather_for_metrics(x) for x, _ in loader])
    assert gathered.shape == (7, 2), "nothing is dropped when nothing was padded"
    assert acc.reduce(torch.tensor([2.0]), "mean").item() == 2.0
    assert acc.gather(torch.tensor(3.0)).tolist() == [3.0]
    with acc.split_between_processes([1, 2, 3]) as share:
        assert share == [1, 2, 3]
    acc.print("hello")
    assert capsys.readouterr().out == "hello\n"
    assert acc.on_main_process(lambda: "ran")() == "ran"
    assert acc.on_local_main_process(lambda: "ran")() == "ran"


def test_unwrap_save_and_load_state_round_trip(tmp_path):
    set_seed(0)
    acc = Accelerator(cpu=True)
    model, optimizer, loader, scheduler = acc.prepare(*parts())
    for x, y in loader:
        acc.backward(nn.functional.mse_loss(model(x), y))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    acc.save_state(tmp_path / "state")
    acc.save_model(model, tmp_path / "weights")
    saved = {k: v.clone() for k, v in acc.unwrap_model(model).state_dict().items()}
    fresh = Accelerator(cpu=True)
    model2, optimizer2, loader2, scheduler2 = fresh.prepare(*parts())
    fresh.load_state(tmp_path / "state")
    assert all(torch.equal(saved[k], v) for k, v in model2.state_dict().items())
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()
    from safetensors.torch import load_file

    assert load_file(tmp_path / "weights" / "model.safetensors").keys() == saved.keys()
    more = Accelerator(cpu=True)
    more.prepare(*parts())
    more.prepare(nn.Linear(2, 1))  # a second model the checkpoint does not have
    with pytest.raises(FileNotFoundError, match="same objects prepared in the same order"):
        more.load_state(tmp_path / "state")


def test_a_closure_step_returns_the_closures_loss_as_torch_does():
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    x, y = torch.randn(8, 2), torch.randn(8, 1)
    acc = Accelerator(cpu=True)
    model, optimizer = acc.prepare(model, torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2))

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        return loss

    first = optimizer.step(closure)
    assert isinstance(first, torch.Tensor) and first.ndim == 0
    assert optimizer.step(closure).item() < first.item()


def test_unwrap_keeps_a_compiled_module_compiled_as_accelerate_does():
    """SRGAN saves `g_model.state_dict()` of a compiled G: its keys carry `_orig_mod.`, and
    its resume loads them so. The migrated save of `unwrap_model(g_model)` must keep them
    (reader R3 ran it: the runtime stripped the compile, and the resume raised)."""
    acc = Accelerator(cpu=True)
    compiled = torch.compile(nn.Linear(2, 2), backend="eager")
    prepared = acc.prepare(compiled)
    assert list(acc.unwrap_model(prepared).state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert list(acc.unwrap_model(prepared, keep_torch_compile=False).state_dict()) == ["weight", "bias"]
    plain = acc.prepare(nn.Linear(2, 2))
    assert list(acc.unwrap_model(plain).state_dict()) == ["weight", "bias"]


def test_unwrap_reaches_the_model_inside_a_compile_of_the_wrapper():
    """CycleGAN compiles its nets in setup(), after a hand migration prepared them: the
    compiled module holds the wrapper (DistributedDataParallel on N processes; DataParallel
    here, which needs no process group). Unwrapped, its checkpoint keys are the model's own,
    as its loader expects (reader R15 saved `module.`-prefixed keys)."""
    acc = Accelerator(cpu=True)
    outside = torch.compile(nn.DataParallel(nn.Linear(2, 2)), backend="eager")
    assert list(acc.unwrap_model(outside).state_dict()) == ["weight", "bias"]
    assert list(acc.unwrap_model(outside, keep_torch_compile=False).state_dict()) == ["weight", "bias"]
