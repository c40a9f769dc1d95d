"""The pass loop: analyse, run all rules in one batched traversal, resolve overlapping
fixes, apply, repeat to a fixpoint, verify the result compiles.

Everything here is about one module already parsed; reading and writing files is
files.py's job and turning results into output is render/'s.
"""

from __future__ import annotations

import ast
import difflib
import functools
import warnings
from dataclasses import dataclass, field, replace
from typing import Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.walk import walk
from migrator.config import Config
from migrator.edits import EditPlan, apply_edits
from migrator.findings import Finding, Position, is_refusal
from migrator.imports import apply_imports
from migrator.rule import Report, Rule, RuleContext
from migrator.suppress import UNUSED_SUPPRESSION, is_suppressed, unused_suppressions

MAX_PASSES = 6


class VerificationError(Exception):
    """The rewritten code does not compile: a bug in a rule, never the user's fault."""


@dataclass(frozen=True)
class EngineOutcome:
    """The migrated module, its findings, and the original lines that edits touched."""

    module: cst.Module
    findings: tuple[Finding, ...]
    touched_lines: frozenset[int] = field(default_factory=frozenset)
    code: str = ""  # module.code, generated once


class _LineMap:
    """Maps line numbers of the current pass's text back to the original file's, so
    fixed findings point at the lines the user wrote."""

    def __init__(self, code: str) -> None:
        self._lines = code.splitlines()
        self._to_original: list[int] = list(range(1, len(self._lines) + 1))

    def original(self, line: int) -> int:
        if not self._to_original:
            return 1
        return self._to_original[min(max(line, 1), len(self._to_original)) - 1]

    def advance(self, code: str) -> None:
        new = code.splitlines()
        mapping: list[int] = []
        matcher = difflib.SequenceMatcher(a=self._lines, b=new)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for k in range(j2 - j1):
                if tag == "equal" or (tag == "replace" and i1 + k < i2):
                    mapping.append(self._to_original[i1 + k])
                else:
                    mapping.append(self._to_original[i1 - 1] if i1 > 0 else 1)
        self._lines, self._to_original = new, mapping


def _finding(path: str, analysis: ScriptAnalysis, report: Report, fixed: bool) -> Finding:
    rng = analysis.position(report.node)
    return Finding(
        path=path,
        start=Position(rng.start.line, rng.start.column + 1),
        end=Position(rng.end.line, rng.end.column + 1),
        code=report.code,
        name=report.name,
        message=report.message,
        fixable=report.fixable,
        fixed=fixed,
        unsafe_fix=bool(report.fix and report.fix.unsafe),
    )


def _handed_training(config: Config) -> frozenset[str]:
    """Calls of other files' functions handed an optimizer and a loader (by their use
    there): they train, threaded or not."""
    return frozenset(
        spelling for spelling, keys in config.project_roles if {"optimizer", "dataloader"} <= {role for _, role in keys}
    )


def _run_rules(
    module: cst.Module, rules: Sequence[type[Rule]], config: Config, path: str,
    unused: list[Finding] | None = None, text: str | None = None,
) -> tuple[ScriptAnalysis, list[Report]]:
    """Analyse, run the rules, drop suppressed reports. `unused` (when given) is refilled
    with the AM902 findings of suppressions that silenced nothing in this pass. `text` is
    `module.code` when the caller has it (saves a codegen of the whole module)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = analyze(
        wrapper, batch_stepped=frozenset(config.project_stepped), loader_calls=dict(config.project_loaders),
        unused_models=dict(config.project_unused), unthreaded_calls=_unthreaded_evaluations(config),
        argument_roles={spelling: dict(keys) for spelling, keys in config.project_roles},
        distribution_helpers={spelling: rest for spelling, *rest in config.project_distribution},
        meter_calls=frozenset(config.project_meters), called_elsewhere=frozenset(config.project_called),
        iterators=frozenset(config.project_iterators),
        training_calls=frozenset(config.project_calls) | frozenset(config.project_refused) | _handed_training(config),
        sharded_calls=frozenset(config.project_sharded_loaders), main_flags=frozenset(config.project_main_flags),
    )
    ctx = RuleContext(config, path)
    _dispatch(analysis, [rule(analysis, ctx) for rule in rules])
    check_unused = unused is not None and any(r.code == UNUSED_SUPPRESSION for r in rules)
    code = text if text is not None else module.code if ctx.reports or check_unused else ""
    lines = code.splitlines()
    kept, suppressed = [], []
    for r in ctx.reports:
        line = analysis.position(r.node).start.line
        if is_suppressed(lines, line, r.code, r.name):
            suppressed.append((line, r.code, r.name))
        else:
            kept.append(r)
    if unused is not None:
        unused[:] = _unused_suppressions(path, code, suppressed, rules) if check_unused else []
    kept.sort(key=lambda r: (r.code, _start(analysis, r.node)))
    return analysis, kept


@functools.lru_cache(maxsize=None)
def _unthreaded_evaluations(config: Config) -> frozenset[str]:
    """Calls of the run's functions and classes that evaluate with no Accelerator: those a
    run of several files left unthreaded, and its evaluations it threads nowhere (a run that
    threads nothing decides nothing). A loader only they read is left whole."""
    decided = frozenset(s for s, trains in config.project_unthreaded if not trains)
    threaded = set(config.project_calls) | set(config.project_plain)
    return decided | frozenset(s for s in config.project_evaluations if s not in threaded)


def _handlers(rule: type[Rule]) -> tuple[tuple[str, str], ...]:
    """(node type, method name) for every visit_/leave_ method a rule class defines.

    Computed once per class: LibCST's own visit_batched re-inspects every visitor on
    every call, which cost more than parsing on typical files.
    """
    found = []
    for name in dir(rule):
        kind, _, node_type = name.partition("_")
        if kind in ("visit", "leave") and node_type and node_type[0].isupper():
            if getattr(rule, name) is not getattr(cst.BatchableCSTVisitor, name, None):
                found.append((kind, node_type, name))
    return tuple((f"{kind}_{node_type}", name) for kind, node_type, name in found)


class _Dispatcher(cst.CSTVisitor):
    """One traversal calling every rule's visit_<Type>/leave_<Type> for each node."""

    def __init__(self, table: dict[str, list]) -> None:
        super().__init__()
        self._table = table
        self._by_type: dict[tuple[str, type], list] = {}

    def _methods(self, kind: str, node: cst.CSTNode) -> list:
        key = (kind, type(node))
        methods = self._by_type.get(key)
        if methods is None:
            methods = self._by_type[key] = self._table.get(f"{kind}_{type(node).__name__}", [])
        return methods

    def on_visit(self, node: cst.CSTNode) -> bool:
        for method in self._methods("visit", node):
            method(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        for method in self._methods("leave", original_node):
            method(original_node)


def _dispatch(analysis: ScriptAnalysis, visitors: Sequence[Rule]) -> None:
    """Run all rules. A rule whose handlers are all `visit_<OneType>` is stateless per
    node, so it is fed that type's nodes from the analysis index (document order); only
    rules with leave_ handlers or several node types need a real traversal."""
    walked: dict[str, list] = {}
    for visitor in visitors:
        handlers = _handlers(type(visitor))
        kinds = {key for key, _ in handlers}
        if len(kinds) == 1 and next(iter(kinds)).startswith("visit_"):
            for key, name in handlers:
                method = getattr(visitor, name)
                for node in analysis.nodes(key[len("visit_"):]):
                    method(node)
            continue
        for key, name in handlers:
            walked.setdefault(key, []).append(getattr(visitor, name))
    if walked:
        walk(analysis.module, _Dispatcher(walked))


def _unused_suppressions(
    path: str, code: str, suppressed: list[tuple[int, str, str]], rules: Sequence[type[Rule]]
) -> list[Finding]:
    """AM902: it needs the findings before suppression, so the engine reports it for the
    rule (rules/am902_unused_suppression.py declares it and holds its message)."""
    rule = next((r for r in rules if r.code == UNUSED_SUPPRESSION), None)
    if rule is None:
        return []
    out = []
    for s, codes in unused_suppressions(code, suppressed, [(r.code, r.name) for r in rules]):
        comment = f"ignore[{', '.join(codes)}]" if codes else "ignore"
        at = Position(s.line, s.col)
        out.append(Finding(path, at, at, rule.code, rule.name, rule.message.format(comment=comment)))
    return out


def _fix_allowed(report: Report, config: Config) -> bool:
    return report.fix is not None and (not report.fix.unsafe or config.unsafe_fixes)


def migrate_module(
    module: cst.Module, path: str, config: Config, rules: Sequence[type[Rule]], source: str | None = None
) -> EngineOutcome:
    """Run `rules` over `module` to a fixpoint (or once, findings only, when not fixing).

    Fixed findings carry the position where they were found; the remaining ones carry
    their position in the returned module.
    """
    fixed: list[Finding] = []
    touched: set[int] = set()
    unused: list[Finding] = []  # AM902, for the module returned
    code = source if source is not None else module.code  # each pass's text, generated once
    lines = _LineMap(code) if config.fix else None
    for _ in range(MAX_PASSES):
        analysis, reports = _run_rules(module, rules, config, path, unused, code)
        if lines is None:
            findings = tuple(_finding(path, analysis, r, False) for r in reports) + tuple(unused)
            return EngineOutcome(module, findings, code=code)
        plan = EditPlan(span_of=analysis.position)
        accepted = [r for r in reports if _fix_allowed(r, config) and plan.try_accept(r.fix)]
        if not accepted:
            remaining = [_finding(path, analysis, r, False) for r in reports]
            return EngineOutcome(module, tuple(fixed + remaining + unused), frozenset(touched), code)
        for report in accepted:
            fixed.append(_at_original(_finding(path, analysis, report, True), lines))
        for fix in plan.accepted:
            for edit in fix.edits:
                if edit.replaces:
                    rng = analysis.position(edit.node)
                    touched.update(lines.original(n) for n in range(rng.start.line, rng.end.line + 1))
        module = apply_imports(apply_edits(module, plan.accepted, analysis.parents), plan.accepted)
        code = module.code
        lines.advance(code)
    analysis, reports = _run_rules(module, rules, config, path, unused, code)
    remaining = [_finding(path, analysis, r, False) for r in reports]
    return EngineOutcome(module, tuple(fixed + remaining + unused), frozenset(touched), code)


def _at_original(finding: Finding, lines: _LineMap) -> Finding:
    start = Position(lines.original(finding.start.line), finding.start.col)
    end = Position(max(start.line, lines.original(finding.end.line)), finding.end.col)
    return replace(finding, start=start, end=end)


def verify(code: str, path: str) -> None:
    """Raise VerificationError when `code` does not compile. Python's remarks on the
    user's own code (`name is 'adjust_hue'`: a SyntaxWarning) are neither printed in our
    report nor, under `-W error`, taken for a failure of the migration."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(code, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise VerificationError(f"migrated code does not compile: {exc}") from exc


def migrate_verified(
    module: cst.Module, path: str, config: Config, rules: Sequence[type[Rule]], source: str
) -> EngineOutcome:
    """migrate_module, then hold the result to what a distributed program needs
    (migrator/verify/). A result that fails is not kept: the module comes back as it was,
    with the findings a lint run gives (none of them fixed) and one finding per reason."""
    if config.project_installed:
        return _installed_copy(module, path, config, rules, source)
    if not config.fix:
        return _lint(module, path, config, rules, source)
    outcome = migrate_module(module, path, config, rules, source=source)
    if outcome.code == source:
        return _not_silent(outcome, path, source, config)
    verify(outcome.code, path)
    from migrator.verify import verify as verify_migration  # pyflakes loads only when needed
    from migrator.verify.distribution import OTHER_ENGINE

    # names other files of the run call that the run does not thread (its callers' stub calls those it does)
    called = config.project_called_any or config.project_called
    unthreaded = frozenset(n for n in called if "." not in n and f"{n}(" not in config.project_callers)
    problems = verify_migration(
        source, outcome.code, frozenset(config.project_entered), frozenset(config.project_placing), unthreaded,
        frozenset(config.project_refused), frozenset(config.project_module_readers),
        frozenset(spelling for spelling, kind, *_ in config.project_distribution if kind == "wraps_model"),
        frozenset(config.project_sharded_loaders), frozenset(config.project_sharded_params),
        frozenset(config.project_wrapping_calls),
    )
    unsafe = any(f.code in _UNSAFE_TO_WRITE for f in outcome.findings)
    if not unsafe and not any(p.blocking for p in problems):
        notes = tuple(_refusal(path, p) for p in problems)  # at the original's lines, like fixed findings
        written = replace(outcome, findings=outcome.findings + notes) if notes else outcome
        # edits beside the training only (a type test) written: the training they sit beside is still named
        return _not_silent(written, path, source, config)
    whole = [p for p in problems if p.blocking and p.message.startswith(OTHER_ENGINE)]
    if whole:  # left whole: advice on converting it (prepare this, drop that wrap) would contradict the refusal
        return EngineOutcome(module, tuple(_refusal(path, p) for p in whole), code=source)
    lint = migrate_module(module, path, replace(config, fix=False), rules, source=source)
    kept = tuple(replace(f, fixable=False, unsafe_fix=False) for f in lint.findings) + _attempted_only(outcome, lint)
    refusals = tuple(_refusal(path, p) for p in [*problems, *_unsafe_to_write(lint)] if p.blocking or p.code in _TRUE_UNWRITTEN)
    # edits beside the training only (a type test, a folder) refused: the training they sit beside is still named
    named = _not_silent(replace(lint, findings=kept), path, source, config).findings
    # a move AM953 says to keep is not also one to drop (AM101 at the same place: reader R2, 29th session)
    kept_moves = {(r.start.line, r.start.col) for r in refusals if r.code == "AM953"}
    named = tuple(f for f in named if not (f.code == "AM101" and (f.start.line, f.start.col) in kept_moves))
    return EngineOutcome(module, named + refusals, code=source)


def _attempted_only(attempt: EngineOutcome, lint: EngineOutcome) -> tuple[Finding, ...]:
    """The fixes of a refused attempt that a lint of the original does not name, as
    findings: most follow from what the migration prepares (AM205's
    `accelerator.unwrap_model(q_network).state_dict()` copied into a target network), so
    the original, which prepares nothing, never raises them, and the hand migration the
    refusal asks for needs them as much (reader R2, cleanrl's dqn.py: on 2 processes the
    copy fails on DDP's `module.` keys). Not the Accelerator's own plumbing (AM00x: how
    it reaches a function is the migration's choice, not the original's problem)."""
    # a fixed finding's line is mapped back from the pass that made it: an inserted line
    # above it (the Accelerator) can leave it one off, so a lint finding nearby is the same
    named = {(f.code, f.message, f.start.line + d) for f in lint.findings for d in range(-2, 3)}
    found: dict[tuple[str, int], Finding] = {}
    for finding in attempt.findings:
        if finding.fixed and not finding.code.startswith("AM00") and (finding.code, finding.message, finding.start.line) not in named:
            message = finding.message + _BY_HAND.format(fix=_fix_title(finding.code, finding.message))
            found.setdefault((finding.code, finding.start.line), replace(finding, message=message, fixed=False, fixable=False, unsafe_fix=False))
    return tuple(found.values())


_BY_HAND = " (a change the refused migration made; make it too when you migrate by hand{fix})"


def _fix_title(code: str, message: str) -> str:
    """`: use `accelerator.unwrap_model(self.actor_critic).is_recurrent``: what the change
    is, in the rule's words for that finding."""
    from migrator.registry import all_rules

    rule = next((r for r in all_rules() if r.code == code), None)
    title = rule.fix_title_for(message) if rule is not None else None
    return f": {title[0].lower()}{title[1:]}" if title else ""


# A script distributed by another engine (FSDP, DeepSpeed, Horovod, ...) is left whole:
# AM955 says so, and only that (reader R1, sixteenth session: OLMo's AM201/AM210/AM911 told
# the user to prepare and re-wrap an FSDP model). Hand-made distribution that the
# migration could not take apart keeps its findings: they name the pieces to convert.


# Notes of the verifier about what the original means, true whether or not the migration
# is written: a file left as written keeps them for the hand migration its refusal asks
# for (AM917: a DataParallel batch was split across the GPUs; one process per GPU takes a
# whole one, so `batch_size * len(gpus)` grows N times).
_TRUE_UNWRITTEN = {"AM917"}


def _installed_copy(module: cst.Module, path: str, config: Config, rules: Sequence[type[Rule]], source: str) -> EngineOutcome:
    """A file of a package that installs from a project of its own (st-gcn's
    torchlight/torchlight/, from torchlight/setup.py): the scripts import the installed
    copy, so a change written here does nothing until it is reinstalled. Left as written;
    each finding says where the change goes and what makes it count (reader R2)."""
    folder = config.project_installed
    outcome = migrate_module(module, path, replace(config, fix=False), rules, source=source)
    note = (
        f" (in `{folder}/`, a package installed from its own project: the scripts run the installed copy, so "
        f"change it here and reinstall it, e.g. `pip install -e {folder}`)"
    )
    findings = tuple(replace(f, message=f.message + note, fixable=False, unsafe_fix=False) for f in outcome.findings)
    return replace(outcome, findings=findings, code=source)


def _lint(module: cst.Module, path: str, config: Config, rules: Sequence[type[Rule]], source: str) -> EngineOutcome:
    """The findings of a lint (`--lint`, the pre-commit hook), which promise a fix only
    where `--write` would make it: when some finding is fixable, the migration is made and
    verified too, and a migration that would be refused gives its findings as `--diff`
    does (none fixable, with the reasons it is left as written)."""
    outcome = migrate_module(module, path, config, rules, source=source)
    if not any(f.fixable for f in outcome.findings):
        return _not_silent(outcome, path, source, config)
    written = migrate_verified(module, path, replace(config, fix=True), rules, source)
    refused = written.code == source and any(is_refusal(f.code) for f in written.findings)
    return replace(written, code=outcome.code) if refused else outcome


# Findings of the rules that make any migration of the file wrong: it is not written.
_UNSAFE_TO_WRITE = {"AM915", "AM224", "AM227", "AM230", "AM231"}


def _unsafe_to_write(lint: EngineOutcome) -> list:
    """A migration whose backward would run a number of times each process decides (AM915)
    hangs on N processes; one whose step computes its loss with the module's own forward
    (AM224) trains unsynchronised copies; one that splits its data at random per process
    (AM227) validates on another process's training data; one that freezes layers while it
    trains (AM230), or whose loss leaves a part without gradient on some batches (AM231),
    stops or drifts under DDP. None is written: one reason per finding."""
    from migrator.verify.pair import Problem

    reasons = {
        "AM915": (
            "AM956",
            "left as written: the backward pass would run a number of times each process decides for "
            "itself, so on N processes the gradient all-reduce would hang (AM915 shows where); make "
            "the step count the same on every process, then migrate",
        ),
        "AM224": (
            "AM951",
            "left as written: the training step computes its loss inside the module (its own forward, layers or methods), which "
            "the prepared (DDP) wrapper never sees, so N processes would train N unsynchronised copies "
            "(AM224 shows the call); call the prepared module from outside, then migrate",
        ),
        "AM227": (
            "AM958",
            "left as written: each process would draw its own train/validation split, so one process's "
            "validation samples would be another's training samples (AM227 shows the split); seed the split "
            "alike on every process, then migrate",
        ),
        "AM230": (
            "AM960",
            "left as written: the training changes which parameters need a gradient after prepare() would wrap "
            "the model (AM230 shows where), so DDP would stop at the next step or leave the unfrozen layers "
            "unaveraged; keep every parameter trainable at prepare() and pass "
            "`DistributedDataParallelKwargs(find_unused_parameters=True)` to the Accelerator, then migrate",
        ),
        "AM231": (
            "AM960",
            "left as written: on some batches the loss is a constant in place of a term (AM231 shows where), so "
            "the parameters behind that term get no gradient there and DDP would stop at the next step; keep the "
            "term in the graph with a zero or pass `DistributedDataParallelKwargs(find_unused_parameters=True)` to "
            "the Accelerator, then migrate",
        ),
    }
    return [
        Problem(reasons[f.code][0], f.start.line, f.start.col, reasons[f.code][1])
        for f in lint.findings
        if f.code in reasons
    ]


def _drives(config: Config, source: str) -> tuple:
    """The file's calls that run another file's training (Config.project_drives), less those
    of classes and functions that create the Accelerator themselves (Config.project_enters),
    called once: their file is migrated on its own, and this one has nothing to hand them.
    Called in a loop of this file, batch by batch (MUNIT's `trainer.dis_update(images_a,
    images_b, config)`), the loop and its loaders are this file's, and they need the
    Accelerator as much as the methods do."""
    entering = {spelling.rpartition(".")[2] for spelling in config.project_enters}
    if not any(d[4] in entering for d in config.project_drives):
        return config.project_drives
    looped = _lines_in_loops(source)
    return tuple(d for d in config.project_drives if d[4] not in entering or d[1] in looped)


def _entering(config: Config) -> frozenset[str]:
    """The classes and functions of the run that create the Accelerator themselves, in a
    migration that was not left as written (Config.project_refused)."""
    refused = {spelling.rpartition(".")[2] for spelling in config.project_refused}
    return frozenset(spelling.rpartition(".")[2] for spelling in config.project_enters) - refused


def _lines_in_loops(source: str) -> set[int]:
    """The lines of calls in the body of a for loop over batches: anything but a counter
    (`for epoch in range(n): trainer.train(epoch)` hands the class no batch)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor)) and not _counts(n.iter)]
    return {c.lineno for loop in loops for s in loop.body for c in ast.walk(s) if isinstance(c, ast.Call)}


def _counts(source: ast.AST | None) -> bool:
    """`range(n)`, `enumerate(trange(n))`, `count()`: a counter, not batches."""
    while isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id in ("enumerate", "tqdm"):
        source = source.args[0] if source.args else None
    if not isinstance(source, ast.Call):
        return False
    name = source.func.attr if isinstance(source.func, ast.Attribute) else getattr(source.func, "id", "")
    return name in ("range", "trange", "count")


def _not_silent(outcome: EngineOutcome, path: str, source: str, config: Config) -> EngineOutcome:
    """`_unnamed_training`, and where AM001 names the model this file hands to a training left
    as written, every other training it drives that the model does not reach (pytorch-a2c's
    GAIL `discr.update(...)` beside the policy handed to PPO), unless that training's class
    is migrated in this run with an Accelerator of its own: the hand migration must prepare
    it too."""
    from migrator.verify.silence import driven_training

    entering = _entering(config)
    named = _unnamed_training(outcome, path, source, config.run_callers, _drives(config, source), entering)
    handed = _handed_on(outcome.findings)
    if not handed:
        return named
    others = tuple(d for d in config.project_drives if not (d[4] in entering and d[5]))
    taken = {f.start.line for f in named.findings if f.code == "AM916"}
    found = tuple(
        replace(f, message=f.message.replace(_UNREPORTED, "nothing here was migrated"))
        for p in driven_training(source, others, path, besides=handed) if p.line not in taken
        for f in (_refusal(path, p),)
    )
    return replace(named, findings=named.findings + found) if found else named


def _unnamed_training(
    outcome: EngineOutcome, path: str, source: str, called: frozenset[str], drives: tuple, entering: frozenset[str],
) -> EngineOutcome:
    """A file that trains by hand, or drives the training of another file of the run
    (`drives`: Config.project_drives; `entering`: those that create their own Accelerator),
    and got no edit and no finding is reported (AM916);
    `called`: its names other files of the run call (its set-up is there, not missing).
    Findings on code other files call (a wrap, a device: RUN_CALLS_IT) do not name a
    set-up the file builds itself: a wrap it builds an optimizer for is still named."""
    from migrator.analysis.reach import RUN_CALLS_IT
    from migrator.verify.silence import driven_training, silent_training, wrapped_for_training

    if outcome.findings and not all(_beside_training(f) for f in outcome.findings):
        return outcome
    if outcome.findings and all(RUN_CALLS_IT in f.message for f in outcome.findings):
        problems = wrapped_for_training(source, reported=True)
        if problems:
            return replace(outcome, findings=outcome.findings + tuple(_refusal(path, p) for p in problems))
    trains_here = "backward" in source or "step(" in source or "clip_grad" in source or "DataParallel" in source
    problems = silent_training(source, called) if trains_here else []
    problems = problems or driven_training(source, drives, path, entering)
    found = tuple(_refusal(path, p) for p in problems)
    if outcome.findings and found:  # the findings there are said no word of the training
        found = tuple(replace(f, message=f.message.replace(_UNREPORTED, "nothing here was migrated")) for f in found)
    return replace(outcome, findings=outcome.findings + found) if found else outcome


# Findings on what every process writes (a checkpoint, a file, a folder, a log, a print), on code
# other files call, on how long a driving loop runs (an early stop), on a split each
# process draws (AM227), on a test for DataParallel (AM229) or on a freeze while training
# (AM230), on a prompt every process reaches (AM523), on an environment's running statistics
# (AM234), on data no process splits (AM218: a loop over an object keeping its DataLoader
# inside), say nothing of the set-up the training
# needs: beside them only, a file that trains or drives training without its set-up is still
# named (AM916). So does AM001 where it only asks for the Accelerator before the model is built
# (it names no driven training, nor why that was not migrated).
_SIDE_EFFECTS = frozenset({
    "AM510", "AM511", "AM517", "AM518", "AM519", "AM520", "AM523", "AM915", "AM218", "AM227", "AM229", "AM230", "AM231",
    "AM234", "AM919",
})


def _beside_training(finding: Finding) -> bool:
    from migrator.analysis.handed_models import HANDS_TO
    from migrator.analysis.reach import RUN_CALLS_IT

    before_the_model = finding.code == "AM001" and not finding.fixable
    handed_on = finding.code == "AM205" and HANDS_TO in finding.message  # the model's reads once prepared elsewhere
    return finding.code in _SIDE_EFFECTS or RUN_CALLS_IT in finding.message or before_the_model or handed_on


_UNREPORTED = "nothing here was migrated or reported"


def _handed_on(findings: tuple[Finding, ...]) -> str:
    """The model AM001 names as built here and handed to another file's training left as
    written (analysis/handed_models.py), or ""."""
    from migrator.analysis.handed_models import handed_name

    return next((name for f in findings if f.code == "AM001" and (name := handed_name(f.message))), "")


def _refusal(path: str, problem) -> Finding:
    """A verifier problem as a finding; the rule modules AM950-AM959 hold names and docs."""
    from migrator.registry import all_rules

    rule = next((r for r in all_rules() if r.code == problem.code), None)
    name = rule.name if rule is not None else problem.code.lower()
    at = Position(problem.line, problem.col)
    return Finding(path, at, at, problem.code, name, problem.message)


def _start(analysis: ScriptAnalysis, node: cst.CSTNode) -> tuple[int, int]:
    start = analysis.position(node).start
    return (start.line, start.column)
