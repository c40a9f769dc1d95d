"""Start-up cost of the command line, the pre-commit hook's situation: a fresh
interpreter per call. Prints the median wall and CPU time of each command against plain
`python -c pass`, measured in the same run (this machine is shared: trust CPU time).

Run: `.venv/bin/python bench/bench_startup.py [--runs 9]`
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples" / "train.py")


def measure(argv: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `argv` over `runs` fresh processes."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    py = sys.executable
    cli = [py, "-m", "migrator"]
    commands = [
        ("python -c pass", [py, "-c", "pass"]),
        ("accel-migrate --help", [*cli, "--help"]),
        ("accel-migrate examples/train.py --lint", [*cli, EXAMPLE, "--lint", "--no-cache"]),
        ("accel-migrate examples/train.py --diff", [*cli, EXAMPLE, "--diff", "--no-cache"]),
    ]
    base_wall, base_cpu = measure(commands[0][1], runs)
    print(f"median of {runs} fresh processes, python {sys.version.split()[0]}")
    for label, argv in commands:
        wall, cpu = measure(argv, runs)
        print(f"{label:42s} wall {wall * 1000:6.0f} ms   cpu {cpu * 1000:6.0f} ms   cpu over python: {(cpu - base_cpu) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
