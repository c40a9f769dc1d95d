"""The entry points: one source text in, one FileResult out. Never raises for user input.

LibCST, the engine and the rules load on the first file that needs migrating, so a run
whose files all come from the cache never pays for importing them.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from migrator import files, notebook, parallel
from migrator.cache import Cache
from migrator.config import Config, ConfigError, ConfigResolver, Overrides
from migrator.findings import FileResult, FileStatus, Finding, Position, Severity

if TYPE_CHECKING:
    import libcst as cst

# a trainer module may name no torch at all (`self.model`, `loss.backward()` on what it is handed)
_RELEVANT = ("torch", "accelerat", ".backward(")


def _error(path: str, line: int, col: int, code: str, message: str) -> Finding:
    return Finding(path, Position(line, col), Position(line, col), code, code.lower(), message, severity=Severity.ERROR)


def _byte_place(source: str | bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of a byte offset (for undecodable input)."""
    data = source if isinstance(source, bytes) else source.encode()
    head = data[:offset]
    return head.count(b"\n") + 1, offset - (head.rfind(b"\n") + 1) + 1


def _syntax_error_place(source: str | bytes, path: str, exc: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """Prefer Python's own report (the place and words users know from tracebacks);
    fall back to LibCST's when this Python accepts what LibCST rejects."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as err:
        if err.lineno:
            return err.lineno, err.offset or 1, err.msg + _older_python_hint(err.text or "", err.offset or 1)
    except ValueError:
        pass
    return exc.editor_line, exc.editor_column, exc.message


def _older_python_hint(line: str, col: int) -> str:
    """Why code written for an older Python fails here, where it is a known rename: PyTorch
    before 0.4 spelled `non_blocking` as `async`, a keyword since Python 3.7."""
    if re.match(r"async\s*=", line[max(col - 1, 0):]):
        return " (`async` is a keyword since Python 3.7: PyTorch calls this argument `non_blocking=`)"
    return ""


def migrate_source(source: str | bytes, path: str = "<stdin>", config: Config | None = None) -> FileResult:
    """Migrate one file's contents. Bytes are decoded as Python does (PEP 263 cookie, BOM)."""
    import libcst as cst

    from migrator import engine, registry

    config = config or Config()
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        line, col, reason = _syntax_error_place(source, path, exc)
        return FileResult(path, FileStatus.FAILED, error=_error(path, line, col, "E001", f"cannot parse: {reason}"))
    except UnicodeDecodeError as exc:
        line, col = _byte_place(source, exc.start)
        reason = f"cannot decode byte 0x{exc.object[exc.start]:02x} as {exc.encoding}"
        return FileResult(path, FileStatus.FAILED, error=_error(path, line, col, "E002", reason))
    except (LookupError, SyntaxError) as exc:
        return FileResult(path, FileStatus.FAILED, error=_error(path, 1, 1, "E002", f"cannot decode: {exc}"))
    # LibCST round-trips exactly: the text is the decoded input, no codegen needed.
    before = source if isinstance(source, str) else source.decode(module.encoding)
    if not any(word in before for word in _RELEVANT) and not _shared_side_effects(before, config) and not config.project_drives \
            and not config.project_batch_params:
        # no torch: nothing to migrate, unless a helper of a run makes directories or log files every
        # process makes (AM518, AM519), or the file runs the training of another file of the run (AM916)
        return FileResult(path, FileStatus.UNCHANGED, before, before, encoding=module.encoding)
    try:
        outcome = engine.migrate_verified(module, path, config, registry.select(config), source=before)
        after = outcome.code
    except Exception as exc:  # an internal bug: report it for this file, keep going
        message = f"internal error ({type(exc).__name__}: {exc}); please report this bug"
        return FileResult(path, FileStatus.FAILED, before, error=_error(path, 1, 1, "E999", message))
    status = FileStatus.CHANGED if after != before else FileStatus.UNCHANGED
    return FileResult(
        path, status, before, after, outcome.findings, encoding=module.encoding, touched_lines=outcome.touched_lines
    )


def _shared_side_effects(text: str, config: Config) -> bool:
    """A file without torch whose functions the run calls may still make a directory,
    open a log file or write a file on every process, itself or through a helper of
    another file that writes one (`pics.save_picture(array, path)`)."""
    helpers = bool(config.project_writers or config.project_output_writers)
    return bool(config.run_callers) and (helpers or any(word in text for word in _SHARED_EFFECTS))


# what AM517, AM518, AM519, AM234 and AM227 look for in code other files of the run call
_SHARED_EFFECTS = (
    "makedirs", "mkdir", "FileHandler", "basicConfig", "open(", "savefig", "save(", "savetxt", "to_csv", "dump(",
    "Monitor", "Normalize", "train_test_split",
)


def unknown_selectors(selectors: Iterable[str]) -> list[str]:
    """The selectors (codes, prefixes, names) that match no rule: a typo selects nothing."""
    selectors = list(selectors)
    if not selectors:  # the common case: no need to load the rules
        return []
    from migrator import registry

    rules = registry.all_rules()
    return [s for s in selectors if not any(registry.matches(rule, [s]) for rule in rules)]


def migrate_paths(
    paths: Iterable[str],
    config: Config | None = None,
    *,
    overrides: Overrides | None = None,
    isolated: bool = False,
    write: bool = False,
    output: str | None = None,
    jobs: int = 1,
    cache_dir: str | None = None,
    on_total: Callable[[int], None] | None = None,
) -> Iterator[FileResult]:
    """Migrate every Python file under `paths` (directories walked recursively).

    With `config`, every file uses it as given. Without, each file uses the nearest
    `[tool.accel-migrate]` (none when `isolated`) with `overrides` on top. `write`
    replaces changed files in place; `output` writes the (single) result there instead.
    `jobs` > 1 migrates in that many worker processes; results come in the same order
    either way, and this process does all reading and writing. `cache_dir` keeps results
    keyed by file content and settings (cache.py). `on_total` hears the number of files
    once the walk is done. Problems with a file or its configuration become FAILED
    results; the walk goes on.
    """
    resolver = _FixedConfig(config) if config is not None else ConfigResolver(overrides, isolated=isolated)
    store = Cache(cache_dir) if cache_dir else None
    planned = list(_planned(paths, resolver))
    if on_total is not None:
        on_total(len(planned))
    items = [_look_up(item, store, write=write and not output) if isinstance(item, _File) else item for item in planned]
    run = [item for item in items if isinstance(item, _File)]
    around = _around(run, resolver)
    _with_facts_of_other_files(run, store, write=write and not output, around=around)
    _as_one_program(run, store, around)
    tasks = [item.task for item in items if isinstance(item, _File) and item.task is not None]
    if jobs > 1 and len(tasks) > 1:
        _load_engine()  # before the workers fork, so each starts with it loaded
    computed = parallel.map_ordered(_compute, tasks, jobs, _crashed)
    for item in items:
        if isinstance(item, FileResult):
            yield item
            continue
        result, again = next(computed) if item.task is not None else (item.result, None)
        if store is not None and item.task is not None and item.task.known is None:
            store.put(item.key, item.source.data, result)
        result = _finish(result, item.source, write=write, output=output)
        if store is not None and again is not None and result.changed and result.error is None:
            data = result.after.encode(result.encoding)  # what was written: next run's input
            store.put(store.key(result.path, data, item.config), data, again)
        yield result


def _around(run: list[_File], resolver: ConfigResolver | _FixedConfig) -> list[_File]:
    """The project's Python files around the run's (surroundings.py), read, with their
    settings: the run reads them to decide and never writes or reports them."""
    from migrator import surroundings

    readable = [i.path for i in run if i.source is not None and not notebook.is_notebook(i.path)]
    if not readable:
        return []
    out = []
    for path, data in surroundings.read_around(readable).items():
        try:
            config = resolver.config_for(path).for_file(path)
        except ConfigError:
            continue
        out.append(_File(path, config, files.Source(path, data, 0, len(data))))
    return out


def _with_facts_of_other_files(items: list[_File], store: Cache | None, *, write: bool, around: list[_File] = ()) -> None:
    """Facts one file of the run gives another, each read once for the whole run: a model
    class of another file whose parameters get no gradient (project/unused.py:
    `project_unused`), another file's distribution helpers (`utils.init_distributed_mode
    (args)`, `utils.get_rank()`: project/dist_helpers.py: `project_distribution`), and the
    roles of what it hands to another file's functions (project/param_roles.py:
    `project_roles`), and its calls of another file's functions that download a data set
    (project/downloads.py: `project_downloads`), and its calls of another file's functions
    that only write a file (project/writers.py: `project_writers`), and its calls of the
    helpers of files the run only reads that create a folder every process may race for
    (project/dir_makers.py: `project_dir_makers`) or write files among other work
    (project/output_writers.py: `project_output_writers`), and its calls of the methods of the run's
    model objects that torch.save (project/savers.py: `project_savers`), and of the classes whose
    objects keep a file open for writing (project/open_files.py: `project_file_keepers`), and the
    optional parameters no call of the run passes (project/unpassed.py: `project_unpassed`), and its calls
    of helpers that split a data set with a global generator (project/splits.py: `project_splits`), and
    the global generators the callers of its code seed (project/splits.py: `project_seeded`), and
    of helpers that freeze or unfreeze a model's parameters (project/freezers.py: `project_freezers`), and its calls of another
    file's classes that keep a TensorBoard writer (project/loggers.py: `project_loggers`), and its
    calls of another file's functions that silence print off the main process
    (project/print_silencers.py: `project_print_silencers`), and its calls of the run's
    evaluation functions and classes (`project_evaluations`: a loader only those that get
    no Accelerator read stays whole), and of those that move tensors to a device themselves
    (`project_placing`). A file
    that learns one is migrated knowing it: its settings, and so its cache key and task,
    are made again. The files `around` the run give facts and learn theirs (the run may
    migrate them in memory to decide), but only a function they call that an earlier run
    threaded hands its parameters' roles to the run's callers (a set-up is not prepared
    for an engine the run will not migrate)."""
    readable = [i for i in items if i.source is not None and not notebook.is_notebook(i.path)]
    readable += list(around)
    marks = {
        "project_unused": (b"transformers", b"torchvision", b"nn."), "project_distribution": (b"init_process_group", b"get_rank", b"DataParallel", b"FileHandler", b"basicConfig"),
        "project_roles": (b"import",), "project_downloads": (b"download", b"pretrained", b"weights=", b"hub.", b"model_zoo", b"torchtext", b"urlretrieve", b"urlopen", b"wget", b"gdown"), "project_download_draws": (b"download", b"urlretrieve", b"urlopen", b"wget", b"gdown"), "project_meters": (b".update(",),
        "project_entered": (b"import",), "project_states": (b"state_dict",),
        "project_enters": (b"import",), "project_called": (b"import",), "project_called_any": (b"import",), "project_writers": (b"open(", b"save(", b"save_image", b"copy"),
        "project_loggers": (b"Writer(",), "project_inherits": (b"class ",), "project_bases": (b"class ",), "project_print_silencers": (b".print",),
        "project_evaluations": (b"import",), "project_placing": (b"import",), "project_loaders": (b"DataLoader",), "project_drives": (b"import",),
        "project_iterators": (b"__next__", b"__iter__", b"batch", b"= [", b"list("), "project_module_readers": (b".module",),
        "project_sharded_loaders": (b"DistributedSampler",), "project_sharded_params": (b"DistributedSampler",), "project_sharding_readers": (b"DistributedSampler",), "project_gathering_readers": (b"DistributedSampler",), "project_dir_makers": (b"mkdir", b"makedirs"),
        "project_output_writers": (b"save", b"open("),
        "project_wrapped_loaders": (b"__iter__",), "project_hand_wrapped": (b"DataParallel",), "project_wrapping_calls": (b"DataParallel",),
        "project_handed_loggers": (b"Writer(", b"Logger(", b"Visdom("), "project_model_readers": (b"import",),
        "project_main_flags": (b"rank", b"is_main", b"is_master"),
        "project_savers": (b".save(",), "project_file_keepers": (b"open(",), "project_batch_params": (b".numpy()",), "project_unpassed": (b"=None", b"= None"), "project_splits": (b"shuffle", b"perm", b"sample"), "project_seeded": (b"train_test_split", b"random_split"), "project_freezers": (b"requires_grad",),
    }
    wanted = [f for f, mark in marks.items() if any(m in i.source.data for m in mark for i in readable)]
    if len(readable) < 2 or not wanted:
        return
    from migrator import project

    sources = {i.path: i.source.data for i in readable}
    involved = project.linked(sources)
    if len(involved) < 2 or not involved & {i.path for i in items}:
        return
    files = project.index({p: sources[p] for p in involved})
    read_only = frozenset(i.path for i in around)
    readers = {
        "project_unused": project.unused_models, "project_distribution": project.distribution_calls,
        "project_roles": project.role_calls, "project_downloads": project.download_calls, "project_download_draws": project.download_draw_calls,
        "project_meters": project.meter_calls, "project_entered": project.entered_calls,
        "project_states": project.state_calls, "project_enters": project.entering_calls,
        "project_called": project.called_elsewhere, "project_called_any": project.called_elsewhere,
        "project_writers": project.writer_calls,
        "project_loggers": project.logger_calls, "project_inherits": project.inheriting_calls,
        "project_bases": lambda _, view: project.subclassed_elsewhere(files, set(view)),
        "project_print_silencers": project.print_silencer_calls, "project_evaluations": project.evaluation_calls,
        "project_placing": project.placing_calls, "project_loaders": project.loader_calls, "project_drives": project.driving_calls,
        "project_iterators": project.iterator_params, "project_module_readers": project.module_reader_calls,
        "project_sharded_loaders": project.sharded_loader_calls, "project_sharded_params": project.sharded_params, "project_sharding_readers": project.sharding_reader_calls, "project_gathering_readers": project.gathering_reader_calls,
        "project_savers": project.saver_calls, "project_batch_params": project.batch_params,
        "project_file_keepers": project.file_keeper_calls, "project_unpassed": project.unpassed_params,
        "project_splits": project.split_helper_calls, "project_seeded": project.seeded_by_callers, "project_freezers": project.freezer_calls,
        "project_hand_wrapped": project.hand_wrapped_attributes, "project_main_flags": project.main_flags,
        "project_wrapping_calls": project.wrapping_calls, "project_handed_loggers": project.handed_loggers,
        "project_model_readers": project.model_attribute_readers,
    }
    # who calls a file's functions counts only for callers that run under the launcher: a
    # file the run only reads may be a tool of its own (a search script starting runs)
    launched = project.launched(sources, files, read_only) if read_only else set()
    callers = {p: f for p, f in files.items() if p not in read_only or p in launched}
    # where the set-up is created is the run's files' own decision: a file only read
    # never makes a helper of the run the place of a new Accelerator
    own = {p: replace(f, calls=[]) if p in read_only else f for p, f in files.items()}
    views = {"project_called": callers, "project_bases": callers, "project_entered": own, "project_enters": own}
    found = {
        f: readers[f](sources, views.get(f, files)) for f in wanted
        if f not in ("project_roles", "project_dir_makers", "project_output_writers", "project_wrapped_loaders")
    }
    if "project_drives" in found:  # whether the driven file is one the run writes, or one it only reads
        found["project_drives"] = {
            path: tuple((*d, d[3] not in read_only, _held_by(files, read_only, d[3], d[4], path)) for d in drives)
            for path, drives in found["project_drives"].items()
        }
    installed = project.installed_packages({p: f for p, f in files.items() if p not in read_only})
    if installed:  # a package installed from its own project: the installed copy runs
        found["project_installed"] = installed
        wanted.append("project_installed")
    if "project_dir_makers" in wanted:  # helpers of files the run only reads
        found["project_dir_makers"] = project.dir_maker_calls(sources, files, read_only)
    if "project_output_writers" in wanted:  # helpers of files the run only reads
        found["project_output_writers"] = project.output_writer_calls(sources, files, read_only)
    if "project_writers" in wanted:  # helpers only the run's own files call: their callers gate them
        found["project_gated_writers"] = project.writers_callers_gate(sources, files, read_only)
        wanted.append("project_gated_writers")
    if "project_wrapped_loaders" in wanted:  # both ends: the class keeping the loader, the loop over it
        found["project_wrapped_loaders"], found["project_wrapper_loops"] = project.wrapped_loader_facts(sources, files, read_only)
        wanted.append("project_wrapper_loops")
    if "project_roles" in wanted:
        found["project_roles"] = project.role_calls(sources, files, read_only)
        found["project_members"] = project.member_calls(files, read_only)
        wanted.append("project_members")
    for item in readable:
        learned = {f: found[f][item.path] for f in wanted if item.path in found[f]}
        if learned:
            item.config = replace(item.config, **learned)
            if item.path in read_only:
                continue  # read, never migrated on its own
            item.result, item.task = None, None
            looked = _look_up(item, store, write=write)
            if isinstance(looked, FileResult):  # the file could not be read again
                item.result = looked


def _held_by(files, read_only: frozenset[str], path: str, name: str, caller: str) -> str:
    """A file the run only reads that calls the driven class or function without an
    Accelerator (pytorch-seq2seq's scripts/integration_test.py building SupervisedTrainer):
    the run cannot update it, so the class is not threaded; "" when none does."""
    target = (path, name.partition(".")[0])
    holders = sorted(p for p in read_only if p != caller and p in files and any(c.target == target for c in files[p].calls))
    return os.path.relpath(holders[0], os.path.dirname(caller) or os.curdir).replace(os.sep, "/") if holders else ""


def _as_one_program(items: list[_File], store: Cache | None, around: list[_File] = ()) -> None:
    """Files of the run that hand their set-up to a training function of another file
    of the run are migrated together (project.py); their results are settled here, in
    this process and in order, so `-j N` gives what `-j 1` gives. The others are untouched.
    The files `around` the run that import or are imported by its files take part as
    files the run only reads: migrated in memory, never written; a decision that would
    change one of them is dropped (project/decide.py sees its result as failed)."""
    mine = [i for i in items if i.source is not None and not notebook.is_notebook(i.path)]
    readable = mine + list(around)
    if len(readable) < 2:
        return
    from migrator import project

    involved = project.linked({i.path: i.source.data for i in readable})
    if len(involved) < 2 or not involved & {i.path for i in mine}:
        return
    by_path = {i.path: i for i in readable}
    read_only = frozenset(i.path for i in around)
    files = project.index({i.path: i.source.data for i in readable if i.path in involved})
    threading = bool(project.candidates(files, read_only=read_only))
    beside = {os.path.dirname(os.path.abspath(i.path)) for i in mine}  # a caller there would not be updated
    outside = {
        i.path: i.source.data.decode("utf-8", "replace") for i in around
        if i.path not in files and os.path.dirname(os.path.abspath(i.path)) in beside
    }
    for item in items:  # notebooks, and files the index cannot parse: callers it cannot follow
        if item.source is not None and item.path not in files and (item.path in involved or item not in mine):
            outside[item.path] = item.source.data.decode("utf-8", "replace")

    def target(path: str) -> str:
        return "accelerate" if by_path[path].config.target.value == "accelerate" else "runtime"

    def migrate(
        path: str, calls: tuple[str, ...], stub: str, stepped: tuple[str, ...], loaders: tuple = (), states: tuple = (),
        plain: tuple[str, ...] = (), unthreaded: tuple = (), refused: tuple[str, ...] = (), fix: bool = True,
    ) -> FileResult:
        item = by_path[path]
        config = replace(
            item.config, project_calls=calls, project_callers=stub, project_stepped=stepped, project_loaders=loaders,
            project_states=states, project_plain=plain, project_unthreaded=unthreaded, project_refused=refused, fix=fix,
        )
        result = _cached(store, item, config, lambda: _migrate_in_project(item, config, stub))
        if path in read_only and result.changed:  # the run would have to write a file it only reads
            return replace(result, status=FileStatus.FAILED)
        return result

    def keep_set_ups(paths, refusals) -> None:
        """A set-up handing its training to an engine left as written is left as written too."""
        for path in sorted(paths):
            refused = project.refused_trainers(files, path, refusals)
            if refused:
                item = by_path[path]
                item.result, item.task = migrate(path, (), "", (), refused=refused, fix=item.config.fix), None

    if not threading:  # nothing to thread: each file is migrated alone, unless it sets up a refused trainer
        refusals: dict = {}
        project.refused_alone(files, project.trainers_called(files, read_only), refusals, migrate)
        keep_set_ups(set(files) - read_only, refusals)
        return
    # decided on what the migration would write, also for --lint (it then reports that)
    outcome, results = project.decide(files, migrate, target, outside, read_only)
    read = {p: by_path[p].source.data.decode("utf-8", "replace") for p in read_only if p in files}
    whole = project.evaluations_left_whole(files, results, outcome.threaded, read)
    for path, result in results.items():
        if path in read_only:
            continue
        item = by_path[path]
        context = outcome.context(path)
        late = project.refused_trainers(files, path, outcome.refused, outcome.threaded)
        if result.status is FileStatus.UNCHANGED and set(late) - set(context[-1]):
            # a set-up left as written whose trainer's refusal came after it was migrated: its findings say so
            context = (*context[:-1], tuple(sorted(set(context[-1]) | set(late))))
            result = migrate(path, *context, fix=item.config.fix)
        if not item.config.fix:
            result = migrate(path, *context, fix=False)
            if path in outcome.stubs:
                mine = outcome.covered.get(path, frozenset(t[1] for t in outcome.threaded if t[0] == path))
                result = project.with_unthreaded(result, migrate(path, (), "", (), (), (), fix=False), mine)
        if path in whole:
            result = project.without_share_findings(result, whole[path])
        item.result, item.task = result, None
    for path in sorted(set(whole) - set(results) - read_only):  # an evaluator no caller threads: migrated alone
        item = by_path[path]
        alone = migrate(path, (), "", (), fix=item.config.fix)
        item.result, item.task = project.without_share_findings(alone, whole[path]), None
    keep_set_ups(set(files) - set(results) - read_only, outcome.refused)  # set-ups the rounds never migrated
    for path, reasons in sorted(outcome.refused.items()):  # an engine left as written: why it got no Accelerator
        item = by_path[path]
        if path in read_only or path in results or not reasons:
            continue
        alone = item.result if path in whole else migrate(path, (), "", (), fix=item.config.fix)
        if alone.status is FileStatus.UNCHANGED and alone.error is None:
            item.result, item.task = project.with_reasons(alone, reasons), None


def _cached(store: Cache | None, item: _File, config: Config, compute: Callable[[], FileResult]) -> FileResult:
    if store is None:
        return compute()
    key = store.key(item.path, item.source.data, config)
    result = store.get(key, item.path, item.source.data)
    if result is None:
        result = compute()
        store.put(key, item.source.data, result)
    return result


def _migrate_in_project(item: _File, config: Config, stub: str) -> FileResult:
    from migrator import project

    if not stub:
        return _migrate(item.path, item.source.data, config)
    import io
    import tokenize

    data = item.source.data
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return _migrate(item.path, data, replace(config, project_callers=""))
    result = migrate_source(project.with_stub(text, stub), item.path, config)
    cut = project.without_stub(result, text)
    if cut is None or cut.status is FileStatus.FAILED:
        return FileResult(item.path, FileStatus.FAILED, text, error=result.error)
    return replace(cut, encoding=encoding if encoding != "utf-8-sig" else "utf-8-sig")


@dataclass(frozen=True)
class _Task:
    """What a worker needs for one file (picklable, no file access): the input bytes, or
    the result already known from the cache when only `follow` work is left."""

    path: str
    data: bytes | None
    config: Config
    known: FileResult | None = None
    follow: bool = False  # also migrate the migrated text: the cache entry for after --write


@dataclass
class _File:
    """One file as the parent tracks it: what was read, its cache key, result or task."""

    path: str
    config: Config
    source: files.Source | None = None
    key: str = ""
    result: FileResult | None = None
    task: _Task | None = None


def _planned(paths: Iterable[str], resolver: ConfigResolver | _FixedConfig) -> Iterator[FileResult | _File]:
    """Every file to migrate with its Config (a path named twice counts once), or the
    FAILED/SKIPPED result of an invalid configuration."""
    reported: set[str] = set()
    seen: set[str] = set()
    for path in files.python_files(paths, resolver.excluded):
        absolute = os.path.abspath(path)
        if absolute in seen:
            continue
        seen.add(absolute)
        try:
            file_config = _checked(resolver.config_for(path))
        except ConfigError as exc:
            if exc.path in reported:  # said once; the files under it are skipped
                yield FileResult(path, FileStatus.SKIPPED)
                continue
            reported.add(exc.path)
            reason = f"invalid configuration: {exc.reason}"
            yield FileResult(path, FileStatus.FAILED, error=_error(_shown(exc.path), exc.line, exc.col, "E007", reason))
            continue
        yield _File(path, file_config.for_file(path))


def _look_up(item: _File, store: Cache | None, *, write: bool) -> FileResult | _File:
    """Read the file, then take its result from the cache or make the task that computes it."""
    try:
        item.source = files.read_source(item.path)
    except files.InputError as exc:
        return FileResult(item.path, FileStatus.FAILED, error=_error(item.path, exc.line, exc.col, exc.code, exc.reason))
    data = item.source.data
    if store is None:
        item.task = _Task(item.path, data, item.config)
        return item
    item.key = store.key(item.path, data, item.config)
    item.result = store.get(item.key, item.path, data)
    if item.result is None:
        item.task = _Task(item.path, data, item.config, follow=write)
    elif write and item.result.changed and not _cached_after(store, item):
        item.task = _Task(item.path, None, item.config, known=item.result, follow=True)
    return item


def _cached_after(store: Cache, item: _File) -> bool:
    """Whether the cache already holds the result for the file as --write leaves it."""
    result = item.result
    try:
        data = result.after.encode(result.encoding)
    except (UnicodeEncodeError, LookupError):
        return True  # it will not be written; nothing to prepare
    return store.has(store.key(item.path, data, item.config))


def _compute(task: _Task) -> tuple[FileResult, FileResult | None]:
    """In a worker (or here with one job): the file's result and, with `follow`, the
    result for its migrated text, which is what the next run reads after --write."""
    result = task.known or _migrate(task.path, task.data, task.config)
    again = None
    if task.follow and result.changed and result.after is not None:
        try:
            again = _migrate(task.path, result.after.encode(result.encoding), task.config)
        except Exception:  # noqa: BLE001 - only a cache entry is lost; this file's result stands
            again = None
    return result, again


def _migrate(path: str, data: bytes, config: Config) -> FileResult:
    migrate = notebook.migrate_notebook if notebook.is_notebook(path) else migrate_source
    return migrate(data, path, config)


def _crashed(task: _Task, crash: parallel.Crash) -> tuple[FileResult, None]:
    """A file whose migration raised (or killed its worker): FAILED, named, and reportable."""
    if task.known is not None:
        return task.known, None
    message = f"internal error ({crash.summary}); please report this bug"
    return FileResult(task.path, FileStatus.FAILED, error=_error(task.path, 1, 1, "E999", message)), None


def _load_engine() -> None:
    from migrator import engine, registry  # noqa: F401

    registry.all_rules()


def _finish(result: FileResult, source: files.Source, *, write: bool, output: str | None) -> FileResult:
    """Write the migrated text in place (`write`) or to `output`; a failure is the file's error."""
    if result.after is None or not (output or (write and result.changed)):
        return result
    try:
        data = result.after.encode(result.encoding)
        if output:
            files.write_new(output, data, mode=_mode(source.path))
        else:
            files.write_back(source, data)
    except UnicodeEncodeError as exc:
        reason = f"cannot write: the migrated code cannot be encoded as {result.encoding} ({exc.reason})"
        return replace(result, status=FileStatus.FAILED, error=_error(source.path, 1, 1, "E005", reason))
    except files.InputError as exc:
        return replace(result, status=FileStatus.FAILED, error=_error(exc.path, exc.line, exc.col, exc.code, exc.reason))
    return result


def _shown(path: str) -> str:
    """A discovered pyproject.toml's absolute path, made relative when under the cwd."""
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def _mode(path: str) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _checked(config: Config) -> Config:
    """Refuse a project config whose selectors match no rule (E007 names the file)."""
    for key, selectors in (("select", config.select), ("ignore", config.ignore)):
        bad = unknown_selectors(s for s in selectors if s.upper() != "ALL")
        if bad and config.root is not None:
            pyproject = os.path.join(config.root, "pyproject.toml")
            raise ConfigError(pyproject, f"{key}: {bad[0]!r} matches no rule")
    return config


class _FixedConfig:
    """The resolver for an explicit Config: the same settings for every file."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def config_for(self, path: str) -> Config:
        return self.config

    def excluded(self, path: str) -> bool:
        return self.config.excludes(path)
