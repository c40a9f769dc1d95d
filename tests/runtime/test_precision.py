"""runtime/precision.py choices, and the fp16 step-skipping the optimizer and scheduler rely on.

fp16 needs a GPU to run for real; its scaler logic is checked here with torch's CPU
GradScaler built directly (Precision.for_device would refuse fp16 on CPU).
"""

from __future__ import annotations

import pytest
import torch

from runtime.accumulation import GradientSync
from runtime.precision import Precision, PrecisionError, validate_choice
from runtime.prepared.optimizer import PreparedOptimizer
from runtime.prepared.scheduler import PreparedScheduler

CPU = torch.device("cpu")


@pytest.mark.parametrize(("given", "chosen"), [(None, "no"), ("no", "no"), ("BF16", "bf16"), (" fp16 ", "fp16")])
def test_choices_are_normalised(given, chosen):
    assert validate_choice(given) == chosen


def test_unknown_choice_is_refused():
    with pytest.raises(PrecisionError, match="'fp8' is not one of no, fp16, bf16"):
        validate_choice("fp8")


def test_fp16_without_a_gpu_is_a_clear_error():
    with pytest.raises(PrecisionError, match="needs a CUDA GPU.*use mixed_precision='bf16' on CPU"):
        Precision.for_device("fp16", CPU)


def test_bf16_on_cpu_autocasts_without_a_scaler():
    precision = Precision.for_device("bf16", CPU)
    assert precision.scaler is None and precision.dtype is torch.bfloat16
    with precision.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.bfloat16


def test_no_precision_changes_nothing():
    precision = Precision.for_device("no", CPU)
    assert precision.dtype is None
    with precision.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype is torch.float32
    loss = torch.tensor(2.0)
    assert precision.scale_loss(loss) is loss


def _setup(steps_per_update: int = 2, fp16: bool = True):
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8) if fp16 else None
    precision = Precision("fp16" if fp16 else "no", "cpu", scaler)
    sync = GradientSync()
    param = torch.nn.Parameter(torch.ones(1))
    inner = torch.optim.SGD([param], lr=1.0)
    optimizer = PreparedOptimizer(inner, sync, precision)
    scheduler = PreparedScheduler(torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5), [optimizer], sync, steps_per_update)
    return precision, sync, param, optimizer, scheduler


def test_fp16_overflow_skips_the_optimizer_and_the_scheduler():
    precision, _, param, optimizer, scheduler = _setup()
    precision.scale_loss(param.sum()).backward()
    param.grad = torch.tensor([float("inf")])
    optimizer.step()
    scheduler.step()
    assert optimizer.step_was_skipped and param.item() == 1.0
    assert scheduler.scheduler.last_epoch == 0, "no scheduler step after a skipped optimizer step"
    assert precision.loss_scale == 2.0**7, "the scaler backs off after an overflow"
    param.grad = None
    precision.scale_loss(param.sum()).backward()  # gradient 1, scaled by 2**7
    optimizer.step()
    scheduler.step()
    assert not optimizer.step_was_skipped and param.item() == pytest.approx(0.0)
    assert scheduler.scheduler.last_epoch == 2, "one real step advances the schedule once per process"


def test_accumulation_micro_steps_neither_step_nor_zero_nor_schedule():
    _, sync, param, optimizer, scheduler = _setup(steps_per_update=1, fp16=False)
    sync.steps = 2
    sync.advance()
    assert not sync.sync_gradients
    param.grad = torch.tensor([1.0])
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
    assert param.item() == 1.0 and param.grad is not None and scheduler.scheduler.last_epoch == 0
    sync.advance()
    assert sync.sync_gradients
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    assert param.item() == pytest.approx(0.0) and param.grad is None and scheduler.scheduler.last_epoch == 1


def test_unscale_happens_once_per_step():
    precision, _, param, optimizer, _ = _setup()
    precision.scale_loss(param.sum()).backward()  # gradient 1, scaled by 2**8
    precision.unscale(optimizer.optimizer)
    precision.unscale(optimizer.optimizer)  # GradScaler itself would raise on a second unscale_
    assert param.grad.item() == 1.0


def test_a_model_pickled_whole_under_mixed_precision_loads_as_the_plain_model():
    """The SSD tutorial saves `{'model': model, 'optimizer': optimizer}` objects whole. The
    autocast forward was a closure: under `--mixed-precision` the save raised and left a
    half-written file (reader R1, eighteenth session). It pickles as the model's own
    forward now, and a resumed copy prepared again gets autocast again."""
    import io

    from runtime import Accelerator

    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(3, 2)))
    buffer = io.BytesIO()
    torch.save({"model": accelerator.unwrap_model(model)}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)["model"]
    assert loaded.forward.__func__ is torch.nn.Sequential.forward  # the plain model, no runtime needed
    assert torch.equal(loaded[0].weight, accelerator.unwrap_model(model)[0].weight)
    seen = []
    loaded[0].register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    again = accelerator.prepare(loaded)
    assert again(torch.randn(2, 3)).dtype == torch.float32
    assert seen == [torch.bfloat16], seen  # autocast is back around the resumed copy's forward
