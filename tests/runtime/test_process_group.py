"""runtime/process_group.py: a group that cannot form is a clear error naming where and who."""

from __future__ import annotations

import time

import pytest

from runtime import Accelerator
from runtime.launch.command import find_free_port
from runtime.process import (
    ENV_MASTER_ADDR,
    ENV_MASTER_PORT,
    ENV_PROCESS_GROUP_TIMEOUT,
    ENV_RANK,
    ENV_WORLD_SIZE,
)
from runtime.process_group import ProcessGroupError


def test_a_group_that_cannot_form_names_address_port_and_rank(monkeypatch):
    port = find_free_port()  # nobody listens there: rank 1 waits for a rank 0 that never comes
    for name, value in {ENV_RANK: "1", ENV_WORLD_SIZE: "2", ENV_MASTER_ADDR: "127.0.0.1", ENV_MASTER_PORT: str(port)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_PROCESS_GROUP_TIMEOUT, "2")
    begin = time.monotonic()
    with pytest.raises(ProcessGroupError) as error:
        Accelerator(cpu=True)
    assert time.monotonic() - begin < 30
    for fragment in ("rank 1 of 2", "MASTER_ADDR=127.0.0.1", f"MASTER_PORT={port}", "backend gloo"):
        assert fragment in str(error.value), f"{fragment!r} missing from: {error.value}"
