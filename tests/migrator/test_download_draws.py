"""Which downloading data sets make a random draw only on a first run (project/deep_downloads.py)."""

from __future__ import annotations

from migrator import project

DATA = b'''\
import os
import urllib.request

import numpy as np


class Split:
    def __init__(self, root):
        self.root = root
        self.download()

    def download(self):
        if os.path.exists(os.path.join(self.root, "split.json")):
            return
        urllib.request.urlretrieve("https://example.org/a.zip", os.path.join(self.root, "a.zip"))
        order = np.random.permutation(10)
        open(os.path.join(self.root, "split.json"), "w").write(str(order.tolist()))


class Jittered:
    def __init__(self, root):
        urllib.request.urlretrieve("https://example.org/b.zip", os.path.join(root, "b.zip"))
        self.offsets = np.random.rand(10)
'''

TRAIN = b'''\
from data import Jittered, Split

first = Split("data")
second = Jittered("data")
'''


def test_a_draw_only_a_first_run_makes_is_named_and_one_every_process_makes_is_not() -> None:
    """viper's split, drawn when the split file is missing, is made by the main process
    alone under main_process_first(); a draw every construction makes (a model's
    initialisation, jitter) happens on every process alike and changes nothing."""
    sources = {"data.py": DATA, "train.py": TRAIN}
    files = project.index(sources)
    draws = dict(project.download_draw_calls(sources, files)["train.py"])
    assert draws == {"Split": "data.py:16"}, draws
    assert set(project.download_calls(sources, files)["train.py"]) == {"Jittered", "Split"}
