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
