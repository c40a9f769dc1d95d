"""Benchmark accel-migrate against the floor any LibCST tool has, on a generated corpus.

    .venv/bin/python bench/bench_migrate.py [--repeats 3] [--files 1200] [--profile-files 40]

Every figure comes from the same run, as the median of `--repeats` runs (this machine
is shared and noisy: CPU seconds are printed next to wall seconds for that reason):

  (a) libcst.parse_module(src).code over every file, in-process: the floor
  (b) accel-migrate --check, one job (the CLI in a subprocess when migrator.cli exists,
      migrate_paths in-process otherwise; the output says which), cache cold
  (c) the same with -j 2                                (when the CLI has -j / --jobs)
  (d) (b) again with the cache warm                     (when the CLI has a cache)

then the ratios against their aims, and a cProfile breakdown of (b) against (a) on a
subset of the files that mention torch: where migration time goes beyond parse+codegen.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import libcst  # noqa: E402

from corpus import write_corpus  # noqa: E402

AIM_B_OVER_A = 2.0
AIM_JOBS = 1.7
AIM_CACHE = 20.0
CACHE_DIR_NAME = ".accel-migrate-cache"


@dataclass
class Timing:
    """Median wall and CPU seconds of some repeats (CPU includes child processes)."""

    wall: float
    cpu: float
    walls: list[float]
    note: str = ""

    @property
    def best(self) -> float:
        """The least disturbed run: what the aims are judged on (as timeit does)."""
        return min(self.walls)

    def rate(self, lines: int) -> float:
        return lines / self.wall if self.wall else float("inf")


def _cpu_now() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _measure(fn, repeats: int, before=None) -> Timing:
    walls, cpus, notes = [], [], set()
    for _ in range(repeats):
        if before is not None:
            before()
        c0, w0 = _cpu_now(), time.perf_counter()
        note = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(_cpu_now() - c0)
        if note:
            notes.add(note)
    return Timing(statistics.median(walls), statistics.median(cpus), walls, "; ".join(sorted(notes)))


# --------------------------------------------------------------------------- the CLI


@dataclass
class Cli:
    """How to run accel-migrate here, and which of the later features it has."""

    argv: list[str] | None  # None: no CLI, use migrate_paths in-process
    jobs_flag: str | None
    no_cache: bool = False  # --no-cache
    cache_dir: bool = False  # --cache-dir DIR
    cache_default: bool = False  # --help mentions a cache but neither flag

    @property
    def has_cache(self) -> bool:
        return self.no_cache or self.cache_dir or self.cache_default

    @property
    def how(self) -> str:
        if self.argv is None:
            return "migrate_paths in-process (migrator.cli not found)"
        return "CLI in a subprocess: python -m migrator --check --isolated"

    @property
    def features(self) -> str:
        cache = [f for f, on in (("--no-cache", self.no_cache), ("--cache-dir", self.cache_dir)) if on]
        cache_text = " ".join(cache) if cache else "mentioned" if self.cache_default else "not in --help"
        return f"-j: {self.jobs_flag or 'not in --help'}; cache: {cache_text}"


def detect_cli() -> Cli:
    if importlib.util.find_spec("migrator.cli") is None:
        return Cli(None, None)
    argv = [sys.executable, "-m", "migrator"]
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, env=_env())
    text = out.stdout + out.stderr
    if out.returncode != 0:
        return Cli(None, None)
    jobs = "-j" if re.search(r"(^|[\s,])-j\b", text) else "--jobs" if "--jobs" in text else None
    no_cache, cache_dir = "--no-cache" in text, "--cache-dir" in text
    mentioned = bool(re.search(r"\bcache\b", text, re.IGNORECASE)) and not (no_cache or cache_dir)
    return Cli(argv, jobs, no_cache, cache_dir, mentioned)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class CliRunner:
    """Runs `--check` over the corpus with the cache off (cold) or warm.

    Cold runs use --no-cache when there is one (the migration alone), else a fresh
    --cache-dir, else remove the default cache directory first. `-j N` is always passed
    when the CLI has it, because its default is every CPU.
    """

    def __init__(self, cli: Cli, corpus: Path, scratch: Path) -> None:
        self.cli, self.corpus, self.scratch = cli, corpus, scratch
        self.warm_dir = scratch / "warm-cache"
        self.runs = 0

    def _cache_args(self, warm: bool) -> list[str]:
        if warm:
            return ["--cache-dir", str(self.warm_dir)] if self.cli.cache_dir else []
        if self.cli.no_cache:
            return ["--no-cache"]
        if self.cli.cache_dir:
            self.runs += 1
            return ["--cache-dir", str(self.scratch / f"cold-cache-{self.runs}")]
        return []

    def clear_default_caches(self) -> None:
        for base in (self.corpus, self.scratch):
            shutil.rmtree(base / CACHE_DIR_NAME, ignore_errors=True)

    def run(self, jobs: int = 1, warm: bool = False) -> str:
        argv = list(self.cli.argv) + ["--check", "--isolated"] + self._cache_args(warm)
        if self.cli.jobs_flag:
            argv += [self.cli.jobs_flag, str(jobs)]
        argv.append(str(self.corpus))
        out = subprocess.run(argv, capture_output=True, text=True, cwd=self.scratch, env=_env())
        if out.returncode not in (0, 1):
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["?"]
            return f"exit {out.returncode}: {tail[0][:160]}"
        return ""


def in_process_check(corpus: Path) -> str:
    from migrator.api import migrate_paths
    from migrator.config import Config

    failed = sum(1 for r in migrate_paths([str(corpus)], Config()) if r.status.value == "failed")
    return f"{failed} files failed" if failed else ""


# --------------------------------------------------------------------------- profile


BUCKETS = [
    # label, file suffix, function name; cumulative times, so nested rows overlap
    ("migrate_source (total)", "migrator/api.py", "migrate_source"),
    ("  parse_module", "libcst/_parser/entrypoints.py", "parse_module"),
    ("  engine passes (_run_rules)", "migrator/engine.py", "_run_rules"),
    ("    analyze()", "migrator/analysis/__init__.py", "analyze"),
    ("      collect()", "migrator/analysis/collect.py", "collect"),
    ("      LibCST metadata (_resolve_impl)", "libcst/metadata/wrapper.py", "_resolve_impl"),
    ("        PositionProvider (a codegen with positions)", "libcst/metadata/position_provider.py", "_gen_impl"),
    ("        batched providers (visit_batched)", "libcst/_batched_visitor.py", "visit_batched"),
    ("    rules (_dispatch)", "migrator/engine.py", "_dispatch"),
    ("    suppression check", "migrator/suppress.py", "is_suppressed"),
    ("  apply_edits", "migrator/edits.py", "apply_edits"),
    ("  apply_imports (LibCST codemods)", "migrator/imports.py", "apply_imports"),
    ("    AddImportsVisitor/RemoveImportsVisitor", "libcst/codemod/_codemod.py", "transform_module"),
    ("    ScopeProvider (import visitors' metadata)", "libcst/metadata/scope_provider.py", "infer_accesses"),
    ("  deep_clone (MetadataWrapper copies)", "libcst/_nodes/base.py", "deep_clone"),
    ("  _LineMap.advance (difflib)", "migrator/engine.py", "advance"),
    ("  Module.code (codegen, all calls)", "libcst/_nodes/module.py", "code"),
    ("  verify (compile)", "migrator/engine.py", "verify"),
]


COMPONENTS = [
    # label, path fragments (first match wins); own time, so the rows add up to the total
    ("libcst parser (native)", ["libcst/_parser/", "libcst_native", "libcst.native"]),
    ("libcst metadata providers", ["libcst/metadata/"]),
    ("libcst codemod + matchers (import passes)", ["libcst/codemod/", "libcst/matchers/", "libcst/helpers/"]),
    ("libcst tree walking, codegen, node building", ["libcst/"]),
    ("migrator analysis", ["migrator/analysis/"]),
    ("migrator engine, edits, imports, api", ["migrator/"]),
    ("rules", ["rules/"]),
    ("difflib", ["difflib.py"]),
    ("copy / dataclasses (node construction)", ["copy.py", "dataclasses.py", "<string>"]),
    ("builtins (isinstance, getattr, compile, ...)", ["~"]),
    ("other stdlib", [""]),
]


def _component_rows(stats: pstats.Stats) -> list[tuple[str, float]]:
    totals = {label: 0.0 for label, _ in COMPONENTS}
    for (filename, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        path = filename.replace(os.sep, "/")
        for label, fragments in COMPONENTS:
            if any(f in path for f in fragments):
                totals[label] += tt
                break
    return sorted(totals.items(), key=lambda kv: -kv[1])


def _bucket_rows(stats: pstats.Stats) -> list[tuple[str, float, int]]:
    rows = []
    for label, suffix, func in BUCKETS:
        cum, calls = 0.0, 0
        for (filename, _line, name), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            if name == func and filename.replace(os.sep, "/").endswith(suffix):
                cum += ct
                calls += nc
        rows.append((label, cum, calls))
    return rows


def profile(sources: list[tuple[str, str]], top: int) -> None:
    """cProfile parse+codegen and migrate_source on the same files; print the buckets,
    passes per file and the top functions by own time."""
    from migrator import engine
    from migrator.api import migrate_source
    from migrator.config import Config

    config = Config()
    for path, src in sources[:2]:  # warm imports and caches outside the profile
        migrate_source(src, path, config)

    floor = cProfile.Profile()
    floor.enable()
    for _path, src in sources:
        libcst.parse_module(src).code
    floor.disable()
    floor_total = pstats.Stats(floor).total_tt  # type: ignore[attr-defined]

    passes: list[int] = []
    original = getattr(engine, "_run_rules", None)
    counter = [0]
    if original is not None:
        def counting(*args, **kwargs):
            counter[0] += 1
            return original(*args, **kwargs)

        engine._run_rules = counting
    prof = cProfile.Profile()
    changed = failed = 0
    try:
        for path, src in sources:
            counter[0] = 0
            prof.enable()
            result = migrate_source(src, path, config)
            prof.disable()
            passes.append(counter[0])
            changed += result.status.value == "changed"
            failed += result.status.value == "failed"
    finally:
        if original is not None:
            engine._run_rules = original
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    n = len(sources)
    print(f"\nprofile: {n} files that mention torch ({changed} changed, {failed} failed), under cProfile")
    print("  (cProfile slows Python code far more than LibCST's native parser: read shares, not the ratio)")
    print(f"  parse+codegen alone: {floor_total:7.2f} s   migrate_source: {total:7.2f} s   "
          f"ratio {total / floor_total:5.1f}x")
    if passes:
        hist = {k: passes.count(k) for k in sorted(set(passes))}
        print(f"  rule passes (_run_rules calls) per file: mean {statistics.mean(passes):.2f}, histogram {hist}")
    head = "where (cumulative; nested rows are included in their parent)"
    print(f"  {head:58} {'s':>7} {'% total':>8} {'calls/file':>10}")
    for label, cum, calls in _bucket_rows(stats):
        if calls:
            print(f"  {label:58} {cum:7.2f} {100 * cum / total:7.1f}% {calls / n:10.1f}")
    print("\n  own time by component (adds up to the total):")
    for label, own in _component_rows(stats):
        print(f"  {label:58} {own:7.2f} {100 * own / total:7.1f}%")
    print(f"\n  top {top} functions by own time:")
    ranked = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]  # type: ignore[attr-defined]
    for (filename, line, name), (_cc, nc, tt, ct, _callers) in ranked:
        short = "/".join(Path(filename).parts[-2:])
        print(f"    {tt:6.2f} s own {ct:7.2f} s cum {nc:9d} calls  {short}:{line}({name})")


# --------------------------------------------------------------------------- main


def _fmt(label: str, t: Timing | None, lines: int) -> str:
    if t is None:
        return f"  {label:32} n/a (not implemented)"
    runs = "/".join(f"{w:.1f}" for w in t.walls)
    note = f"  [{t.note}]" if t.note else ""
    return (
        f"  {label:32} median {t.wall:7.2f} s  best {t.best:7.2f} s  cpu {t.cpu:7.2f} s  "
        f"{t.rate(lines):7.0f} lines/s (median), {lines / t.best:7.0f} (best)  runs {runs}{note}"
    )


def _ratio(label: str, num: Timing | None, den: Timing | None, aim: str, ok) -> str:
    if num is None or den is None:
        return f"  {label:24} n/a (not implemented)   aim {aim}"
    best, median = num.best / den.best, num.wall / den.wall
    cpu = num.cpu / den.cpu if den.cpu else float("inf")
    verdict = "met" if ok(best) else "MISSED"
    return f"  {label:24} best {best:6.2f}  median {median:6.2f}  cpu {cpu:6.2f}   aim {aim}: {verdict} (on best)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--files", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile-files", type=int, default=40, help="0 skips the profile")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--keep", action="store_true", help="keep the corpus directory")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="accel-migrate-bench-"))
    corpus = scratch / "corpus"
    try:
        stats = write_corpus(corpus, args.files, args.seed)
        sources = [(str(p), p.read_text(encoding="utf-8")) for p in sorted(corpus.rglob("*.py"))]
        lines = stats.lines
        cli = detect_cli()
        print(f"corpus: {stats}  ({corpus if args.keep else 'temporary'})")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; "
              f"median of {args.repeats} runs each")
        print(f"(b) runs as: {cli.how}")
        print(cli.features + "\n")

        def floor() -> str:
            for _path, src in sources:
                libcst.parse_module(src).code
            return ""

        a = _measure(floor, args.repeats)
        print(_fmt("(a) libcst parse + codegen", a, lines), flush=True)

        runner = CliRunner(cli, corpus, scratch) if cli.argv else None
        if runner is None:
            b = _measure(lambda: in_process_check(corpus), args.repeats)
        else:
            b = _measure(runner.run, args.repeats, before=runner.clear_default_caches)
        print(_fmt("(b) --check, 1 job, cold", b, lines), flush=True)

        c = d = None
        if runner is not None and cli.jobs_flag:
            c = _measure(lambda: runner.run(jobs=2), args.repeats, before=runner.clear_default_caches)
        print(_fmt("(c) --check -j 2, cold", c, lines), flush=True)
        if runner is not None and cli.has_cache:
            runner.clear_default_caches()
            runner.run(warm=True)  # fill the cache
            d = _measure(lambda: runner.run(warm=True), args.repeats)
        print(_fmt("(d) --check, 1 job, cache warm", d, lines), flush=True)

        print("\nratios (best-of-N wall, median wall, cpu seconds; the aims are judged on best-of-N):")
        print(_ratio("(b)/(a) migrate/floor", b, a, f"<= {AIM_B_OVER_A}", lambda r: r <= AIM_B_OVER_A))
        print(_ratio("(b)/(c) -j 2 speed-up", b, c, f">= {AIM_JOBS}", lambda r: r >= AIM_JOBS))
        print(_ratio("(b)/(d) cache speed-up", b, d, f">= {AIM_CACHE}", lambda r: r >= AIM_CACHE))

        if args.profile_files:
            relevant = [s for s in sources if "torch" in s[1]]
            step = max(1, len(relevant) // args.profile_files)
            profile(relevant[::step][: args.profile_files], args.top)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
