"""analysis/precision.py: which mixed precision autocast/GradScaler ask for, and how a
scaler is used."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze


def _precision(code: str):
    module = cst.parse_module(textwrap.dedent(code))
    analysis: ScriptAnalysis = analyze(MetadataWrapper(module, unsafe_skip_copy=True))
    return analysis.patterns.precision


@pytest.mark.parametrize(
    "header,call,value",
    [
        ("import torch", "torch.cuda.amp.autocast()", '"fp16"'),
        ("from torch.cuda.amp import autocast", "autocast(dtype=torch.bfloat16)", '"bf16"'),
        ("import torch", 'torch.autocast("cuda", dtype=torch.bfloat16)', '"bf16"'),
        ("import torch", 'torch.autocast(device_type="cpu")', '"bf16"'),
        ("import torch", 'torch.amp.autocast("cuda")', '"fp16"'),
        ("import torch", "torch.cuda.amp.autocast(enabled=args.amp)", '"fp16" if args.amp else "no"'),
        ("import torch", 'torch.autocast("cuda", dtype=torch.bfloat16 if bf16 else torch.half)', '"bf16" if bf16 else "fp16"'),
    ],
)
def test_the_precision_an_autocast_asks_for(header, call, value) -> None:
    facts = _precision(f"{header}\nimport torch\nwith {call}:\n    pass\n")
    assert [a.value for a in facts.autocasts] == [value]
    assert facts.value == value and facts.conflict is None


def test_a_dtype_bound_to_a_name_is_followed() -> None:
    facts = _precision("import torch\namp_dtype = torch.bfloat16\nwith torch.autocast('cuda', dtype=amp_dtype):\n    pass\n")
    assert facts.value == '"bf16"'


def test_enabled_false_is_a_full_precision_region_that_stays() -> None:
    facts = _precision("import torch\nwith torch.cuda.amp.autocast(enabled=False):\n    pass\n")
    assert facts.autocasts[0].disabled and facts.value is None


def test_different_precisions_and_unreadable_dtypes_are_conflicts() -> None:
    facts = _precision(
        "import torch\nwith torch.autocast('cuda', dtype=torch.float16):\n    pass\n"
        "with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
    )
    assert facts.value is None and "different precisions" in facts.conflict
    facts = _precision("import torch\nwith torch.autocast('cuda', dtype=pick()):\n    pass\n")
    assert facts.value is None and "cannot be read" in facts.conflict


def test_autocast_used_through_a_variable_is_indirect() -> None:
    facts = _precision("import torch\nfrom functools import partial\namp = partial(torch.autocast, device_type='cuda')\n")
    assert len(facts.indirect) == 1


def test_scaler_uses_are_sorted_by_what_the_accelerator_takes_over() -> None:
    facts = _precision(
        "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=args.amp)\n"
        "scaler.scale(loss).backward()\nscaler.unscale_(opt)\nscaler.step(opt)\nscaler.update()\n"
        "state = {'scaler': scaler.state_dict()}\ntrain(scaler)\n"
    )
    (scaler,) = facts.scalers
    assert [u.kind for u in scaler.uses] == ["scale", "unscale_", "step", "update", "state", "other"]
    assert scaler.kept  # its state is checkpointed and it is passed along
    assert facts.value == '"fp16" if args.amp else "no"'  # no autocast: the scaler decides


@pytest.mark.parametrize(
    "initialize,value",
    [
        ('model, opt = amp.initialize(model, opt, opt_level="O1")', '"fp16"'),
        ('model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0)', '"fp16"'),
        ("model, opt = amp.initialize(model, opt)", '"fp16"'),  # apex's default level is O1
        ('model, opt = amp.initialize(model, opt, opt_level="O0")', None),  # full precision
        ('if args.fp16:\n    model, opt = amp.initialize(model, opt, opt_level="O1")', '"fp16" if args.fp16 else "no"'),
        ('if a:\n    if b:\n        model, opt = amp.initialize(model, opt)', '"fp16" if a and b else "no"'),
        ("model, opt = amp.initialize(model, opt, enabled=use_amp)", '"fp16" if use_amp else "no"'),
    ],
)
def test_the_precision_apex_amp_asks_for(initialize, value) -> None:
    facts = _precision(f"from apex import amp\n{initialize}\n")
    assert facts.apex is not None and facts.apex.convertible
    assert facts.apex.value == value and facts.value == value


@pytest.mark.parametrize(
    "code,reason",
    [
        ('model, opt = amp.initialize(model, opt, opt_level="O3")', "pure fp16"),
        ("model, opt = amp.initialize(model, opt, opt_level=args.level)", "cannot be read"),
        ('model, opt = amp.initialize(model, opt, loss_scale=128.0)', "fixes a loss scale"),
        ("model, opt = amp.initialize(model, opt, keep_batchnorm_fp32=True)", "keep_batchnorm_fp32"),
        ("[m1, m2], opt = amp.initialize([m1, m2], opt)", "one model and one optimizer"),
        ("for m in models:\n    m, opt = amp.initialize(m, opt)", "under an `else`, a loop"),
        ("with amp.scale_loss(loss, opt) as s:\n    s.backward()\n    log(s)", "other than as"),
        ("with amp.scale_loss(loss, opt, delay_unscale=True) as s:\n    s.backward()", "delay_unscale"),
        ("clip(amp.master_params(opt), 1.0)", "master_params"),
        ("save(amp.state_dict())", "amp.state_dict()"),
    ],
)
def test_apex_amp_the_accelerator_cannot_take_over(code, reason) -> None:
    facts = _precision(f"from apex import amp\n{code}\n")
    assert facts.apex is not None and not facts.apex.convertible and facts.value is None
    assert reason in facts.apex.blockers[0][1]


def test_apex_beside_torch_autocast_is_a_conflict() -> None:
    facts = _precision(
        "import torch\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt)\n"
        "with torch.autocast('cuda'):\n    pass\n"
    )
    assert facts.conflict is not None and "apex.amp" in facts.conflict and facts.value is None


def test_scale_loss_with_a_plain_else_is_one_backward() -> None:
    facts = _precision(
        "from apex import amp\nif fp16:\n    with amp.scale_loss(loss, opt) as s:\n        s.backward(retain_graph=True)\n"
        "else:\n    loss.backward(retain_graph=True)\n"
    )
    (scaled,) = facts.apex.backwards
    assert scaled.branch is not None and scaled.plain is not None
    different = _precision(
        "from apex import amp\nif fp16:\n    with amp.scale_loss(loss, opt) as s:\n        s.backward()\n"
        "else:\n    other.backward()\n"
    )
    assert different.apex.backwards[0].branch is None


def test_master_params_clipped_are_the_parameters_of_the_model_initialized_with_that_optimizer() -> None:
    facts = _precision(
        "import torch\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt)\n"
        "torch.nn.utils.clip_grad_norm_(amp.master_params(opt), 1.0)\n"
    )
    assert facts.apex.convertible and [m.model for m in facts.apex.master_params] == ["model"]
    other = _precision(
        "import torch\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt)\n"
        "torch.nn.utils.clip_grad_norm_(amp.master_params(other_opt), 1.0)\n"
    )
    assert not other.apex.convertible and "master_params" in other.apex.blockers[0][1]


@pytest.mark.parametrize(
    "declared,value",
    [
        ('parser.add_argument("--fp16_opt_level", type=str, default="O1")', '"fp16"'),
        ('parser.add_argument("--fp16-opt-level", default="O2")', '"fp16"'),
        ('parser.add_argument("--level", dest="fp16_opt_level", default="O1")', '"fp16"'),
        ('parser.add_argument("--fp16_opt_level", default="O3")', None),
        ('parser.add_argument("--fp16_opt_level", default="O1", choices=["O1", "O3"])', None),
        ("", None),
    ],
)
def test_an_opt_level_option_is_read_at_its_default(declared, value) -> None:
    facts = _precision(f"from apex import amp\n{declared}\nmodel, opt = amp.initialize(model, opt, opt_level=args.fp16_opt_level)\n")
    assert facts.apex.value == value
