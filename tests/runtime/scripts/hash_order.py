"""Prints this process's rank and the order a set of words iterates in (str-hash order)."""

import os

words = {"the", "model", "trains", "on", "every", "process", "with", "one", "vocabulary"}
print(f"rank{os.environ.get('RANK', '0')} {' '.join(words)}", flush=True)
