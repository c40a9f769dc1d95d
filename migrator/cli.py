"""The `accel-migrate` command: parse options → Overrides → api → render/ → exit status.

No migration logic lives here. Heavy modules (LibCST, the rules, rich) are imported
only by the branch that needs them, so `--help` and `--version` start fast enough for
a pre-commit hook.
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from migrator.config import Overrides, Target
from migrator.render.report import Mode, RunReport

if TYPE_CHECKING:
    from migrator.render.text import Terminal

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it

EXAMPLES = """\
Examples:

\b
  accel-migrate train.py                 list what to migrate ([*] = fixable)
  accel-migrate train.py --diff          show the migration as a unified diff
  accel-migrate train.py --write         migrate in place
  accel-migrate train.py -o train_ddp.py write the migrated script elsewhere
  accel-migrate src/ --check             CI: exit 1 if anything would change
  accel-migrate src/ --lint --output-format github
  accel-migrate --explain AM104          what a rule does and why

\b
Exit status: 0 nothing to do; 1 changes or findings (after --write: findings
left for a human); 2 an error (a file could not be read, parsed or written,
bad options or configuration).
"""


class OutputFormat(str, enum.Enum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"
    SARIF = "sarif"


class UsageError(Exception):
    """Bad options: reported as `accel-migrate: error: ...`, exit status 2."""


app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_MODE = "Mode (one at most; default: list findings)"
_RULES = "Rule selection (codes, prefixes or names, comma-separated)"
_OUT = "Output"
_DOCS = "Rule documentation"
_SPEED = "Speed"


def _version(value: bool) -> None:
    if value:
        from migrator import __version__

        typer.echo(f"accel-migrate {__version__}")
        raise typer.Exit(EXIT_CLEAN)


@app.command(epilog=EXAMPLES, help="Migrate single-GPU PyTorch training scripts onto the Accelerator API.")
def accel_migrate(
    paths: Annotated[Optional[list[str]], typer.Argument(metavar="PATH", show_default=False, help="Python files or directories (walked for *.py).")] = None,
    diff: Annotated[bool, typer.Option("--diff", help="Print the migration as a unified diff, then what is left for a human.", rich_help_panel=_MODE)] = False,
    write: Annotated[bool, typer.Option("--write", help="Migrate the files in place.", rich_help_panel=_MODE)] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if any file would change.", rich_help_panel=_MODE)] = False,
    lint: Annotated[bool, typer.Option("--lint", help="Findings only, no migration; exit 1 on findings (pre-commit).", rich_help_panel=_MODE)] = False,
    output: Annotated[Optional[str], typer.Option("-o", "--output", metavar="FILE", help="Write the migrated script to FILE (one input file only).", rich_help_panel=_MODE)] = None,
    select: Annotated[Optional[str], typer.Option(metavar="CODES", help="Only these rules (replaces the project's select and ignore).", rich_help_panel=_RULES)] = None,
    ignore: Annotated[Optional[str], typer.Option(metavar="CODES", help="Skip these rules (added to the project's ignore).", rich_help_panel=_RULES)] = None,
    exclude: Annotated[Optional[str], typer.Option(metavar="GLOBS", help="Skip files matching these globs (added to the project's exclude).", rich_help_panel=_RULES)] = None,
    target: Annotated[Optional[Target], typer.Option(case_sensitive=False, help="Import Accelerator from the bundled runtime or from Hugging Face accelerate.", rich_help_panel=_RULES)] = None,
    unsafe_fixes: Annotated[Optional[bool], typer.Option("--unsafe-fixes/--no-unsafe-fixes", show_default=False, help="Also apply fixes marked unsafe.", rich_help_panel=_RULES)] = None,
    isolated: Annotated[bool, typer.Option("--isolated", help="Ignore [tool.accel-migrate] in pyproject.toml files.", rich_help_panel=_RULES)] = False,
    output_format: Annotated[OutputFormat, typer.Option(case_sensitive=False, help="How to print findings.", rich_help_panel=_OUT)] = OutputFormat.TEXT,
    statistics: Annotated[bool, typer.Option("--statistics", help="Count findings per rule instead of listing them.", rich_help_panel=_OUT)] = False,
    report: Annotated[Optional[str], typer.Option("--report", metavar="FILE", help="Also write a Markdown migration report to FILE: every change, every item left for a human, totals.", rich_help_panel=_OUT)] = None,
    jobs: Annotated[Optional[int], typer.Option("-j", "--jobs", min=1, metavar="N", show_default=False, help="Migrate N files at a time in worker processes (default: the number of CPUs).", rich_help_panel=_SPEED)] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache of results.", rich_help_panel=_SPEED)] = False,
    cache_dir: Annotated[Optional[str], typer.Option("--cache-dir", metavar="DIR", help="Where to keep the cache (default: .accel-migrate-cache in the project root).", rich_help_panel=_SPEED)] = None,
    list_rules: Annotated[bool, typer.Option("--list-rules", help="Print a table of every rule and exit.", rich_help_panel=_DOCS)] = False,
    explain: Annotated[Optional[str], typer.Option(metavar="CODE", help="Print one rule's documentation (code or name) and exit.", rich_help_panel=_DOCS)] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    try:
        if list_rules or explain:
            raise typer.Exit(_docs(explain))
        mode = _mode(diff=diff, write=write, check=check, lint=lint, output=output)
        overrides = Overrides(
            select=_codes(select) if select is not None else None,
            ignore=_codes(ignore), exclude=_list(exclude), target=target,
            unsafe_fixes=unsafe_fixes, fix=mode.fixing,
        )
        run = Run(mode, overrides, isolated=isolated, output=output, fmt=output_format, statistics=statistics,
                  report_path=report, jobs=jobs, cache=not no_cache, cache_dir=cache_dir)
        status = _run(paths or [], run)
    except UsageError as exc:
        typer.echo(f"accel-migrate: error: {exc}", err=True)
        status = EXIT_ERROR
    except KeyboardInterrupt:
        typer.echo("accel-migrate: interrupted (files written so far are complete; the others are untouched)", err=True)
        status = EXIT_INTERRUPTED
    raise typer.Exit(status)


def _mode(*, diff: bool, write: bool, check: bool, lint: bool, output: str | None) -> Mode:
    chosen = [m for m, on in ((Mode.DIFF, diff), (Mode.WRITE, write), (Mode.CHECK, check), (Mode.LINT, lint)) if on]
    if len(chosen) > 1:
        raise UsageError(" and ".join(f"--{m.value}" for m in chosen) + " cannot be combined")
    mode = chosen[0] if chosen else Mode.PREVIEW
    if output and mode in (Mode.CHECK, Mode.LINT):
        raise UsageError(f"--output writes a file; --{mode.value} writes nothing")
    return Mode.WRITE if output and mode is Mode.PREVIEW else mode


def _list(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _codes(value: str | None) -> tuple[str, ...]:
    """Comma-separated selectors, each checked against the registry (a typo is an error)."""
    from migrator import api

    selectors = _list(value)
    unknown = api.unknown_selectors(s for s in selectors if s.upper() != "ALL")
    if unknown:
        raise UsageError(f"{unknown[0]!r} matches no rule (see accel-migrate --list-rules)")
    return selectors


@dataclass(frozen=True)
class Run:
    """The options of one run, past parsing."""

    mode: Mode
    overrides: Overrides
    isolated: bool = False
    output: str | None = None
    fmt: OutputFormat = OutputFormat.TEXT
    statistics: bool = False
    report_path: str | None = None
    jobs: int | None = None
    cache: bool = True
    cache_dir: str | None = None


def _run(paths: list[str], run: Run) -> int:
    if not paths:
        raise UsageError("no PATH given (try accel-migrate --help)")
    if run.output and (len(paths) != 1 or os.path.isdir(paths[0])):
        raise UsageError("--output takes exactly one input file")
    if run.report_path is not None:
        _check_report_path(run.report_path)  # before any file is written
    from migrator import api, cache, parallel
    from migrator.render.progress import ProgressBar, wanted

    bar = ProgressBar(sys.stderr, enabled=run.fmt is OutputFormat.TEXT and wanted(sys.stderr))
    results = api.migrate_paths(
        paths, overrides=run.overrides, isolated=run.isolated,
        write=run.mode is Mode.WRITE and not run.output, output=run.output,
        jobs=run.jobs or parallel.cpu_count(),
        cache_dir=(run.cache_dir or cache.default_directory()) if run.cache else None,
        on_total=bar.start,
    )
    report = RunReport(run.mode, list(bar.track(results)), unsafe_fixes=bool(run.overrides.unsafe_fixes), output=run.output)
    _render(report, run.fmt, run.statistics)
    if run.report_path is not None:
        _write_report(report, run.report_path)
    return exit_status(report)


def _check_report_path(path: str) -> None:
    from migrator import files

    try:
        files.check_writable(path)
    except files.InputError as exc:
        raise UsageError(_report_error(path, exc)) from None


def _write_report(report: RunReport, path: str) -> None:
    """`--report FILE`: the Markdown migration report (render/markdown.py), written
    atomically (a reader never sees half a report; an old one is replaced whole)."""
    from migrator import files
    from migrator.render.markdown import render_report

    try:
        files.write_new(path, render_report(report.processed).encode("utf-8"))
    except files.InputError as exc:
        raise UsageError(_report_error(path, exc)) from None


def _report_error(path: str, exc: Exception) -> str:
    reason = getattr(exc, "reason", str(exc)).removeprefix("cannot write: ")
    return f"cannot write the report to {path}: {reason}"


def exit_status(report: RunReport) -> int:
    """2 when any file failed; else 1 when something changes (or would) or findings are
    left for a human; 0 otherwise. After --write, changes are done: only findings count."""
    if report.failed:
        return EXIT_ERROR
    if report.all_shown():
        return EXIT_FINDINGS
    if report.mode in (Mode.DIFF, Mode.CHECK) and report.changed:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _render(report: RunReport, fmt: OutputFormat, statistics: bool) -> None:
    out, err = _terminals()
    if fmt is OutputFormat.TEXT:
        from migrator.render import text

        text.render(report, out, err, statistics=statistics)
    elif fmt is OutputFormat.JSON:
        from migrator.render import json

        out.stream.write(json.render(report, statistics=statistics))
    elif fmt is OutputFormat.GITHUB:
        from migrator.render import github

        out.stream.write(github.render(report))
    else:
        from migrator import __version__, registry
        from migrator.render import sarif

        out.stream.write(sarif.render(report, registry.all_rules(), __version__))


def _docs(explain: str | None) -> int:
    from migrator import docs, registry
    from migrator.render import text

    out, _ = _terminals()
    if explain is None:
        text.render_rule_table(registry.all_rules(), out)
        return EXIT_CLEAN
    rule = registry.find(explain.strip())
    if rule is None:
        raise UsageError(f"no rule {explain!r} (see accel-migrate --list-rules)")
    text.render_markdown(docs.explanation(rule), out)
    return EXIT_CLEAN


def _terminals() -> tuple[Terminal, Terminal]:
    from migrator.render.text import Terminal

    return Terminal(sys.stdout), Terminal(sys.stderr)


def main() -> None:
    """Console entry point (`accel-migrate`, `python -m migrator`)."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        app(prog_name="accel-migrate")
    except BrokenPipeError:  # `accel-migrate ... | head`: the reader left, stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_FINDINGS)
    except Exception:  # a bug in accel-migrate itself, not in the user's input
        import traceback

        traceback.print_exc()
        print("accel-migrate: internal error; please report this bug with the traceback above", file=sys.stderr)
        sys.exit(EXIT_ERROR)
