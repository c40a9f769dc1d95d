"""files.py: reading, walking, atomic writing; and bad input through the real CLI.

Each bad-input case runs `python -m migrator` in a subprocess: one clear line naming the
file, no traceback, exit status 2, and the other files still processed.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import files
from migrator.api import migrate_paths
from migrator.config import Config
from migrator.findings import FileStatus
from migrator.files import InputError

HAZARD = (
    "import torch\n\n"
    "model = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loss = model(torch.ones(2)).sum()\n"
    "loss.backward()\n"
)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


# --- reading -----------------------------------------------------------------------


def test_read_source_returns_bytes_and_stamp(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"x = 1\r\n")
    source = files.read_source(str(path))
    assert source.data == b"x = 1\r\n"
    assert source.size == 7
    assert source.mtime_ns == path.stat().st_mtime_ns


def test_read_source_missing_file(tmp_path):
    with pytest.raises(InputError) as info:
        files.read_source(str(tmp_path / "nope.py"))
    assert info.value.reason == "cannot read: no such file or directory"
    assert str(info.value).endswith("nope.py:1:1: error: cannot read: no such file or directory")


def test_read_source_refuses_binary(tmp_path):
    path = tmp_path / "blob.py"
    path.write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(InputError) as info:
        files.read_source(str(path))
    assert info.value.code == "E004"
    assert "binary file" in info.value.reason


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_read_source_refuses_a_fifo_instead_of_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(InputError) as info:
        files.read_source(str(tmp_path / "pipe.py"))
    assert info.value.reason == "cannot read: not a regular file"


def test_read_source_symlink_loop(tmp_path):
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    with pytest.raises(InputError) as info:
        files.read_source(str(tmp_path / "a.py"))
    assert info.value.reason == "cannot read: symbolic link loop"


def test_read_source_permission_error_is_an_input_error(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(InputError) as info:
        files.read_source(str(path))
    assert info.value.reason == "cannot read: permission denied"


# --- writing -----------------------------------------------------------------------


def test_write_back_replaces_content_and_keeps_mode(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    path.chmod(0o751)
    source = files.read_source(str(path))
    files.write_back(source, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]  # no temp file left


def test_write_back_refuses_a_file_changed_since_read(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    source = files.read_source(str(path))
    path.write_bytes(b"edited meanwhile\n")
    with pytest.raises(InputError) as info:
        files.write_back(source, b"new\n")
    assert info.value.code == "E006"
    assert "changed on disk" in info.value.reason
    assert path.read_bytes() == b"edited meanwhile\n"


def test_write_back_compares_content_not_only_the_stamp(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"aaaa\n")
    source = files.read_source(str(path))
    path.write_bytes(b"bbbb\n")  # same size ...
    os.utime(path, ns=(source.mtime_ns, source.mtime_ns))  # ... and the same mtime
    with pytest.raises(InputError, match="changed on disk"):
        files.write_back(source, b"new\n")


def test_write_back_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(b"old\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    files.write_back(files.read_source(str(link)), b"new\n")
    assert link.is_symlink()
    assert real.read_bytes() == b"new\n"


def test_failed_replace_leaves_the_original_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    source = files.read_source(str(path))

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InputError) as info:
        files.write_back(source, b"new\n")
    assert info.value.code == "E005"
    assert info.value.reason == "cannot write: permission denied"
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_write_back_refuses_a_read_only_file(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"old\n")
    path.chmod(0o444)
    if os.access(path, os.W_OK):
        pytest.skip("running as a user that writes through chmod (root)")
    with pytest.raises(InputError, match="permission denied"):
        files.write_back(files.read_source(str(path)), b"new\n")
    assert path.read_bytes() == b"old\n"


def test_write_new_into_a_missing_directory(tmp_path):
    with pytest.raises(InputError) as info:
        files.write_new(str(tmp_path / "no" / "out.py"), b"x\n")
    assert info.value.code == "E005"
    assert "no such file or directory" in info.value.reason


# --- walking -----------------------------------------------------------------------


def test_python_files_walks_sorted_and_skips_tool_directories(tmp_path):
    for rel in ["b.py", "a.py", "pkg/c.py", "notes.txt", ".git/x.py", "__pycache__/y.py",
                "node_modules/z.py", "env/lib/w.py", "x.egg-info/v.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")  # a venv under any name
    found = [os.path.relpath(p, tmp_path) for p in files.python_files([str(tmp_path)])]
    assert found == ["a.py", "b.py", os.path.join("pkg", "c.py")]


def test_python_files_keeps_explicit_paths_even_missing(tmp_path):
    assert list(files.python_files([str(tmp_path / "missing.py"), "script"])) == [
        str(tmp_path / "missing.py"), "script",
    ]


def test_python_files_does_not_follow_directory_symlinks(tmp_path):
    (tmp_path / "a.py").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "target.py").write_text("")
    (tmp_path / "alias.py").symlink_to(tmp_path / "target.py")
    found = sorted(os.path.basename(p) for p in files.python_files([str(tmp_path)]))
    assert found == ["a.py", "alias.py", "target.py"]


def test_python_files_applies_the_exclude_callback_to_dirs_and_files(tmp_path):
    for rel in ["keep.py", "skip.py", "legacy/old.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    excluded = lambda p: os.path.basename(p) in ("skip.py", "legacy")  # noqa: E731
    found = [os.path.basename(p) for p in files.python_files([str(tmp_path)], excluded)]
    assert found == ["keep.py"]


# --- encodings survive a write -----------------------------------------------------


def _migrate_in_place(path: Path) -> None:
    results = list(migrate_paths([str(path)], Config(), write=True))
    assert [r.status for r in results] == [FileStatus.CHANGED], results


def test_bom_and_crlf_survive_a_write(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + HAZARD.replace("\n", "\r\n").encode())
    _migrate_in_place(path)
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"accelerator.backward(loss)" in data
    assert data.count(b"\n") == data.count(b"\r\n")  # no bare LF sneaked in


def test_pep263_latin1_survives_a_write(tmp_path):
    path = tmp_path / "train.py"
    text = "# -*- coding: latin-1 -*-\n" + HAZARD + 'print("caf\xe9")\n'
    path.write_bytes(text.encode("latin-1"))
    _migrate_in_place(path)
    data = path.read_bytes()
    assert b'print("caf\xe9")' in data  # still one latin-1 byte, not UTF-8's two
    assert b"accelerator.backward(loss)" in data


# --- bad input through the real CLI ------------------------------------------------


def _assert_one_error_line(proc: subprocess.CompletedProcess, expected: str) -> None:
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, proc.stderr
    assert expected in errors[0], proc.stderr


def test_cli_syntax_error(tmp_path):
    (tmp_path / "bad.py").write_text("import torch\ndef f(:\n    pass\n")
    proc = run_cli("bad.py", "--diff", cwd=tmp_path)
    _assert_one_error_line(proc, "bad.py:2:")
    assert "error: cannot parse: " in proc.stderr


def test_cli_syntax_error_of_pre_0_4_pytorch_names_the_rename(tmp_path):
    """`.cuda(async=True)` (PyTorch before 0.4) no longer parses: the error says what to write."""
    (tmp_path / "old.py").write_text("import torch\nx = torch.zeros(2).cuda(async=True)\n")
    proc = run_cli("old.py", "--diff", cwd=tmp_path)
    _assert_one_error_line(proc, "old.py:2:")
    assert "`async` is a keyword since Python 3.7: PyTorch calls this argument `non_blocking=`" in proc.stderr
    assert "Nothing migrated." in proc.stderr and "Nothing to migrate" not in proc.stderr  # the file still needs it
    (tmp_path / "old.py").write_text("import torch\nasync = 1\n")  # another misuse: no rename to suggest
    assert "non_blocking" not in run_cli("old.py", "--diff", cwd=tmp_path).stderr


def test_cli_undecodable_bytes(tmp_path):
    (tmp_path / "bad.py").write_bytes(b"import torch\nx = '\xff'\n")
    proc = run_cli("bad.py", "--lint", cwd=tmp_path)
    _assert_one_error_line(proc, "bad.py:2:")
    assert "decode" in proc.stderr


def test_cli_binary_file_named_py(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"\x00\x01\x02torch")
    proc = run_cli("blob.py", cwd=tmp_path)
    _assert_one_error_line(proc, "blob.py:1:1: error: not Python source: binary file")


def test_cli_missing_path(tmp_path):
    proc = run_cli("missing.py", "--diff", cwd=tmp_path)
    _assert_one_error_line(proc, "missing.py:1:1: error: cannot read: no such file or directory")


def test_cli_bad_file_does_not_stop_the_others(tmp_path):
    (tmp_path / "a_bad.py").write_text("def f(:\n")
    (tmp_path / "b_good.py").write_text(HAZARD)
    proc = run_cli(".", "--lint", cwd=tmp_path)
    _assert_one_error_line(proc, "a_bad.py:1:")
    assert "b_good.py:6:1: AM301" in proc.stdout


def test_cli_directory_without_python_files(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.md").write_text("# hi\n")
    proc = run_cli("docs", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "No Python files found." in proc.stderr


def test_cli_unreadable_file(tmp_path):
    path = tmp_path / "secret.py"
    path.write_text(HAZARD)
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as a user that reads through chmod (root)")
    proc = run_cli("secret.py", cwd=tmp_path)
    _assert_one_error_line(proc, "secret.py:1:1: error: cannot read: permission denied")


def test_cli_output_into_a_missing_directory(tmp_path):
    (tmp_path / "train.py").write_text(HAZARD)
    proc = run_cli("train.py", "-o", "nowhere/out.py", cwd=tmp_path)
    _assert_one_error_line(proc, "nowhere/out.py:1:1: error: cannot write:")
    assert (tmp_path / "train.py").read_text() == HAZARD


def test_cli_output_into_a_read_only_directory(tmp_path):
    (tmp_path / "train.py").write_text(HAZARD)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that writes through chmod (root)")
        proc = run_cli("train.py", "-o", "locked/out.py", cwd=tmp_path)
        _assert_one_error_line(proc, "locked/out.py:1:1: error: cannot write: permission denied")
    finally:
        locked.chmod(0o755)


def test_cli_write_to_a_read_only_file(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(HAZARD)
    path.chmod(0o444)
    if os.access(path, os.W_OK):
        pytest.skip("running as a user that writes through chmod (root)")
    proc = run_cli("train.py", "--write", cwd=tmp_path)
    _assert_one_error_line(proc, "train.py:1:1: error: cannot write: permission denied")
    assert path.read_text() == HAZARD


def test_cli_walk_survives_symlink_loops(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(HAZARD)
    (tmp_path / "pkg" / "again").symlink_to(tmp_path / "pkg", target_is_directory=True)
    (tmp_path / "pkg" / "loop.py").symlink_to(tmp_path / "pkg" / "loop.py")
    proc = run_cli("pkg", "--lint", cwd=tmp_path)
    _assert_one_error_line(proc, "loop.py:1:1: error: cannot read: symbolic link loop")
    assert proc.stdout.count("AM301") == 1  # train.py once, not once per loop turn


def test_cli_file_changed_between_read_and_write(tmp_path, monkeypatch):
    """In-process: the file is edited while it is being migrated; nothing is written."""
    from typer.testing import CliRunner

    from migrator import api, cli

    path = tmp_path / "train.py"
    path.write_text(HAZARD)
    real = api.migrate_source

    def migrate_while_someone_edits(*args, **kwargs):
        result = real(*args, **kwargs)
        path.write_text(HAZARD + "# edited in an editor meanwhile\n")
        return result

    monkeypatch.setattr(api, "migrate_source", migrate_while_someone_edits)
    monkeypatch.chdir(tmp_path)
    outcome = CliRunner().invoke(cli.app, ["train.py", "--write"])
    assert outcome.exit_code == 2
    assert "train.py:1:1: error: not written: the file changed on disk" in outcome.output
    assert path.read_text().endswith("# edited in an editor meanwhile\n")


def test_cli_internal_error_names_the_file_and_goes_on(tmp_path, monkeypatch):
    """In-process: a bug in the engine on one file is reported, the next file still runs."""
    from typer.testing import CliRunner

    from migrator import cli, engine

    (tmp_path / "a.py").write_text(HAZARD)
    (tmp_path / "b.py").write_text(HAZARD)
    real = engine.migrate_module

    def crash_on_a(module, path, *args, **kwargs):
        if path.endswith("a.py"):
            raise RuntimeError("boom")
        return real(module, path, *args, **kwargs)

    monkeypatch.setattr(engine, "migrate_module", crash_on_a)
    monkeypatch.chdir(tmp_path)
    outcome = CliRunner().invoke(cli.app, ["a.py", "b.py", "--diff"])
    assert outcome.exit_code == 2
    assert "a.py:1:1: error: internal error (RuntimeError: boom); please report this bug" in outcome.output
    assert "+++ b/b.py" in outcome.output
    assert "Traceback" not in outcome.output
