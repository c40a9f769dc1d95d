"""verify/processes.py: a migration that creates an Accelerator leaves no process starter
and no rendezvous picked by hand beside it."""

from __future__ import annotations

import textwrap

from migrator.verify import verify

BEFORE = textwrap.dedent(
    """
    import os
    import torch
    import torch.multiprocessing as mp

    def worker(rank):
    {body}
        model = torch.nn.Linear(2, 2)

    if __name__ == "__main__":
        {call}
    """
)


def _problems(body: str, call: str = "worker(0)") -> list[str]:
    before = BEFORE.format(body=textwrap.indent(body, "    "), call=call)
    after = before.replace("import torch\n", "import torch\nfrom runtime import Accelerator\n", 1).replace(
        "def worker(rank):\n", "def worker(rank):\n    accelerator = Accelerator()\n", 1
    )
    return [p.message for p in verify(before, after) if p.code == "AM955"]


def test_a_spawn_left_beside_the_accelerator_is_refused() -> None:
    (message,) = _problems("pass", "mp.spawn(worker, nprocs=2)")
    assert "`mp.spawn(...)` still starts processes" in message


def test_a_spawn_imported_by_name_is_seen() -> None:
    before = "from torch.multiprocessing import spawn as start\nimport torch\n\ndef w(i):\n    m = torch.nn.Linear(2, 2)\n\nstart(w, nprocs=2)\n"
    after = before.replace("import torch\n", "import torch\nfrom runtime import Accelerator\n").replace(
        "def w(i):\n", "def w(i):\n    accelerator = Accelerator()\n"
    )
    assert any("`start(...)` still starts processes" in p.message for p in verify(before, after))


def test_a_rendezvous_picked_by_hand_is_refused_but_a_default_is_not() -> None:
    (message,) = _problems('os.environ["MASTER_PORT"] = "12355"')
    assert "`MASTER_PORT` by hand" in message
    assert _problems('if "MASTER_PORT" not in os.environ:\n    os.environ["MASTER_PORT"] = "12355"') == []
    assert _problems('if not os.getenv("MASTER_ADDR"):\n    os.environ["MASTER_ADDR"] = "localhost"') == []


def test_nothing_is_said_where_the_migration_creates_no_accelerator() -> None:
    before = BEFORE.format(body='    os.environ["MASTER_PORT"] = "1"', call="mp.spawn(worker, nprocs=2)")
    assert [p for p in verify(before, before) if p.code == "AM955"] == []
