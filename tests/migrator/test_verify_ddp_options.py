"""The verifier's AM918 note: an option of the removed DDP wrap the Accelerator is not given."""

from __future__ import annotations

from migrator.verify import verify

BEFORE = (
    "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
    "model = Net()\nmodel = DDP(model, device_ids=[0], find_unused_parameters=True, broadcast_buffers=False)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
)
PREPARED = "model = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel, opt = accelerator.prepare(model, opt)\n"


def _after(arguments: str) -> str:
    head = "import torch\nfrom runtime import Accelerator, DistributedDataParallelKwargs\n"
    return head + f"accelerator = Accelerator({arguments})\n" + PREPARED


def _notes(after: str) -> list[tuple[str, int, bool]]:
    return [(p.code, p.col, p.blocking) for p in verify(BEFORE, after) if p.code == "AM918"]


def test_options_carried_into_the_accelerator_need_no_note() -> None:
    handler = "kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True, broadcast_buffers=False)]"
    assert _notes(_after(handler)) == []


def test_an_option_not_carried_is_a_note_under_an_alias_too() -> None:
    only_unused = "kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)]"
    assert _notes(_after(only_unused)) == [("AM918", 83, False)]
    assert [code for code, _, _ in _notes(_after(""))] == ["AM918", "AM918"]


def test_a_carried_option_with_another_value_is_a_note() -> None:
    other = "kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True, broadcast_buffers=True)]"
    assert _notes(_after(other)) == [("AM918", 83, False)]


def test_options_passed_as_a_mapping_are_a_note() -> None:
    before = BEFORE.replace("find_unused_parameters=True, broadcast_buffers=False", "**ddp_options")
    found = [(p.code, p.blocking) for p in verify(before, _after("")) if p.code == "AM918"]
    assert found == [("AM918", False)]
