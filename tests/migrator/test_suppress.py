"""Inline suppression comments through the engine: on the line, bare, with codes, by rule
name; and AM902, the suppressions that silence nothing."""

from __future__ import annotations

from migrator.api import migrate_source
from migrator.config import Config
from migrator.suppress import suppressed_codes, suppressions, unused_suppressions

HEAD = (
    "import torch\nfrom runtime import Accelerator\n\naccelerator = Accelerator()\n"
    "loader = torch.utils.data.DataLoader(range(8))\n"
)
LEN_BEFORE = HEAD + "steps = len(loader){comment}\nloader = accelerator.prepare(loader)\n"  # AM104 at 6:9


def _codes(source: str, *select: str, fix: bool = False) -> list[str]:
    result = migrate_source(source, "t.py", Config(fix=fix, select=select))
    return [f"{f.start} {f.code}" for f in result.findings]


def test_a_finding_without_comment_is_reported() -> None:
    assert _codes(LEN_BEFORE.format(comment=""), "AM104") == ["6:9 AM104"]


def test_suppressed_on_the_line_by_code_bare_name_and_list() -> None:
    for comment in (
        "  # accel-migrate: ignore[AM104]",
        "  # accel-migrate: ignore",
        "  # accel-migrate: ignore[len-before-prepare]",
        "  # accel-migrate: ignore[AM101, am104]",
        "  #accel-migrate:ignore[ AM104 ]",
    ):
        assert _codes(LEN_BEFORE.format(comment=comment), "AM104", "AM902") == [], comment


def test_a_comment_for_another_code_does_not_suppress() -> None:
    source = LEN_BEFORE.format(comment="  # accel-migrate: ignore[AM101]")
    assert _codes(source, "AM104") == ["6:9 AM104"]


def test_a_comment_on_another_line_does_not_suppress() -> None:
    source = HEAD + "# accel-migrate: ignore[AM104]\nsteps = len(loader)\nloader = accelerator.prepare(loader)\n"
    assert _codes(source, "AM104") == ["7:9 AM104"]


def test_unused_suppressions_are_reported() -> None:
    source = HEAD + (
        "loader = accelerator.prepare(loader)\n"
        "steps = len(loader)  # accel-migrate: ignore[AM104]\n"
        "total = 2 * steps  # accel-migrate: ignore\n"
    )
    result = migrate_source(source, "t.py", Config(fix=False, select=("AM104", "AM902")))
    assert [(str(f.start), f.code, f.message) for f in result.findings] == [
        ("7:22", "AM902", "`# accel-migrate: ignore[AM104]` silences nothing on this line"),
        ("8:20", "AM902", "`# accel-migrate: ignore` silences nothing on this line"),
    ]


def test_only_the_unused_codes_of_a_list_are_named() -> None:
    source = LEN_BEFORE.format(comment="  # accel-migrate: ignore[AM104, AM202]")
    result = migrate_source(source, "t.py", Config(fix=False, select=("AM104", "AM202", "AM902")))
    assert [f.message for f in result.findings] == ["`# accel-migrate: ignore[AM202]` silences nothing on this line"]


def test_codes_of_rules_that_did_not_run_are_not_judged() -> None:
    source = HEAD + "x = 1  # accel-migrate: ignore[AM301, AM999]\n"
    assert _codes(source, "AM104", "AM902") == []


def test_unused_suppression_is_off_when_not_selected_and_can_be_silenced() -> None:
    source = HEAD + "x = 1  # accel-migrate: ignore\ny = 2  # accel-migrate: ignore[AM902]\n"
    assert _codes(source, "AM104") == []
    assert _codes(source, "AM104", "AM902") == ["6:8 AM902"]


def test_text_in_strings_is_not_a_suppression() -> None:
    source = HEAD + 'doc = "# accel-migrate: ignore"\n'
    assert _codes(source, "AM902") == []
    assert suppressions(source) == []


def test_fix_mode_judges_the_code_it_returns() -> None:
    # AM101 fixes the move the comment was meant for; AM104's comment stays in use.
    source = HEAD + (
        "model = torch.nn.Linear(2, 2)\n"
        "steps = len(loader)  # accel-migrate: ignore[AM104]\n"
        "model, loader = accelerator.prepare(model, loader)\n"
        "model.to('cuda')  # accel-migrate: ignore[AM101]\n"
    )
    assert _codes(source, "AM101", "AM104", "AM902", fix=True) == []


def test_helpers() -> None:
    assert suppressed_codes("x  # accel-migrate: ignore") == set()
    assert suppressed_codes("x  # accel-migrate: ignore[AM1, tensor-to-device]") == {"AM1", "TENSOR-TO-DEVICE"}
    assert suppressed_codes("x  # noqa") is None
    code = "a = 1  # accel-migrate: ignore[AM101]\n"
    assert unused_suppressions(code, [(1, "AM101", "tensor-to-device")], [("AM101", "tensor-to-device")]) == []
    ((s, codes),) = unused_suppressions(code, [], [("AM101", "tensor-to-device")])
    assert (s.line, s.col, codes) == (1, 8, ("AM101",))
