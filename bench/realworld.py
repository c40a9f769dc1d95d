"""Run the migrator over the real-world corpus and check what it wrote, one command.

    .venv/bin/python bench/realworld.py --mirrors /work/.mirror --out /tmp/realworld
    .venv/bin/python bench/realworld.py --out /tmp/realworld --table REALWORLD.md

Fixtures have the shapes we already thought of; real scripts do not. This reads the
development manifest (../shared/corpus/dev.json) and our own (corpus/*.json), exports each
pinned file from a local git mirror (<mirrors>/<owner>+<name>/repo, as
../shared/corpus/materialize.sh expects), and runs the real command line on it:

    OUT/src/<name>            the original (a `group` is one folder, relative paths kept, with
                              the other Python files of its folders beside it, as in the
                              checkout, read by the tool but not named to it; dev files of
                              one folder that import each other are one folder too)
    OUT/out/<name>.txt        `accel-migrate <name> --diff` (a group: its files by name): the
                              diff, then the findings
    OUT/migrated/<name>       `--write` on a copy: the migrated text
    OUT/again/<name>          `--write` once more on a copy of the migrated text
    OUT/summary.json          one record per file

The automatic checks are necessary, far from sufficient (the verdict that counts is a
review: ../shared/corpus/REVIEW.md): no crash (exit 2, E999), the output compiles, a second
run changes nothing, and no new pyflakes "undefined name" or "referenced before
assignment" compared to the original. A file the verifier refused (AM950-AM959, written
unchanged) is `refused`, not a failure. Exit 1 when any check fails.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEV = ROOT.parent / "shared" / "corpus" / "dev.json"
REQUIRED_KEYS = ("repo", "commit", "path", "loc", "features", "expectations")
# `path:line:col: CODE message`, or `path:line:col: error: message` for a file the tool
# could not process (the text output names no code there; an internal error says so).
FINDING_LINE = re.compile(r"^(?P<path>\S.*?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+|error:) (?P<message>.*)$")
VERIFIER_CODE = re.compile(r"^AM9[56]\d$")
CRASH_CODE = "E999"
INTERNAL_ERROR = "internal error"
# pyflakes message classes that mean "a name is used where it is not bound".
UNBOUND_MESSAGES = ("UndefinedName", "UndefinedLocal")


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file and the entry."""


# --------------------------------------------------------------------------- manifests


@dataclass(frozen=True)
class Entry:
    """One pinned file of the corpus."""

    repo: str
    commit: str
    path: str
    manifest: str
    group: str | None = None

    @property
    def name(self) -> str:
        """`<owner>+<name>__<path with / as +>`, the file key dev.json and materialize.sh use."""
        return self.repo.replace("/", "+") + "__" + self.path.replace("/", "+")

    @property
    def key(self) -> str:
        """Unique across the corpus: the file key, or `<group>/<path>` for a group's file."""
        return f"{self.group}/{self.path}" if self.group else self.name


@dataclass
class Unit:
    """What one tool run covers: a single file, or the files of one `group` together."""

    name: str
    entries: list[Entry]
    joined: bool = False  # single files of one folder that import each other, run together

    @property
    def is_group(self) -> bool:
        return self.joined or self.entries[0].group is not None

    def relpath(self, entry: Entry) -> str:
        """Where `entry` lies under OUT/<stage>/."""
        return f"{self.name}/{entry.path}" if self.is_group else self.name


def load_manifest(path: Path) -> list[Entry]:
    """The entries of one manifest, checked for the keys every entry needs."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the manifest: {exc}") from None
    if not isinstance(data, list):
        raise ManifestError(f"{path}: a manifest is a JSON list of entries")
    entries = []
    for index, item in enumerate(data):
        missing = [key for key in REQUIRED_KEYS if not isinstance(item, dict) or key not in item]
        if missing:
            raise ManifestError(f"{path}: entry {index} lacks {', '.join(missing)}")
        if not re.fullmatch(r"[0-9a-f]{40}", item["commit"]):
            raise ManifestError(f"{path}: entry {index} ({item['path']}): commit must be 40 hex digits")
        entries.append(Entry(item["repo"], item["commit"], item["path"], path.name, item.get("group")))
    return entries


def load_manifests(dev: Path | None, corpus_dir: Path) -> list[Entry]:
    """dev.json first, then corpus/*.json in name order; a file listed twice is an error
    (its outputs would overwrite each other)."""
    paths = ([dev] if dev else []) + sorted(corpus_dir.glob("*.json"))
    entries = [entry for path in paths for entry in load_manifest(path)]
    seen: dict[str, str] = {}
    for entry in entries:
        if entry.key in seen:
            raise ManifestError(f"{entry.manifest}: {entry.key} is already listed in {seen[entry.key]}")
        seen[entry.key] = entry.manifest
    return entries


def group_units(entries: list[Entry]) -> list[Unit]:
    """One unit per single file, one per group (in first-seen order)."""
    units: dict[str, Unit] = {}
    for entry in entries:
        name = entry.group or entry.name
        units.setdefault(name, Unit(name, [])).entries.append(entry)
    return list(units.values())


def join_imports(units: list[Unit], read_entry, manifest: str) -> list[Unit]:
    """Single files of `manifest` (the dev one), of the same repository, commit and folder, where one imports another
    (`train.py` with `import engine`) become one unit, migrated in one run as one program
    (migrator/project.py) and laid out as a folder; each file keeps its key and row.
    `read_entry(entry)` gives the file's text, or None. Order: where the first one was."""
    buckets: dict[tuple[str, str, str], list[Unit]] = {}
    for unit in units:
        if len(unit.entries) == 1 and not unit.is_group and unit.entries[0].manifest == manifest:
            e = unit.entries[0]
            buckets.setdefault((e.repo, e.commit, os.path.dirname(e.path)), []).append(unit)
    joined: dict[int, Unit] = {}
    for (repo, _, folder), members in buckets.items():
        if len(members) < 2:
            continue
        stems = {Path(u.entries[0].path).stem: u for u in members}
        linked = [u for u in members if _imports(read_entry(u.entries[0]), set(stems) - {Path(u.entries[0].path).stem})]
        together = {id(u) for u in linked} | {id(stems[m]) for u in linked for m in _imports(read_entry(u.entries[0]), set(stems))}
        chosen = [u for u in members if id(u) in together]
        if len(chosen) < 2:
            continue
        name = repo.replace("/", "+") + "__" + (folder.replace("/", "+") + "+" if folder else "") + "project"
        unit = Unit(name, [u.entries[0] for u in chosen], joined=True)
        joined[id(chosen[0])] = unit
        joined.update({id(u): None for u in chosen[1:]})
    return [joined.get(id(u), u) for u in units if joined.get(id(u), u) is not None]


def _imports(text: str | None, stems: set[str]) -> set[str]:
    """Which of `stems` the module imports (`import engine`, `from engine import f`,
    `from . import engine`)."""
    if not text:
        return set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                found.add(node.module.split(".")[0])
            if node.level:
                found |= {a.name for a in node.names}
    return found & stems


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class ReportedFinding:
    path: str
    line: int
    code: str
    message: str


def parse_findings(output: str) -> list[ReportedFinding]:
    """The `path:line:col: CODE message` lines of the text output."""
    found = []
    for line in output.splitlines():
        match = FINDING_LINE.match(line)
        if match:
            code, message = match["code"], match["message"]
            if code == "error:":
                code = CRASH_CODE if message.startswith(INTERNAL_ERROR) else "error"
            found.append(ReportedFinding(match["path"], int(match["line"]), code, message))
    return found


def compile_error(text: str, name: str) -> str | None:
    """None when `text` parses and compiles, else Python's message with its line."""
    try:
        compile(text, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return f"{name}:{line}: {exc.__class__.__name__}: {getattr(exc, 'msg', exc)}"
    return None


def unbound_names(text: str, name: str) -> Counter[tuple[str, str]]:
    """pyflakes' "undefined name" and "referenced before assignment" messages, counted by
    (kind, name): lines move in a migration, so the comparison is by name."""
    from pyflakes.checker import Checker

    checker = Checker(ast.parse(text, name), filename=name)
    return Counter(
        (type(m).__name__, str(m.message_args[0])) for m in checker.messages if type(m).__name__ in UNBOUND_MESSAGES
    )


def new_unbound_names(before: str, after: str, name: str) -> list[str]:
    """What the migration added to pyflakes' unbound-name messages, e.g. `UndefinedName accelerator`."""
    added = unbound_names(after, name) - unbound_names(before, name)
    return sorted(f"{kind} {var}" for kind, var in added.elements())


def line_changes(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed from `before` to `after`."""
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


@dataclass
class FileReport:
    """One corpus file after the run: what the tool did and which automatic checks failed."""

    name: str
    manifest: str
    source: str
    status: str = "unchanged"  # migrated | refused | unchanged | crash
    added: int = 0
    removed: int = 0
    findings: int = 0
    verifier: int = 0  # AM95x findings
    failed: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def line(self) -> str:
        checks = "ok" if not self.failed else " ".join(self.failed)
        return (
            f"{self.name:72s} {self.status:9s} +{self.added}/-{self.removed:<4d} "
            f"findings={self.findings:<3d} am95x={self.verifier:<2d} checks: {checks}"
        )


def judge(
    report: FileReport,
    original: str,
    migrated: str | None,
    again: str | None,
    findings: list[ReportedFinding],
    exit_codes: dict[str, int],
) -> FileReport:
    """Fill `report` from the texts and what the tool printed for this file."""
    report.findings = len(findings)
    report.verifier = sum(bool(VERIFIER_CODE.match(f.code)) for f in findings)
    crashes = [f for f in findings if f.code == CRASH_CODE]
    if crashes or 2 in exit_codes.values() or migrated is None:
        report.status = "crash"
        report.failed.append("no-crash")
        report.details += [f"{f.code} line {f.line}: {f.message}" for f in crashes]
        report.details.append("exit statuses: " + ", ".join(f"{label} {code}" for label, code in exit_codes.items()))
        return report
    report.added, report.removed = line_changes(original, migrated)
    if migrated != original:
        report.status = "migrated"
    elif report.verifier:
        report.status = "refused"
    error = compile_error(migrated, report.name)
    if error:
        report.failed.append("compiles")
        report.details.append(error)
        return report
    if again != migrated:
        report.failed.append("idempotent")
        report.details.append("a second run changed the migrated text" if again is not None else "the second run failed")
    added = new_unbound_names(original, migrated, report.name)
    if added:
        report.failed.append("no-new-undefined")
        report.details.append("new pyflakes messages: " + ", ".join(added))
    return report


# --------------------------------------------------------------------------- REALWORLD.md


TABLE_START = "<!-- realworld-table:start (bench/realworld.py --table rewrites these rows) -->"
TABLE_END = "<!-- realworld-table:end -->"
COLUMNS = ("file", "source", "verdict", "one-process-same", "date", "tool commit", "note")
PENDING = "pending review"


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def update_table(text: str, entries: list[Entry], auto: dict[str, str] | None = None) -> str:
    """The document with its table rewritten: one row per entry in manifest order. A row
    already there keeps its review cells (verdict, one-process-same, date, commit, note);
    a new row is `pending review`. `auto` (file -> the last run's status) fills the note of
    rows still pending, so a reader sees what the checks found before anyone reviewed."""
    if TABLE_START not in text or TABLE_END not in text:
        raise ValueError(f"the document has no {TABLE_START} ... {TABLE_END} block")
    head, rest = text.split(TABLE_START, 1)
    old, tail = rest.split(TABLE_END, 1)
    kept = {}
    for row in old.splitlines():
        cells = _cells(row)
        if len(cells) == len(COLUMNS) and cells[0] not in (COLUMNS[0], "") and not set(cells[0]) <= set("-: "):
            kept[cells[0].strip("`")] = cells
    rows = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for entry in entries:
        source = f"{entry.repo}@{entry.commit[:10]}:{entry.path}"
        cells = kept.get(entry.key) or [entry.key, source, PENDING, "-", "-", "-", "-"]
        cells = [f"`{entry.key}`", source, *cells[2:]]
        if cells[2] == PENDING and auto and entry.key in auto:
            cells[6] = auto[entry.key]
        rows.append("| " + " | ".join(cells) + " |")
    return head + TABLE_START + "\n" + "\n".join(rows) + "\n" + TABLE_END + tail


def auto_notes(summary: dict) -> dict[str, str]:
    """`auto <date>: <status>, checks ok|<failed>` per file of a summary.json."""
    notes = {}
    for record in summary["files"]:
        checks = "checks ok" if not record["failed"] else "FAILED " + " ".join(record["failed"])
        verifier = f" (AM95x {record['verifier']})" if record["verifier"] else ""
        notes[record["name"]] = f"auto {summary['date']} @{summary['tool_commit']}: {record['status']}{verifier}, {checks}"
    return notes


# --------------------------------------------------------------------------- running


def git_dir(mirrors: Path, repo: str) -> Path | None:
    """The mirror of `repo`: a bare repository, or a checkout's .git."""
    base = mirrors / repo.replace("/", "+") / "repo"
    return next((p for p in (base / ".git", base) if (p / "HEAD").exists()), None)


def materialize(unit: Unit, mirrors: Path, src: Path) -> list[str]:
    """Export the unit's files under `src`; returns what could not be exported."""
    problems = []
    for entry in unit.entries:
        git = git_dir(mirrors, entry.repo)
        if git is None:
            problems.append(f"no mirror of {entry.repo} under {mirrors}")
            continue
        shown = subprocess.run(["git", "--git-dir", str(git), "show", f"{entry.commit}:{entry.path}"], capture_output=True)
        if shown.returncode:
            problems.append(f"{entry.repo}@{entry.commit[:10]}:{entry.path}: {shown.stderr.decode().strip()}")
            continue
        target = src / unit.relpath(entry)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shown.stdout)
    return problems


def materialize_beside(unit: Unit, mirrors: Path, src: Path, limit: int = 1000) -> None:
    """A group's run sees what a checkout shows: the repository's other Python files (at the
    same commit) are exported beside them, not migrated. The tool reads those around the run
    and those its files import (migrator/surroundings.py), as callers it would not update and
    as helpers whose behaviour decides what is prepared (a loader builder in ssd/data/build.py
    that already shards through a DistributedSampler)."""
    entries = [e for e in unit.entries if e.group is not None]
    if not entries:
        return
    entry = entries[0]
    git = git_dir(mirrors, entry.repo)
    if git is None:
        return
    listed = subprocess.run(
        ["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", entry.commit], capture_output=True, text=True,
    )
    mine = {e.path for e in entries}
    beside = [p for p in listed.stdout.splitlines() if p.endswith(".py") and p not in mine][:limit]
    for path in beside:
        shown = subprocess.run(["git", "--git-dir", str(git), "show", f"{entry.commit}:{path}"], capture_output=True)
        if shown.returncode or len(shown.stdout) > 1_000_000:
            continue
        target = src / unit.name / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shown.stdout)


def _show(mirrors: Path, entry: Entry) -> str | None:
    """The pinned text of `entry` from its mirror, or None."""
    git = git_dir(mirrors, entry.repo)
    if git is None:
        return None
    shown = subprocess.run(["git", "--git-dir", str(git), "show", f"{entry.commit}:{entry.path}"], capture_output=True)
    return None if shown.returncode else shown.stdout.decode("utf-8", "replace")


def run_cli(args: list[str], cwd: Path, tool: Path) -> subprocess.CompletedProcess[str]:
    """The real command line (the migrator found first on PYTHONPATH=`tool`), isolated from
    any project configuration and cache."""
    command = [sys.executable, "-m", "migrator", *args, "--no-cache", "--isolated", "-j", "1"]
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"} | {"NO_COLOR": "1", "PYTHONPATH": str(tool)}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)


def freeze_tool(rev: str, out: Path) -> Path:
    """The migrator, rules and runtime of commit `rev`, exported under OUT/tool: a run then
    measures one commit, not a working tree others are editing meanwhile."""
    target = out / "tool"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "migrator", "rules", "runtime"], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def fresh_copy(source: Path, target: Path) -> None:
    if target.is_dir():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


# Notes the verifier writes beside a migration it writes (comparing it with the original):
# a lint of the result does not say them again. (A refusal, AM95x, it does say.)
_NOT_RELINTED = ("AM917", "AM918", "AM920", "AM921", "AM922", "AM923")


def hook_view(unit: Unit, out: Path, tool: Path, first: list[ReportedFinding]) -> dict[str, list[str]]:
    """What the pre-commit hook says of a migrated group: `--lint` of all its files, then of
    each alone, in OUT/migrated (written to OUT/hook/<unit>.txt). For each file, how the
    lint alone and the lint of the group differ from what the first run left for a human
    (codes added `+` or missing `-`): the second run should say the same, the lint alone too."""
    targets = [unit.relpath(e) for e in unit.entries]
    together = run_cli([*targets, "--lint"], out / "migrated", tool)
    texts = [f"### --lint {' '.join(targets)}\n{together.stdout}{together.stderr}"]
    grouped = parse_findings(together.stdout)
    differences: dict[str, list[str]] = {}
    for target in targets:
        alone = run_cli([target, "--lint"], out / "migrated", tool)
        texts.append(f"### --lint {target}\n{alone.stdout}{alone.stderr}")
        left = Counter(f.code for f in first if f.path == target and not f.code.startswith(_NOT_RELINTED))
        for label, found in (("again", grouped), ("alone", parse_findings(alone.stdout))):
            said = Counter(f.code for f in found if f.path == target)
            changed = [f"+{c}" for c in sorted((said - left).elements())] + [f"-{c}" for c in sorted((left - said).elements())]
            if changed:
                differences.setdefault(target, []).append(f"hook {label}: {' '.join(changed)}")
    (out / "hook").mkdir(exist_ok=True)
    (out / "hook" / f"{unit.name}.txt").write_text("\n".join(texts), encoding="utf-8")
    return differences


def run_unit(unit: Unit, mirrors: Path, out: Path, tool: Path, hook: bool = False) -> list[FileReport]:
    """Materialize, migrate (--diff, --write on a copy, --write again) and judge each file."""
    reports = [
        FileReport(e.key, e.manifest, f"{e.repo}@{e.commit[:10]}:{e.path}") for e in unit.entries
    ]
    problems = materialize(unit, mirrors, out / "src")
    if problems:
        for report in reports:
            report.status = "missing"
            report.failed.append("materialize")
            report.details += problems
        return reports
    materialize_beside(unit, mirrors, out / "src")
    # a group's files by name, as a user names them: the files beside them are only read
    targets = [unit.relpath(e) for e in unit.entries] if unit.entries[0].group is not None else [unit.name]
    diff = run_cli([*targets, "--diff"], out / "src", tool)
    (out / "out" / f"{unit.name}.txt").write_text(diff.stdout + diff.stderr, encoding="utf-8")
    fresh_copy(out / "src" / unit.name, out / "migrated" / unit.name)
    write = run_cli([*targets, "--write"], out / "migrated", tool)
    fresh_copy(out / "migrated" / unit.name, out / "again" / unit.name)
    second = run_cli([*targets, "--write"], out / "again", tool)
    findings = parse_findings(diff.stdout)
    first = findings if hook else []  # --diff shows only what is left for a human
    hooked = hook_view(unit, out, tool, first) if hook and unit.entries[0].group is not None else {}
    # a run given a file Python cannot parse exits 2 by design (the file is named, the
    # others are still migrated): the others are judged by what the run did to them
    unparsable = any(
        (text := read(out / "src" / unit.relpath(e))) is None or compile_error(text, unit.relpath(e)) for e in unit.entries
    )
    for entry, report in zip(unit.entries, reports):
        rel = unit.relpath(entry)
        original = read(out / "src" / rel)
        if original is None or compile_error(original, rel):
            report.status = "bad-input"  # the project's own file: what the run says of it is read in review
            report.details.append("the original does not parse with this Python: the tool must name it, not crash")
            continue
        mine = [f for f in findings if f.path == rel]
        runs = {"--diff": diff, "--write": write, "second --write": second}
        codes = {label: 1 if unparsable and run.returncode == 2 else run.returncode for label, run in runs.items()}
        judge(report, original, read(out / "migrated" / rel), read(out / "again" / rel), mine, codes)
        report.details += hooked.get(rel, [])
        if report.status == "crash":
            report.details += [
                f"{label} exit 2: {(run.stdout + run.stderr).strip().splitlines()[-1:]}"
                for label, run in runs.items() if run.returncode == 2
            ]
    return reports


def tool_commit(rev: str | None) -> str:
    """The commit measured: `rev`, or HEAD plus `+dirty` when migrator/ or rules/ have edits."""
    head = subprocess.run(["git", "rev-parse", "--short=10", rev or "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if rev:
        return head.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "migrator", "rules"], cwd=ROOT, capture_output=True, text=True)
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, help="folder of <owner>+<name>/repo git mirrors")
    parser.add_argument("--out", type=Path, required=True, help="where to write src/, out/, migrated/, summary.json")
    parser.add_argument("--table", type=Path, help="rewrite this document's table from the manifests (and OUT/summary.json) and stop")
    parser.add_argument("--dev", type=Path, default=DEFAULT_DEV, help="the development manifest (default: %(default)s)")
    parser.add_argument("--no-dev", action="store_true", help="only the manifests in corpus/")
    parser.add_argument("--corpus", type=Path, default=ROOT / "corpus", help="folder of our manifests")
    parser.add_argument("--only", action="append", default=[], help="keep units whose name or manifest contains this (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="units run at a time")
    parser.add_argument("--at", metavar="REV", help="run the migrator of this commit (exported to OUT/tool), not the working tree")
    parser.add_argument("--hook", action="store_true", help="also lint each migrated group as the pre-commit hook does (OUT/hook/), noting differences")
    args = parser.parse_args(argv)
    try:
        entries = load_manifests(None if args.no_dev else args.dev, args.corpus)
    except ManifestError as exc:
        print(f"realworld: {exc}", file=sys.stderr)
        return 2
    if args.table:
        summary = args.out / "summary.json"
        auto = auto_notes(json.loads(summary.read_text(encoding="utf-8"))) if summary.exists() else None
        try:
            args.table.write_text(update_table(args.table.read_text(encoding="utf-8"), entries, auto), encoding="utf-8")
        except (OSError, ValueError) as exc:
            print(f"realworld: {args.table}: {exc}", file=sys.stderr)
            return 2
        print(f"{args.table}: {len(entries)} rows")
        return 0
    if args.mirrors is None:
        parser.error("--mirrors is required to run the corpus")
    units = [
        u for u in join_imports(group_units(entries), lambda e: _show(args.mirrors, e), args.dev.name)
        if not args.only or any(s in u.name or s in u.entries[0].manifest for s in args.only)
    ]
    for stage in ("src", "out", "migrated", "again"):
        (args.out / stage).mkdir(parents=True, exist_ok=True)
    commit = tool_commit(args.at)
    tool = freeze_tool(args.at, args.out) if args.at else ROOT
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        reports = [r for batch in pool.map(lambda u: run_unit(u, args.mirrors, args.out, tool, args.hook), units) for r in batch]
    for report in reports:
        print(report.line())
        for detail in report.details:
            print(f"    {detail}")
    statuses = Counter(r.status for r in reports)
    failed = [r for r in reports if r.failed]
    print(
        f"{len(reports)} files in {len(units)} runs: "
        + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        + f"; {sum(r.verifier for r in reports)} AM95x findings; {len(failed)} failing automatic checks"
        + f" (tool {commit}; outputs in {args.out})"
    )
    summary = {
        "date": datetime.date.today().isoformat(),
        "tool_commit": commit,
        "statuses": dict(statuses),
        "failing": len(failed),
        "files": [asdict(r) for r in reports],
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
