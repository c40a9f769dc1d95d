"""docs.py and the rule documentation users read: the README table is generated and
current, and `--explain` renders every rule's page."""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from migrator import cli, docs, registry
from migrator.rule import FixAvailability, Safety

ROOT = Path(__file__).resolve().parents[2]
RULES = registry.all_rules()


def _generator():
    spec = importlib.util.spec_from_file_location("gen_rule_table", ROOT / "scripts" / "gen_rule_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_rule_table_is_up_to_date():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme == _generator().expected_readme(readme), (
        "README rule table is stale: run python scripts/gen_rule_table.py"
    )


def test_rule_table_has_one_row_per_rule():
    table = docs.rule_table(RULES)
    rows = table.strip().splitlines()[2:]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == [r.code for r in RULES]
    for rule, row in zip(RULES, rows):
        assert f"`{rule.name}`" in row and docs.fix_label(rule) in row


def test_replace_table_needs_the_markers():
    with pytest.raises(ValueError, match="markers"):
        docs.replace_table("# no markers here\n", "| table |\n")
    text = f"a\n{docs.TABLE_START}\nold\n{docs.TABLE_END}\nb\n"
    assert docs.replace_table(text, "new\n") == f"a\n{docs.TABLE_START}\nnew\n{docs.TABLE_END}\nb\n"


def test_generator_check_mode_reports_staleness(tmp_path, monkeypatch):
    generator = _generator()
    stale = tmp_path / "README.md"
    stale.write_text(f"x\n{docs.TABLE_START}\nold\n{docs.TABLE_END}\n")
    monkeypatch.setattr(generator, "README", stale)
    assert generator.main(["--check"]) == 1
    assert "old" in stale.read_text()
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_explain_renders_every_rule(rule):
    outcome = CliRunner().invoke(cli.app, ["--explain", rule.code])
    assert outcome.exit_code == 0, outcome.output
    page = outcome.stdout
    assert page.startswith(f"# {rule.code} {rule.name}\n")
    assert "## What it does" in page and "## Why is this bad?" in page
    if rule.fix is FixAvailability.NEVER:
        assert "**Fix:** none" in page
    elif rule.safety is Safety.UNSAFE:
        assert "unsafe, applied only with `--unsafe-fixes`" in page
    else:
        assert "safe, applied by `--write`" in page
    assert inspect.cleandoc(rule.__doc__).splitlines()[1] in page  # the explanation itself
    for example in rule.examples:
        assert example.before.strip().splitlines()[-1] in page
        if example.after is not None:
            assert "After `accel-migrate --write`:" in page


def test_explain_accepts_a_rule_name():
    rule = RULES[0]
    outcome = CliRunner().invoke(cli.app, ["--explain", rule.name])
    assert outcome.exit_code == 0
    assert outcome.stdout.startswith(f"# {rule.code} {rule.name}\n")


def test_explain_through_the_real_cli():
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    proc = subprocess.run(
        [sys.executable, "-m", "migrator", "--explain", "AM301"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc
    assert proc.stdout == docs.explanation(registry.find("AM301"))
