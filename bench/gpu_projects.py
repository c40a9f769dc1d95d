"""The migrated project fixtures on a CUDA GPU, one command (the CPU suite runs them on gloo).

    python bench/gpu_projects.py

For each runnable project fixture (tests/equivalence/test_project_fixture_runs.py RUNS):
the original runs as its author runs it (`python main.py`, on the GPU where it picks
`cuda`), then the migrated snapshot (`fixtures/<name>/expected/`) under accel-launch with
one process per GPU (NCCL), in full precision and in fp16. Passes when every run ends
cleanly and, on one GPU in full precision, prints the numbers the original prints (to
1e-3: cuDNN and cuBLAS kernels may differ in the last bits between two runs). Prints a
table and exits 1 when a check fails; on a machine without CUDA it says so and exits 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.equivalence.test_project_fixture_runs import RUNS, _entry, _numbers  # noqa: E402  (needs REPO on sys.path)

TOLERANCE = 1e-3


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gpu_projects: no CUDA GPU on this machine; nothing to check.")
        return 0
    gpus = torch.cuda.device_count()
    print(f"gpu_projects: {gpus} GPU(s) ({torch.cuda.get_device_name(0)}), torch {torch.__version__}", flush=True)
    rows = []
    for name, entry in sorted(RUNS.items()):
        for row in check(name, entry, gpus):
            print(f"  {row[0]}: {'ok' if row[1] else 'FAIL'} ({row[2]})", flush=True)
            rows.append(row)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'check':<{width}}  result  detail")
    for check_name, ok, detail in rows:
        print(f"{check_name:<{width}}  {'ok' if ok else 'FAIL':<6}  {detail}")
    failed = [r for r in rows if not r[1]]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} checks passed")
    return 1 if failed else 0


def check(name: str, entry: str, gpus: int) -> list[tuple[str, bool, str]]:
    case = REPO / "fixtures" / name
    with tempfile.TemporaryDirectory() as scratch:
        original = shutil.copytree(case / "input", Path(scratch) / "original")
        migrated = shutil.copytree(case / "expected", Path(scratch) / "migrated")
        before = _run([sys.executable, str(_entry(original, entry))], original)
        rows = [(f"{name}: original", before[0] == 0, before[2] if before[0] else f"{before[3]:.1f} s")]
        for precision in ("no", "fp16"):
            launch = [sys.executable, "-m", "runtime.launch", "--nproc-per-node", str(gpus), "--mixed-precision", precision]
            after = _run([*launch, str(_entry(migrated, entry))], migrated)
            label = f"{name}: migrated, {gpus} GPU(s), {precision}"
            if after[0] != 0 or "Traceback" in after[2]:
                rows.append((label, False, after[2]))
                continue
            detail = f"{after[3]:.1f} s"
            ok = True
            if gpus == 1 and precision == "no" and before[0] == 0:
                want, got = _numbers(before[1]), _numbers(after[1])
                ok = len(want) == len(got) and all(
                    len(w) == len(g) and all(abs(a - b) <= TOLERANCE * max(1.0, abs(a)) for a, b in zip(w, g))
                    for w, g in zip(want, got)
                )
                detail += ", the original's numbers" if ok else f", numbers differ: {want[:3]} vs {got[:3]}"
            rows.append((label, ok, detail))
        return rows


def _run(command: list[str], cwd: Path) -> tuple[int, str, str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after 240 s", time.perf_counter() - start
    # the numbers compared are the ones the program prints (stdout); warnings go to stderr
    tail = re.sub(r"\s+", " ", (done.stdout + done.stderr).strip()[-300:])
    return done.returncode, done.stdout, f"exit {done.returncode}: {tail}", time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
