"""`import runtime` has no side effects: no environment reads, no device probing, no warning filters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import collections.abc, json, os, sys, warnings
import torch
import typer  # third-party imports read their own settings; only runtime's modules are watched

real = os.environ
reads = []

class Spy(collections.abc.MutableMapping):
    def __getitem__(self, key):
        reads.append(key)
        return real[key]
    def __setitem__(self, key, value):
        reads.append("set " + key)
        real[key] = value
    def __delitem__(self, key):
        reads.append("del " + key)
        del real[key]
    def __iter__(self):
        reads.append("iterate")
        return iter(real)
    def __len__(self):
        return len(real)

probes = []
torch.cuda.is_available = lambda: probes.append("is_available")
torch.cuda.device_count = lambda: probes.append("device_count") or 0
filters = list(warnings.filters)
os.environ = Spy()
import runtime
from runtime import Accelerator, set_seed
import runtime.launch.cli
os.environ = real
print(json.dumps({"env": reads, "probes": probes, "filters_changed": warnings.filters != filters}))
"""


def test_import_runtime_has_no_side_effects(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"env": [], "probes": [], "filters_changed": False}
