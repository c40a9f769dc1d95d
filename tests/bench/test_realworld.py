"""bench/realworld.py without the mirrors CI lacks: manifests, the checks, the per-file
verdict, and one real run of the command line over a git repository made here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import realworld
from bench.realworld import Entry, FileReport, ManifestError, ReportedFinding

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def entry_dict(path: str = "train.py", **extra: object) -> dict:
    return {"repo": "someone/project", "commit": COMMIT, "path": path, "loc": 3, "features": [], "expectations": [], **extra}


def write_manifest(folder: Path, name: str, entries: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(entries))
    return folder / name


# --------------------------------------------------------------------------- manifests


def test_entries_keep_the_file_key_dev_json_uses() -> None:
    entry = Entry("pytorch/examples", COMMIT, "mnist/main.py", "dev.json")
    assert entry.name == "pytorch+examples__mnist+main.py"


def test_manifest_lacking_a_key_names_the_file_and_entry(tmp_path: Path) -> None:
    broken = entry_dict()
    del broken["expectations"]
    path = write_manifest(tmp_path, "x.json", [entry_dict(), broken])
    with pytest.raises(ManifestError, match=r"x\.json: entry 1 lacks expectations"):
        realworld.load_manifest(path)


def test_manifest_commit_must_be_pinned(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "x.json", [entry_dict(commit="main")])
    with pytest.raises(ManifestError, match="40 hex digits"):
        realworld.load_manifest(path)


def test_dev_first_then_corpus_in_name_order_and_groups_run_together(tmp_path: Path) -> None:
    dev = write_manifest(tmp_path / "shared", "dev.json", [entry_dict("a.py")])
    write_manifest(tmp_path / "corpus", "b.json", [entry_dict("m.py", group="g"), entry_dict("e.py", group="g")])
    write_manifest(tmp_path / "corpus", "a.json", [entry_dict("z.py")])
    entries = realworld.load_manifests(dev, tmp_path / "corpus")
    assert [(e.manifest, e.path) for e in entries] == [
        ("dev.json", "a.py"), ("a.json", "z.py"), ("b.json", "m.py"), ("b.json", "e.py"),
    ]
    units = realworld.group_units(entries)
    assert [u.name for u in units] == ["someone+project__a.py", "someone+project__z.py", "g"]
    assert [units[2].relpath(e) for e in units[2].entries] == ["g/m.py", "g/e.py"]


def test_dev_files_of_one_folder_that_import_each_other_run_as_one_unit(tmp_path: Path) -> None:
    dev = write_manifest(
        tmp_path / "shared", "dev.json",
        [entry_dict("src/train.py"), entry_dict("other.py"), entry_dict("src/engine.py"), entry_dict("src/alone.py")],
    )
    write_manifest(tmp_path / "corpus", "a.json", [entry_dict("src/utils.py")])
    texts = {"src/train.py": "import engine\nimport utils\n", "src/engine.py": "import torch\n", "src/alone.py": "x = 1\n"}
    entries = realworld.load_manifests(dev, tmp_path / "corpus")
    units = realworld.join_imports(realworld.group_units(entries), lambda e: texts.get(e.path), "dev.json")
    assert [u.name for u in units] == [
        "someone+project__src+project", "someone+project__other.py", "someone+project__src+alone.py",
        "someone+project__src+utils.py",
    ]
    assert [units[0].relpath(e) for e in units[0].entries] == ["someone+project__src+project/src/train.py", "someone+project__src+project/src/engine.py"]
    assert [e.key for e in units[0].entries] == ["someone+project__src+train.py", "someone+project__src+engine.py"]


def test_a_file_listed_twice_is_an_error(tmp_path: Path) -> None:
    write_manifest(tmp_path / "corpus", "a.json", [entry_dict()])
    write_manifest(tmp_path / "corpus", "b.json", [entry_dict()])
    with pytest.raises(ManifestError, match="already listed in a.json"):
        realworld.load_manifests(None, tmp_path / "corpus")


def test_the_repository_manifests_load() -> None:
    entries = realworld.load_manifests(None, ROOT / "corpus")
    assert entries, "corpus/*.json holds our additions"
    for entry in entries:
        assert "/" in entry.repo and not entry.path.startswith("/"), entry


# --------------------------------------------------------------------------- checks


def test_findings_are_read_from_the_text_output() -> None:
    output = (
        "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-x\n+y\n"
        "g/train.py:12:5: AM301 `loss.backward()` bypasses the Accelerator\n"
        "g/train.py:1:1: AM950 left as written: the migration would use `accelerator` where it is not bound\n"
        "1 file would be migrated (2 fixes). Run with --write to apply.\n"
    )
    assert realworld.parse_findings(output) == [
        ReportedFinding("g/train.py", 12, "AM301", "`loss.backward()` bypasses the Accelerator"),
        ReportedFinding("g/train.py", 1, "AM950", "left as written: the migration would use `accelerator` where it is not bound"),
    ]


def test_an_internal_error_line_is_a_crash_finding() -> None:
    output = (
        "train.py:1:1: error: internal error (UnboundLocalError: cannot access local variable 'chain'); please report this bug\n"
        "other.py:3:1: error: cannot parse: invalid syntax\n"
    )
    assert [(f.path, f.code) for f in realworld.parse_findings(output)] == [("train.py", "E999"), ("other.py", "error")]


def test_compile_error_names_the_line() -> None:
    assert realworld.compile_error("x = 1\n", "t.py") is None
    assert realworld.compile_error("if x:\npass\n", "t.py").startswith("t.py:2: ")
    # compiles, not only parses: a misplaced `return` is a compile-time error
    assert realworld.compile_error("return 1\n", "t.py") is not None


def test_new_unbound_names_ignores_what_the_original_already_had() -> None:
    before = "def train(loss):\n    loss.backward()\n    report(loss)\n"
    after = "def train(loss):\n    accelerator.backward(loss)\n    report(loss)\n"
    assert realworld.new_unbound_names(before, after, "t.py") == ["UndefinedName accelerator"]
    assert realworld.new_unbound_names(after, after, "t.py") == []


def test_new_unbound_names_sees_a_local_used_before_its_assignment() -> None:
    before = "import torch\ndef f():\n    x = torch.ones(1)\n    return x\n"
    after = "import torch\ndef f():\n    y = torch\n    torch = 1\n    x = y.ones(1)\n    return x\n"
    assert realworld.new_unbound_names(before, after, "t.py") == ["UndefinedLocal torch"]


def test_line_changes() -> None:
    assert realworld.line_changes("a\nb\nc\n", "a\nB\nc\nd\n") == (2, 1)
    assert realworld.line_changes("a\n", "a\n") == (0, 0)


def judged(original: str, migrated: str | None, again: str | None, findings: list[ReportedFinding], codes: list[int]) -> FileReport:
    runs = dict(zip(["--diff", "--write", "second --write"], codes))
    return realworld.judge(FileReport("t.py", "m.json", "src"), original, migrated, again, findings, runs)


def finding(code: str) -> ReportedFinding:
    return ReportedFinding("t.py", 1, code, "message")


def test_judge_statuses() -> None:
    text = "x = 1\n"
    refused = judged(text, text, text, [finding("AM301"), finding("AM951")], [1, 1, 1])
    assert (refused.status, refused.failed, refused.findings, refused.verifier) == ("refused", [], 2, 1)
    assert judged(text, text, text, [], [0, 0, 0]).status == "unchanged"
    migrated = judged(text, "x = 2\n", "x = 2\n", [], [1, 0, 0])
    assert (migrated.status, migrated.added, migrated.removed, migrated.failed) == ("migrated", 1, 1, [])


def test_judge_failures() -> None:
    text = "x = 1\n"
    crash = judged(text, text, text, [finding("E999")], [2, 2, 2])
    assert (crash.status, crash.failed) == ("crash", ["no-crash"])
    second_run = judged(text, "x = 2\n", None, [], [1, 0, 2])
    assert (second_run.status, second_run.details) == ("crash", ["exit statuses: --diff 1, --write 0, second --write 2"])
    assert judged(text, "x = (\n", "x = (\n", [], [1, 1, 1]).failed == ["compiles"]
    assert judged(text, "x = 2\n", "x = 3\n", [], [1, 1, 1]).failed == ["idempotent"]
    assert judged(text, "x = y\n", "x = y\n", [], [1, 0, 0]).failed == ["no-new-undefined"]


# --------------------------------------------------------------------------- one real run


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_one_real_run_over_a_local_mirror(tmp_path: Path) -> None:
    """A mirror laid out as <owner>+<name>/repo, a manifest pinned to its commit, the real
    command line: outputs land where the docstring says, and the summary agrees."""
    checkout = tmp_path / "mirrors" / "someone+project" / "repo"
    checkout.mkdir(parents=True)
    (checkout / "train.py").write_text((ROOT / "examples" / "train.py").read_text())
    (checkout / "notes.py").write_text("print('no torch here')\n")
    git("init", "-q", cwd=checkout)
    git("add", ".", cwd=checkout)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=checkout)
    commit = git("rev-parse", "HEAD", cwd=checkout)
    write_manifest(tmp_path / "corpus", "a.json", [entry_dict("train.py", commit=commit), entry_dict("notes.py", commit=commit)])
    out = tmp_path / "out"
    argv = ["--mirrors", str(tmp_path / "mirrors"), "--out", str(out), "--no-dev", "--corpus", str(tmp_path / "corpus")]
    status = realworld.main([*argv, "--at", "HEAD"])
    summary = json.loads((out / "summary.json").read_text())
    by_name = {f["name"]: f for f in summary["files"]}
    assert by_name["someone+project__notes.py"]["status"] == "unchanged"
    train = by_name["someone+project__train.py"]
    assert train["status"] in ("migrated", "refused"), train
    assert (status, train["failed"]) == (0, [])
    assert (out / "src" / "someone+project__train.py").read_text() == (ROOT / "examples" / "train.py").read_text()
    assert (out / "out" / "someone+project__train.py.txt").read_text().startswith("---")
    assert (out / "migrated" / "someone+project__train.py").exists()
    # --at HEAD ran the committed migrator, exported beside the outputs
    assert (out / "tool" / "migrator" / "cli.py").exists()
    assert summary["tool_commit"] == git("rev-parse", "--short=10", "HEAD", cwd=ROOT)


def test_a_group_runs_in_its_checkout_and_a_caller_beside_it_keeps_the_function(tmp_path: Path) -> None:
    """A group's files are migrated with the other Python files of their folders exported
    beside them, as in the user's checkout: `report.py` also calls `engine.evaluate`, so
    the run does not thread it; only the group's files are counted and written."""
    setup = (ROOT / "tests" / "migrator" / "test_project.py").read_text()
    namespace: dict = {}
    exec(compile(setup[setup.index("TRAIN = "):setup.index("def _project")], "x", "exec"), {"textwrap": __import__("textwrap")}, namespace)
    checkout = tmp_path / "mirrors" / "someone+project" / "repo"
    checkout.mkdir(parents=True)
    (checkout / "train.py").write_text(namespace["TRAIN"])
    (checkout / "engine.py").write_text(namespace["ENGINE"])
    (checkout / "report.py").write_text("import engine\n\n\ndef run(loader, model):\n    return engine.evaluate(loader, model, 'cpu')\n")
    git("init", "-q", cwd=checkout)
    git("add", ".", cwd=checkout)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=checkout)
    commit = git("rev-parse", "HEAD", cwd=checkout)
    group = {"group": "someone+project@run"}
    write_manifest(tmp_path / "corpus", "a.json", [entry_dict("train.py", commit=commit, **group), entry_dict("engine.py", commit=commit, **group)])
    out = tmp_path / "out"
    argv = ["--mirrors", str(tmp_path / "mirrors"), "--out", str(out), "--no-dev", "--corpus", str(tmp_path / "corpus")]
    assert realworld.main([*argv, "--at", "HEAD"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(f["name"] for f in summary["files"]) == ["someone+project@run/engine.py", "someone+project@run/train.py"]
    assert (out / "src" / "someone+project@run" / "report.py").exists()
    engine = (out / "migrated" / "someone+project@run" / "engine.py").read_text()
    assert "def evaluate(loader, model, device):" in engine  # report.py would not be updated
    assert (out / "migrated" / "someone+project@run" / "report.py").read_text() == (checkout / "report.py").read_text()
    # --hook: the migrated group linted as the pre-commit hook does, together and file by file
    hooked = tmp_path / "hooked"
    assert realworld.main([*argv[:2], "--out", str(hooked), *argv[4:], "--hook"]) == 0
    view = (hooked / "hook" / "someone+project@run.txt").read_text()
    assert "### --lint someone+project@run/engine.py\n" in view
    details = [d for f in json.loads((hooked / "summary.json").read_text())["files"] for d in f["details"]]
    assert not [d for d in details if d.startswith("hook ")], details  # it says what the first run left


# --------------------------------------------------------------------------- REALWORLD.md table


def test_table_keeps_reviewed_rows_and_adds_pending_ones() -> None:
    reviewed = Entry("a/b", COMMIT, "train.py", "dev.json")
    new = Entry("a/b", COMMIT, "eval.py", "scripts.json", group="a+b@g")
    doc = (
        "# Title\n\n" + realworld.TABLE_START + "\n"
        "| file | source | verdict | one-process-same | date | tool commit | note |\n|---|---|---|---|---|---|---|\n"
        "| `a+b__train.py` | old | correct | yes | 2026-11-23 | abc123 | fine |\n"
        "| `gone.py` | x | silently-wrong | no | d | c | dropped from the manifests |\n"
        + realworld.TABLE_END + "\n\nAfter.\n"
    )
    auto = {"a+b@g/eval.py": "auto 2026-11-23 @abc: refused (AM95x 1), checks ok", "a+b__train.py": "auto: ignored"}
    out = realworld.update_table(doc, [reviewed, new], auto)
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert rows == [
        f"| `a+b__train.py` | a/b@{COMMIT[:10]}:train.py | correct | yes | 2026-11-23 | abc123 | fine |",
        f"| `a+b@g/eval.py` | a/b@{COMMIT[:10]}:eval.py | pending review | - | - | - | auto 2026-11-23 @abc: refused (AM95x 1), checks ok |",
    ]
    assert out.startswith("# Title\n\n") and out.endswith(realworld.TABLE_END + "\n\nAfter.\n")
    assert realworld.update_table(out, [reviewed, new], auto) == out


def test_table_needs_its_markers() -> None:
    with pytest.raises(ValueError, match="realworld-table:start"):
        realworld.update_table("# no table\n", [], None)


def test_auto_notes_say_status_verifier_and_checks() -> None:
    summary = {"date": "2026-11-23", "tool_commit": "abc", "files": [
        {"name": "x", "status": "refused", "verifier": 2, "failed": []},
        {"name": "y", "status": "migrated", "verifier": 0, "failed": ["idempotent"]},
    ]}
    assert realworld.auto_notes(summary) == {
        "x": "auto 2026-11-23 @abc: refused (AM95x 2), checks ok",
        "y": "auto 2026-11-23 @abc: migrated, FAILED idempotent",
    }
