"""Write a deterministic benchmark corpus shaped like a real ML repository.

    .venv/bin/python bench/corpus.py DIR [--files 1200] [--seed 7]

About a third of the files are training scripts from the property tests' fragment
generator (tests/property/scriptgen.py, driven by a seeded random.Random), some with
helper functions around them; a quarter are torch modules that do not train (models,
datasets, metrics); the rest never mention torch (utilities, configs, CLIs, tests), which
the migrator's pre-filter skips, as it would in a real repository. The same seed always
gives the same files, byte for byte.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.property.scriptgen import RandomChooser, training_script  # noqa: E402

MIN_FILES = 1000
MIN_LINES = 200_000

WORDS = [
    "alpha", "batch", "cache", "delta", "epoch", "frame", "graph", "hash", "index", "job",
    "kernel", "label", "merge", "node", "offset", "parse", "query", "record", "sample",
    "token", "unit", "vector", "window", "yard", "zone", "buffer", "chunk", "field",
    "group", "layer", "metric", "plan", "range", "score", "table", "value",
]


def _name(rng: random.Random, parts: int = 2) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def _pascal(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


# --------------------------------------------------------------------------- plain code


def _plain_function(rng: random.Random) -> list[str]:
    """One utility function that never mentions torch, from a handful of shapes."""
    fn, a, b = _name(rng), rng.choice(WORDS), rng.choice(WORDS) + "s"
    n = rng.randint(2, 64)
    shape = rng.randrange(8)
    if shape == 0:
        return [
            f"def {fn}({a}, {b}=None):",
            f'    """Return {a} joined with every item of {b}."""',
            f"    {b} = list({b} or [])",
            f"    out = []",
            f"    for item in {b}:",
            f"        if not item:",
            f"            continue",
            f"        out.append(f\"{{{a}}}-{{item}}\")",
            f"    return out",
        ]
    if shape == 1:
        return [
            f"def {fn}(text: str, width: int = {n}) -> list[str]:",
            "    words = text.split()",
            "    lines, current = [], []",
            "    for word in words:",
            "        if sum(len(w) + 1 for w in current) + len(word) > width:",
            "            lines.append(\" \".join(current))",
            "            current = []",
            "        current.append(word)",
            "    if current:",
            "        lines.append(\" \".join(current))",
            "    return lines",
        ]
    if shape == 2:
        return [
            f"def {fn}(mapping, key, default={n}):",
            "    try:",
            "        value = mapping[key]",
            "    except (KeyError, TypeError):",
            "        return default",
            "    if isinstance(value, str) and value.isdigit():",
            "        return int(value)",
            "    return value",
        ]
    if shape == 3:
        return [
            f"def {fn}(path):",
            f'    """Read key=value pairs from `path`, skipping comments."""',
            "    result = {}",
            "    with open(path, encoding=\"utf-8\") as handle:",
            "        for raw in handle:",
            "            line = raw.split(\"#\", 1)[0].strip()",
            "            if \"=\" not in line:",
            "                continue",
            "            key, _, value = line.partition(\"=\")",
            "            result[key.strip()] = value.strip()",
            "    return result",
        ]
    if shape == 4:
        return [
            f"def {fn}(values, window={n % 9 + 2}):",
            "    if window <= 0:",
            "        raise ValueError(\"window must be positive\")",
            "    total, out = 0.0, []",
            "    for i, v in enumerate(values):",
            "        total += v",
            "        if i >= window:",
            "            total -= values[i - window]",
            "        out.append(total / min(i + 1, window))",
            "    return out",
        ]
    if shape == 5:
        return [
            f"async def {fn}(queue, limit={n}):",
            "    seen = 0",
            "    while seen < limit:",
            "        item = await queue.get()",
            "        if item is None:",
            "            break",
            "        seen += 1",
            "    return seen",
        ]
    if shape == 6:
        return [
            f"def {fn}(*{b}, sep=\", \", **options):",
            f"    parts = [str(x) for x in {b} if x is not None]",
            "    if options.get(\"sort\"):",
            "        parts.sort()",
            "    return sep.join(parts)",
        ]
    return [
        f"def {fn}(n: int) -> int:",
        "    a, b = 0, 1",
        "    for _ in range(n):",
        f"        a, b = b, (a + b) % {n * 1000 + 7}",
        "    return a",
    ]


def _plain_class(rng: random.Random) -> list[str]:
    cls, field_a, field_b = _pascal(_name(rng)), rng.choice(WORDS), rng.choice(WORDS) + "_count"
    if field_a == field_b:
        field_b += "_2"
    lines = [
        "@dataclass",
        f"class {cls}:",
        f'    """A {field_a} record with a {field_b}."""',
        "",
        f"    {field_a}: str",
        f"    {field_b}: int = 0",
        "    tags: list = field(default_factory=list)",
        "",
        "    def describe(self) -> str:",
        f"        return f\"{cls}({{self.{field_a}!r}}, {{self.{field_b}}})\"",
        "",
        "    def bump(self, by: int = 1) -> None:",
        f"        self.{field_b} += by",
    ]
    for _ in range(rng.randint(0, 3)):
        method = _name(rng)
        lines += [
            "",
            f"    def {method}(self, other):",
            f"        if not isinstance(other, {cls}):",
            "            return NotImplemented",
            f"        return self.{field_b} - other.{field_b}",
        ]
    return lines


def plain_module(rng: random.Random, kind: str = "util") -> str:
    """A module of utilities (or tests of them) that never mentions torch."""
    lines = [f'"""{_pascal(_name(rng))} helpers."""', "", "from __future__ import annotations", ""]
    lines += rng.sample(["import os", "import re", "import json", "import sys", "import math", "import itertools"], 3)
    lines += ["from dataclasses import dataclass, field", "", ""]
    lines += [f"{_name(rng).upper()} = {rng.randint(1, 999)}", f'{_name(rng).upper()} = "{rng.choice(WORDS)}"', "", ""]
    for _ in range(rng.randint(8, 30)):
        block = _plain_class(rng) if rng.random() < 0.25 else _plain_function(rng)
        if kind == "test" and block[0].startswith("def "):
            block = [block[0].replace("def ", "def test_", 1)] + block[1:]
        lines += block + ["", ""]
    if rng.random() < 0.3:
        lines += ['if __name__ == "__main__":', "    print(len(sys.argv))"]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- torch modules


def torch_module(rng: random.Random) -> str:
    """Models, datasets and metrics: mentions torch, never trains."""
    nn = rng.choice(["nn", "torch.nn"])
    lines = ['"""Model building blocks."""', "", "import math", "", "import torch"]
    if nn == "nn":
        lines.append(rng.choice(["import torch.nn as nn", "from torch import nn"]))
    lines += ["import torch.nn.functional as F", "from torch.utils.data import Dataset", "", ""]
    for _ in range(rng.randint(8, 24)):
        name = _pascal(_name(rng))
        kind = rng.randrange(4)
        width = rng.choice([16, 32, 64, 128])
        if kind == 0:
            lines += [
                f"class {name}({nn}.Module):",
                f"    def __init__(self, d_in={width}, d_out={width // 2}, dropout=0.1):",
                "        super().__init__()",
                f"        self.proj = {nn}.Linear(d_in, d_out)",
                f"        self.norm = {nn}.LayerNorm(d_out)",
                f"        self.drop = {nn}.Dropout(dropout)",
                "",
                "    def forward(self, x):",
                "        h = self.proj(x)",
                "        h = F.gelu(self.norm(h))",
                "        return self.drop(h)",
            ]
        elif kind == 1:
            lines += [
                f"class {name}(Dataset):",
                f"    def __init__(self, n={width * 10}, d={width}, seed=0):",
                "        g = torch.Generator().manual_seed(seed)",
                "        self.x = torch.randn(n, d, generator=g)",
                "        self.y = (self.x.sum(dim=1) > 0).long()",
                "",
                "    def __len__(self):",
                "        return len(self.x)",
                "",
                "    def __getitem__(self, i):",
                "        return self.x[i], self.y[i]",
            ]
        elif kind == 2:
            lines += [
                f"def {_name(rng)}(logits, target, ignore_index=-100):",
                "    mask = target != ignore_index",
                "    pred = logits.argmax(dim=-1)",
                "    correct = (pred[mask] == target[mask]).sum()",
                "    return correct.float() / mask.sum().clamp(min=1)",
            ]
        else:
            lines += [
                f"class {name}({nn}.Module):",
                f"    def __init__(self, dim={width}, heads={rng.choice([2, 4, 8])}):",
                "        super().__init__()",
                "        self.heads = heads",
                f"        self.qkv = {nn}.Linear(dim, dim * 3)",
                f"        self.out = {nn}.Linear(dim, dim)",
                "",
                "    def forward(self, x):",
                "        b, t, d = x.shape",
                "        q, k, v = self.qkv(x).chunk(3, dim=-1)",
                "        scores = q @ k.transpose(-2, -1) / math.sqrt(d)",
                "        attn = scores.softmax(dim=-1)",
                "        return self.out(attn @ v)",
            ]
        lines += ["", ""]
    return "\n".join(lines).rstrip() + "\n"


def training_file(rng: random.Random) -> str:
    """A generated training script, sometimes with helper functions before it."""
    script = training_script(RandomChooser(rng), noise=rng.choice([0.0, 0.1, 0.2]))
    if rng.random() < 0.2:
        return script
    helpers: list[str] = []
    for _ in range(rng.randint(2, 10)):
        helpers += _plain_function(rng) + ["", ""]
    head, sep, rest = script.partition("\n\n\n")  # after the imports
    return head + sep + "\n".join(helpers) + rest if sep else script


# --------------------------------------------------------------------------- the corpus


@dataclass
class CorpusStats:
    files: int = 0
    lines: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [files, lines]

    def add(self, kind: str, text: str) -> None:
        n = text.count("\n")
        self.files += 1
        self.lines += n
        entry = self.by_kind.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += n

    def __str__(self) -> str:
        kinds = ", ".join(f"{k} {f} files/{n} lines" for k, (f, n) in sorted(self.by_kind.items()))
        return f"{self.files} files, {self.lines} lines ({kinds})"


def corpus_files(files: int = 1200, seed: int = 7) -> list[tuple[str, str, str]]:
    """(relative path, kind, text) for every file of the corpus, in a fixed order."""
    rng = random.Random(seed)
    packages = [_name(rng, 1) + "_" + str(i) for i in range(12)]
    out = []
    for i in range(files):
        roll = rng.random()
        file_rng = random.Random(rng.getrandbits(64))
        if roll < 0.35:
            kind, text = "train", training_file(file_rng)
            path = rng.choice([f"scripts/train_{i:04d}.py", f"experiments/{_name(rng, 1)}_{i:04d}/train.py"])
        elif roll < 0.60:
            kind, text = "torch", torch_module(file_rng)
            path = f"src/{rng.choice(packages)}/models/{_name(rng)}_{i:04d}.py"
        elif roll < 0.85:
            kind, text = "plain", plain_module(file_rng)
            path = f"src/{rng.choice(packages)}/{_name(rng)}_{i:04d}.py"
        else:
            kind, text = "test", plain_module(file_rng, "test")
            path = f"tests/test_{_name(rng)}_{i:04d}.py"
        out.append((path, kind, text))
    return out


def write_corpus(root: str | os.PathLike, files: int = 1200, seed: int = 7) -> CorpusStats:
    """Write the corpus under `root` (created; existing files with the same names are
    overwritten) and return its size."""
    root = Path(root)
    stats = CorpusStats()
    for rel, kind, text in corpus_files(files, seed):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        stats.add(kind, text)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the deterministic benchmark corpus.")
    parser.add_argument("directory")
    parser.add_argument("--files", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    stats = write_corpus(args.directory, args.files, args.seed)
    print(f"wrote {stats} to {args.directory}")
    if stats.files < MIN_FILES or stats.lines < MIN_LINES:
        print(f"warning: below the benchmark's floor of {MIN_FILES} files / {MIN_LINES} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
