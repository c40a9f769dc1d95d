"""Crash sweep: every `.py` file of many public repositories through the real command line.

    .venv/bin/python bench/sweep.py --mirrors /work/.mirror --repos corpus/sweep.txt --out /tmp/sweep -j 2

The corpus (corpus/*.json, bench/realworld.py) is read by a human; this is its wide,
shallow counterpart, so the tool meets syntax nobody wrote a fixture for. For each line
`owner/name COMMIT` of the repository list, the `.py` files at that commit are exported
from the local bare mirror (<mirrors>/<owner>+<name>/repo), then one command per mode
runs over all of them:

    OUT/src/<owner>+<name>/      the export; `accel-migrate src --diff` (nothing written)
    OUT/written/<owner>+<name>/  a copy; `accel-migrate written --write`, then `--check`
                                 on the files it changed

Three checks, the invariants DESIGN.md promises for any input:
- no internal error (E999) in either mode, and no crash of the command itself;
- every file `--write` changed still compiles (when the original did: a file this
  Python cannot compile, or LibCST cannot parse (E001), is input the tool rightly refuses);
- a second run over the written copy changes nothing (`--check` reports no file changed).

Prints one line per repository and a total, writes OUT/sweep.json (every failure with
its file and the first line of its message), exits 1 on any failure. Third-party code
stays under OUT (keep it in /tmp); the repository holds only the pointers.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "migrator"]
# The third-party repository's own [tool.accel-migrate] (if any) must not change the run,
# and a cache would turn the second run into a lookup.
COMMON = ["--isolated", "--no-cache", "--output-format", "json"]
CRASH_CODE = "E999"
PARSE_CODE = "E001"


@dataclass(frozen=True)
class Pin:
    """One repository of the sweep at a fixed commit."""

    repo: str
    commit: str

    @property
    def slug(self) -> str:
        return self.repo.replace("/", "+")


@dataclass
class Failure:
    """One broken invariant: which check, which file, the first line of the message."""

    kind: str  # internal-error | unparsable-output | non-idempotent | command-crash
    file: str
    message: str


@dataclass
class RepoResult:
    repo: str
    commit: str
    files: int = 0
    lines: int = 0
    changed: int = 0
    unparsable_inputs: int = 0
    failures: list[Failure] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for f in self.failures if f.kind == kind)


def read_pins(path: Path) -> list[Pin]:
    """`owner/name COMMIT` per line; `#` starts a comment."""
    pins = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or "/" not in parts[0] or len(parts[1]) != 40:
            raise SystemExit(f"{path}:{number}: expected 'owner/name <40-hex commit>', got {raw!r}")
        pins.append(Pin(parts[0], parts[1]))
    return pins


def git_dir(mirrors: Path, pin: Pin) -> Path:
    found = mirrors / pin.slug / "repo"
    if not (found / "objects").is_dir() and not (found / "HEAD").is_file():
        raise SystemExit(f"{pin.repo}: no mirror at {found} (fetch github:{pin.repo} first)")
    return found


def export_python(gitdir: Path, commit: str, into: Path) -> None:
    """Every regular `.py` file at `commit` under `into` (links and other files left out)."""
    archive = subprocess.run(
        ["git", "--git-dir", str(gitdir), "archive", "--format=tar", commit, "--", ":(glob)**/*.py"],
        check=True, capture_output=True,
    ).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")]
        tar.extractall(into, members=members, filter="data")


def run_cli(args: list[str], cwd: Path, timeout: int, migrator: Path) -> tuple[int, list[dict], str]:
    """The command's exit status, its per-file JSON records, and its stderr."""
    done = subprocess.run(
        [*CLI, *args, *COMMON], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(migrator)},
    )
    try:
        records = json.loads(done.stdout) if done.stdout.strip() else []
    except json.JSONDecodeError:
        records = []
    return done.returncode, records, done.stderr


def first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:300] if (text or "").strip() else ""


def compiles(path: Path) -> str | None:
    """None when the file compiles, else the error's first line."""
    try:
        with warnings.catch_warnings():  # the project's own SyntaxWarnings (`x is 0`) are not ours
            warnings.simplefilter("ignore")
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _crash(result: RepoResult, mode: str, code: int, records: list[dict], stderr: str) -> None:
    """Internal errors (per file) and a command that died (no records, or a traceback)."""
    for record in records:
        error = record.get("error") or {}
        if error.get("code") == CRASH_CODE:
            result.failures.append(Failure("internal-error", record["path"], f"{mode}: {first_line(error['message'])}"))
    if code not in (0, 1, 2) or "Traceback (most recent call last)" in stderr or (code == 2 and not records):
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or [f"exit {code}"]
        result.failures.append(Failure("command-crash", "", f"{mode}: exit {code}: {tail[0][:300]}"))


def _repo_of(record_path: str) -> str:
    """`src/<owner>+<name>/...` → `<owner>+<name>`."""
    return Path(record_path).parts[1]


def sweep(pins: list[Pin], mirrors: Path, out: Path, jobs: int, timeout: int, migrator: Path) -> list[RepoResult]:
    """Export every repository, then one command per mode over all of them (the command's
    start-up and the worker pool are paid once, not once per repository)."""
    results = {pin.slug: RepoResult(pin.repo, pin.commit) for pin in pins}
    for sub in ("src", "written"):
        shutil.rmtree(out / sub, ignore_errors=True)
    for pin in pins:
        export_python(git_dir(mirrors, pin), pin.commit, out / "src" / pin.slug)
    shutil.copytree(out / "src", out / "written")
    j = ["-j", str(jobs)]
    whole = RepoResult("(the command)", "")

    def timed(args: list[str]) -> tuple[int, list[dict], str]:
        start = time.monotonic()
        done = run_cli(args, out, timeout, migrator)
        print(f"accel-migrate {' '.join(args[-3:]) if len(args) > 6 else ' '.join(args)}: "
              f"{len(done[1])} files in {time.monotonic() - start:.0f}s", flush=True)
        return done

    def crashes(mode: str, code: int, records: list[dict], stderr: str) -> None:
        for record in records:
            _crash(results[_repo_of(record["path"])], mode, 0, [record], "")
        _crash(whole, mode, code, [{}] if records else [], stderr)

    code, records, stderr = timed(["src", "--diff", *j])
    crashes("--diff", code, records, stderr)
    for record in records:
        result = results[_repo_of(record["path"])]
        result.files += 1
        path = out / record["path"]
        result.lines += len(path.read_bytes().splitlines()) if path.is_file() else 0
        if (record.get("error") or {}).get("code") == PARSE_CODE:
            result.unparsable_inputs += 1

    code, records, stderr = timed(["written", "--write", *j])
    crashes("--write", code, records, stderr)
    changed = [r["path"] for r in records if r.get("status") == "changed"]
    for name in changed:
        result = results[_repo_of(name)]
        result.changed += 1
        problem = compiles(out / name)
        if problem and compiles(out / "src" / Path(name).relative_to("written")) is None:
            result.failures.append(Failure("unparsable-output", name, first_line(problem)))

    # A file --write left alone would be left alone again (the run is deterministic):
    # only the changed ones need the second run.
    for start in range(0, len(changed), 400):
        code, records, stderr = timed([*changed[start:start + 400], "--check", *j])
        crashes("--check", code, records, stderr)
        for record in records:
            if record.get("status") == "changed":
                results[_repo_of(record["path"])].failures.append(
                    Failure("non-idempotent", record["path"], "a second --write would change it again")
                )
    out_results = list(results.values())
    if whole.failures:
        out_results.append(whole)
    return out_results


ROW = "{:<48} {:>6} {:>8} {:>7} {:>8} {:>10} {:>10}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of <owner>+<name>/repo bare mirrors")
    parser.add_argument("--repos", type=Path, default=ROOT / "corpus" / "sweep.txt")
    parser.add_argument("--out", type=Path, required=True, help="where the copies go (under /tmp)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], help="sweep only this owner/name (repeatable)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per command")
    parser.add_argument(
        "--migrator", type=Path, default=ROOT,
        help="the checkout whose migrator runs (a frozen copy, so edits made meanwhile do not mix in)",
    )
    args = parser.parse_args(argv)

    pins = read_pins(args.repos)
    if args.only:
        pins = [p for p in pins if p.repo in args.only]
    args.out.mkdir(parents=True, exist_ok=True)
    results = sweep(pins, args.mirrors, args.out, args.jobs, args.timeout, args.migrator.resolve())
    print(ROW.format("repository", "files", "lines", "changed", "internal", "unparsable", "non-idemp."))
    for result in results:
        print(ROW.format(result.repo, result.files, result.lines, result.changed, result.count("internal-error")
                         + result.count("command-crash"), result.count("unparsable-output"),
                         result.count("non-idempotent")), flush=True)
        for failure in result.failures:
            print(f"    {failure.kind}: {failure.file}: {failure.message}", flush=True)

    total = {
        "repositories": len(results),
        "files": sum(r.files for r in results),
        "lines": sum(r.lines for r in results),
        "changed": sum(r.changed for r in results),
        "unparsable_inputs": sum(r.unparsable_inputs for r in results),
        "internal_errors": sum(r.count("internal-error") + r.count("command-crash") for r in results),
        "unparsable_outputs": sum(r.count("unparsable-output") for r in results),
        "non_idempotent": sum(r.count("non-idempotent") for r in results),
    }
    print(ROW.format("total", total["files"], total["lines"], total["changed"], total["internal_errors"],
                     total["unparsable_outputs"], total["non_idempotent"]))
    print(f"({total['unparsable_inputs']} input files LibCST cannot parse were refused with E001, as they should be)")
    report = {"total": total, "repositories": [asdict(r) for r in results]}
    (args.out / "sweep.json").write_text(json.dumps(report, indent=2) + "\n")
    failed = total["internal_errors"] + total["unparsable_outputs"] + total["non_idempotent"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
