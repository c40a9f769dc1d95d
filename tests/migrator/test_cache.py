"""migrator/cache.py: a hit gives back exactly what a run computes, every input of a result
is in the key, a damaged entry is a miss that gets replaced, and `--no-cache` leaves no
trace. Hits are counted in-process by how often `migrate_source` runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from migrator import api
from migrator.api import migrate_paths, migrate_source
from migrator.cache import DIRNAME, Cache, config_fingerprint, default_directory, tool_fingerprint
from migrator.config import Config, Target
from migrator.findings import FileStatus

from tests.fixture_cases import FIXTURES

from tests.notebook.helpers import make_notebook

from .test_cli import CLEAN, HAZARD, run_cli


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "train.py").write_text(HAZARD)
    (root / "clean.py").write_text(CLEAN)
    (root / "plain.py").write_text("print('no framework here')\n")
    return root


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    """The paths `migrate_source` ran on (notebooks go through it too)."""
    seen: list[str] = []
    real = api.migrate_source

    def counting(source, path="<stdin>", config=None):
        seen.append(os.path.basename(path))
        return real(source, path, config)

    monkeypatch.setattr(api, "migrate_source", counting)
    return seen


def _run(tree: Path, cache_dir: Path | None, config: Config | None = None, **kwargs) -> list:
    return list(migrate_paths([str(tree)], config or Config(), cache_dir=str(cache_dir) if cache_dir else None, **kwargs))


def test_second_run_is_all_hits_with_identical_results(tree, tmp_path, calls):
    first = _run(tree, tmp_path / "cache")
    assert sorted(calls) == ["clean.py", "plain.py", "train.py"]
    calls.clear()
    second = _run(tree, tmp_path / "cache")
    assert calls == []
    assert second == first
    assert [r.status for r in second] == [FileStatus.UNCHANGED, FileStatus.UNCHANGED, FileStatus.CHANGED]


def test_editing_a_file_misses_for_that_file_only(tree, tmp_path, calls):
    _run(tree, tmp_path / "cache")
    calls.clear()
    (tree / "clean.py").write_text(CLEAN + "y = torch.zeros(1)\n")
    _run(tree, tmp_path / "cache")
    assert calls == ["clean.py"]


@pytest.mark.parametrize(
    "changed",
    [Config(select=("AM301",)), Config(ignore=("AM1",)), Config(target=Target.ACCELERATE),
     Config(fix=False), Config(unsafe_fixes=True)],
    ids=["select", "ignore", "target", "lint-mode", "unsafe-fixes"],
)
def test_settings_that_change_results_change_the_key(tree, tmp_path, calls, changed):
    _run(tree, tmp_path / "cache")
    calls.clear()
    _run(tree, tmp_path / "cache", changed)
    assert sorted(calls) == ["clean.py", "plain.py", "train.py"]


def test_settings_that_only_choose_files_do_not_change_the_key():
    base = Config()
    assert config_fingerprint(Config(exclude=("tests",), root="/elsewhere")) == config_fingerprint(base)
    assert config_fingerprint(Config(per_file_ignores=(("x.py", ("AM1",)),))) == config_fingerprint(base)


def test_a_changed_rule_source_changes_the_tool_fingerprint(tmp_path, monkeypatch):
    package = tmp_path / "fakerules"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "am999_x.py").write_text("CODE = 'AM999'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = tool_fingerprint(("fakerules",))
    assert tool_fingerprint(("fakerules",)) == before
    (package / "am999_x.py").write_text("CODE = 'AM998'\n")
    assert tool_fingerprint(("fakerules",)) != before
    assert tool_fingerprint() != before  # the real packages


def _entry(cache_dir: Path, path: Path, config: Config | None = None) -> Path:
    store = Cache(str(cache_dir))
    return Path(store.entry_path(store.key(str(path), path.read_bytes(), config or Config())))


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b'{"schema": 1, "key": "trunc',
        b"\xff\xfe not even text",
        json.dumps({"schema": 999, "key": "whatever", "result": {}}).encode(),
        None,  # a well-formed entry stored under another key's name
        "wrong-types",
    ],
    ids=["empty", "truncated", "binary", "other-schema", "other-key", "wrong-types"],
)
def test_a_damaged_entry_is_a_miss_and_is_replaced(tree, tmp_path, calls, damage):
    cache_dir = tmp_path / "cache"
    first = _run(tree, cache_dir)
    entry = _entry(cache_dir, tree / "train.py")
    if damage is None:
        damage = _entry(cache_dir, tree / "clean.py").read_bytes()
    elif damage == "wrong-types":
        good = json.loads(entry.read_text())
        good["result"]["findings"] = [[1, 2]]
        damage = json.dumps(good).encode()
    entry.write_bytes(damage)
    calls.clear()
    assert _run(tree, cache_dir) == first
    assert calls == ["train.py"]
    assert json.loads(entry.read_text())["schema"] == 1  # rewritten whole
    calls.clear()
    _run(tree, cache_dir)
    assert calls == []


def test_failed_files_are_not_cached(tmp_path, calls):
    (tmp_path / "src").mkdir()
    bad = tmp_path / "src" / "bad.py"
    bad.write_text("import torch\ndef broken(:\n")
    for _ in range(2):
        [result] = _run(tmp_path / "src", tmp_path / "cache")
        assert result.status is FileStatus.FAILED
    assert calls == ["bad.py", "bad.py"]
    assert not _entry(tmp_path / "cache", bad).exists()


def test_without_a_cache_dir_nothing_is_read_or_written(tree, tmp_path, calls):
    cache_dir = tmp_path / "cache"
    real = _run(tree, cache_dir)
    entry = _entry(cache_dir, tree / "train.py")
    poisoned = json.loads(entry.read_text())
    poisoned["result"]["findings"] = []
    entry.write_text(json.dumps(poisoned))
    assert _run(tree, cache_dir)[2].findings == ()  # the cache is read...
    assert _run(tree, None) == real  # ...and without one, it is not
    before = sorted(p.name for p in tmp_path.iterdir())
    _run(tree, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_cache_that_cannot_be_written_is_no_cache(tree, tmp_path, calls):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache directory would go")
    first = _run(tree, blocked)
    assert _run(tree, blocked) == first
    assert len(calls) == 6


def test_the_cache_directory_is_tagged_and_ignored(tree, tmp_path):
    _run(tree, tmp_path / "cache")
    assert (tmp_path / "cache" / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert "*" in (tmp_path / "cache" / ".gitignore").read_text().splitlines()


def test_hits_give_back_exactly_what_a_run_computes(tmp_path):
    """Entries store `before`/`after` only when they cannot be rebuilt from the bytes:
    fixture scripts and notebooks, encodings, a BOM, CRLF line endings."""
    cases = sorted(FIXTURES.glob("*/input.*"))[::4]
    inputs = [(p.name if p.suffix == ".py" else "nb.ipynb", p.read_bytes()) for p in cases]
    inputs += [
        ("latin.py", "# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n".encode("latin-1")),
        ("bom.py", b"\xef\xbb\xbf" + HAZARD.encode()),
        ("crlf.py", HAZARD.replace("\n", "\r\n").encode()),
        ("cells.ipynb", make_notebook(["import torch", HAZARD]).encode()),
    ]
    store = Cache(str(tmp_path / "cache"))
    for fix in (True, False):
        config = Config(fix=fix)
        for name, data in inputs:
            migrate = api.notebook.migrate_notebook if name.endswith(".ipynb") else migrate_source
            result = migrate(data, name, config)
            if result.status is FileStatus.FAILED:
                continue
            key = store.key(name, data, config)
            store.put(key, data, result)
            assert store.get(key, name, data) == result, name


def test_write_then_check_is_all_hits(tree, tmp_path, calls, monkeypatch):
    """--check, then --write (a hit, plus the result for the text it writes), then
    --check on the migrated tree: nothing is migrated again, and it exits 0."""
    from typer.testing import CliRunner

    from migrator import cli

    monkeypatch.chdir(tree)
    args = [".", "-j", "1", "--cache-dir", str(tmp_path / "cache")]
    assert CliRunner().invoke(cli.app, [*args, "--check"]).exit_code == 1
    assert sorted(calls) == ["clean.py", "plain.py", "train.py"]
    calls.clear()
    assert CliRunner().invoke(cli.app, [*args, "--write"]).exit_code == 0
    assert calls == ["train.py"]  # the migrated text, once, for the next run
    calls.clear()
    check = CliRunner().invoke(cli.app, [*args, "--check"])
    assert (check.exit_code, calls) == (0, [])
    assert "Nothing to migrate." in check.stderr


def test_cli_write_then_check_through_the_real_command(tree):
    """In a subprocess with default settings: the cache lands in the working directory,
    and a --check after --write only reads it (no entry is created or rewritten)."""
    assert run_cli(".", "--write", cwd=tree).returncode == 0
    cache_dir = tree / DIRNAME
    assert (cache_dir / "CACHEDIR.TAG").is_file()
    entries = {p: p.stat().st_mtime_ns for p in cache_dir.rglob("*.json")}
    assert len(entries) == 4  # the three files as read, and train.py as written
    check = run_cli(".", "--check", cwd=tree)
    assert check.returncode == 0, check
    assert {p: p.stat().st_mtime_ns for p in cache_dir.rglob("*.json")} == entries


def test_cli_no_cache_leaves_no_trace(tree):
    proc = run_cli(".", "--check", "--no-cache", cwd=tree)
    assert proc.returncode == 1, proc
    assert not (tree / DIRNAME).exists()


def test_default_directory_is_the_project_root(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    assert default_directory(str(tmp_path / "pkg" / "sub")) == str(tmp_path / "pkg" / "sub" / DIRNAME)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.accel-migrate]\nselect = ['AM3']\n")
    assert default_directory(str(tmp_path / "pkg" / "sub")) == str(tmp_path / "pkg" / DIRNAME)


def test_notebooks_are_cached_by_their_bytes(tmp_path, calls):
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "train.ipynb").write_text(make_notebook(["import torch", HAZARD]))
    first = _run(tmp_path / "nb", tmp_path / "cache")
    assert first[0].status is FileStatus.CHANGED and calls == ["train.ipynb"]
    assert _run(tmp_path / "nb", tmp_path / "cache") == first
    assert calls == ["train.ipynb"]
