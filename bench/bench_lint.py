"""How fast `accel-migrate --lint` is on a repository's worth of training scripts.

Generates 50 training files (the fixtures' end-to-end inputs and migrated outputs, three
per file, each inside a function, so a file is a typical 100-300 lines), then times a cold
`python -m migrator --lint DIR` in a fresh subprocess (the pre-commit hook's situation:
interpreter start, imports, parse, analysis, all rules) against a baseline measured in
the same run: a fresh interpreter that only imports LibCST and parses the same files.

Run: `.venv/bin/python bench/bench_lint.py [--files 50] [--runs 5]`
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 2.0
_FUTURE = re.compile(r"^from __future__ import .*\n", re.MULTILINE)  # only legal at the top
PARSE_ONLY = (
    "import pathlib, sys, libcst\n"
    "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.py')):\n"
    "    libcst.parse_module(p.read_bytes())\n"
)


def sources() -> list[str]:
    """Fixture scripts that parse: the end-to-end inputs (unmigrated) and every case's
    expected output (migrated code, what a lint hook mostly sees)."""
    out = []
    for case in sorted((ROOT / "fixtures").iterdir()):
        if case.name.startswith("err-"):
            continue
        for name in ("input.py", "expected.py") if case.name.startswith("e2e-") else ("expected.py",):
            path = case / name
            if path.exists():
                text = path.read_text(encoding="utf-8")
                try:
                    compile(text, str(path), "exec")
                except SyntaxError:
                    continue
                out.append(text)
    return out


def generate(directory: Path, count: int, seed: int = 4) -> int:
    """Write `count` training files of three fixture scripts each, every one a function
    (`def variant_3_1(): ...`), as a script with a few training entry points would be;
    return the total number of lines."""
    pool = sources()
    rng = random.Random(seed)
    lines = 0
    for i in range(count):
        parts = [_FUTURE.sub("", p) for p in rng.sample(pool, 3)]
        chunks = [f'"""Generated training script {i} for the lint benchmark."""\n']
        for k, part in enumerate(parts):
            chunks.append(f"def variant_{i}_{k}():\n" + textwrap.indent(part, "    ") + "    pass\n")
        text = "\n\n".join(chunks)
        compile(text, f"train_{i:02d}.py", "exec")
        (directory / f"train_{i:02d}.py").write_text(text, encoding="utf-8")
        lines += text.count("\n")
    return lines


def timed(argv: list[str], runs: int, expect: set[int]) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system) seconds of `runs` fresh subprocesses, after one
    untimed warm-up run that fills the OS file cache (as a previous commit would have).
    CPU time is reported too because wall time on a shared machine includes waiting."""
    subprocess.run(argv, capture_output=True, check=False)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode not in expect:
            raise SystemExit(f"{argv[:4]} exited {done.returncode}:\n{done.stderr.decode()[-2000:]}")
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="accel-lint-bench-") as tmp:
        directory = Path(tmp)
        lines = generate(directory, args.files)
        cache = directory / ".cache"
        command = [python, "-m", "migrator", "--lint", "--isolated", str(directory)]
        # Cold: no result cache (the untimed warm-up run would otherwise fill it).
        lint = timed([*command, "--no-cache"], args.runs, {0, 1})
        warm = timed([*command, "--cache-dir", str(cache)], args.runs, {0, 1})
        parse = timed([python, "-c", PARSE_ONLY, str(directory)], args.runs, {0})
        start = timed([python, "-c", "pass"], args.runs, {0})
    print(f"files: {args.files} ({lines} lines), runs: {args.runs}, python {sys.version.split()[0]}")
    rows = (
        ("accel-migrate --lint (cold subprocess)", lint),
        ("accel-migrate --lint (warm result cache)", warm),
        ("baseline: import libcst + parse all", parse),
        ("python startup alone", start),
    )
    for label, (walls, cpus) in rows:
        print(
            f"{label:<42} wall median {statistics.median(walls):.3f} s ({_fmt(walls)})"
            f"  cpu median {statistics.median(cpus):.3f} s"
        )
    lint_s, parse_s = statistics.median(lint[0]), statistics.median(parse[0])
    lint_cpu, parse_cpu = statistics.median(lint[1]), statistics.median(parse[1])
    print(f"ratio lint / parse-only baseline: wall {lint_s / parse_s:.2f}x, cpu {lint_cpu / parse_cpu:.2f}x")
    verdict = "under" if lint_s < TARGET_SECONDS else "OVER"
    print(f"target {TARGET_SECONDS:.1f} s wall: {verdict}")


def _fmt(times: list[float]) -> str:
    return " ".join(f"{t:.3f}" for t in times)


if __name__ == "__main__":
    main()
