"""The two texts the verifier compares, their facts, and the map from the migrated
text's lines back to the original's (findings point at what the user wrote)."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass

from migrator.verify.program import Program


@dataclass(frozen=True)
class Problem:
    """One reason a migration is not written: a code, a place in the ORIGINAL text, and
    a message that says what a human must do."""

    code: str
    line: int
    col: int
    message: str
    blocking: bool = True  # False: the migration is written, and this is said beside it


@dataclass(frozen=True, eq=False)
class Pair:
    before_text: str
    after_text: str
    before: Program
    after: Program
    # top-level names of this file that other files of the run call once per process
    # (project/entries.py): a set-up created in them runs where those callers run
    called_elsewhere: frozenset[str] = frozenset()
    # calls of the run's code that moves tensors to a device itself (project/decide.py)
    placing: frozenset[str] = frozenset()
    # top-level names of this file that other files of the run call, and that the run does
    # not thread: a parameter the migration makes required there is never passed
    called_unthreaded: frozenset[str] = frozenset()
    # calls of the run's training functions whose own migration was left as written
    # (project/decide.py: Config.project_refused)
    refused_trainers: frozenset[str] = frozenset()
    # calls of other files' code that reads `.module` of a model it is handed
    # (project/module_readers.py: Config.project_module_readers)
    module_readers: frozenset[str] = frozenset()
    # calls of other files' helpers that wrap the model they are handed in DataParallel or
    # DDP (project/dist_helpers.py: Config.project_distribution, kind "wraps_model")
    model_wrappers: frozenset[str] = frozenset()
    # calls of other files' functions returning loaders they shard with a DistributedSampler
    # (project/sharded_loaders.py: Config.project_sharded_loaders)
    sharded_loaders: frozenset[str] = frozenset()
    # parameters of this file's functions that callers in other files hand such a loader
    # (project/sharded_loaders.py: Config.project_sharded_params)
    sharded_params: frozenset[str] = frozenset()
    # calls of other files' functions returning a model they wrap in DataParallel
    # (project/hand_wrapped.py: Config.project_wrapping_calls)
    wrapped_models: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, before_text: str, after_text: str, called_elsewhere: frozenset[str] = frozenset(),
        placing: frozenset[str] = frozenset(), called_unthreaded: frozenset[str] = frozenset(),
        refused_trainers: frozenset[str] = frozenset(), module_readers: frozenset[str] = frozenset(),
        model_wrappers: frozenset[str] = frozenset(), sharded_loaders: frozenset[str] = frozenset(),
        sharded_params: frozenset[str] = frozenset(), wrapped_models: frozenset[str] = frozenset(),
    ) -> "Pair | None":
        before, after = Program.parse(before_text), Program.parse(after_text)
        if before is None or after is None:
            return None
        return cls(
            before_text, after_text, before, after, called_elsewhere, placing, called_unthreaded, refused_trainers, module_readers,
            model_wrappers, sharded_loaders, sharded_params, wrapped_models,
        )

    @functools.cached_property
    def _after_to_before(self) -> list[tuple[int, bool]]:
        """Per migrated line: (original line, whether the text is the original's)."""
        old, new = self.before_text.splitlines(), self.after_text.splitlines()
        mapping: list[tuple[int, bool]] = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
            if tag == "equal":
                mapping += [(i1 + k + 1, True) for k in range(j2 - j1)]
            else:
                mapping += _align(old, i1, i2, new[j1:j2])
        return mapping

    def _mapped(self, after_line: int) -> tuple[int, bool]:
        mapping = self._after_to_before
        if not mapping:
            return 1, False
        return mapping[min(max(after_line, 1), len(mapping)) - 1]

    def original_line(self, after_line: int) -> int:
        """The original line an (1-based) line of the migrated text comes from."""
        return self._mapped(after_line)[0]

    def at_after(self, code: str, node, message: str) -> Problem:
        """A problem found at `node` of the migrated text, placed in the original (at the
        start of the line when the migration wrote that line)."""
        return self.at_after_place(code, node.lineno, node.col_offset, message)

    def at_after_place(self, code: str, line: int, col: int, message: str) -> Problem:
        """As at_after, from a 1-based line and 0-based column of the migrated text."""
        original, same = self._mapped(line)
        return Problem(code, original, col + 1 if same else 1, message)

    @staticmethod
    def at_before(code: str, node, message: str) -> Problem:
        return Problem(code, node.lineno, node.col_offset + 1, message)


def _align(old: list[str], i1: int, i2: int, lines: list[str]) -> list[tuple[int, bool]]:
    """Map the migrated lines of a replaced block to the original lines they were edited
    from: the in-order pairing with the highest total similarity (a small dynamic
    programme; blocks are a few lines). A line paired with nothing was inserted and maps
    to the original line it goes above."""
    n, m = i2 - i1, len(lines)
    if n * m > 40_000:  # a huge rewritten block: pair by position
        return [(min(i1 + k, i2 - 1) + 1 if n else min(i1 + 1, max(len(old), 1)), False) for k in range(m)]
    sim = [[_similarity(old[i1 + a], lines[b]) for b in range(m)] for a in range(n)]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for a in range(n - 1, -1, -1):
        for b in range(m - 1, -1, -1):
            pair = sim[a][b] + best[a + 1][b + 1] if sim[a][b] else 0.0
            best[a][b] = max(pair, best[a + 1][b], best[a][b + 1])
    out: list[tuple[int, bool]] = []
    a = b = 0
    while b < m:
        if a < n and sim[a][b] and best[a][b] == sim[a][b] + best[a + 1][b + 1]:
            out.append((i1 + a + 1, False))
            a, b = a + 1, b + 1
        elif a < n and best[a][b] == best[a + 1][b]:
            a += 1
        else:
            out.append((min(i1 + a + 1, max(len(old), 1)), False))
            b += 1
    return out


def _similarity(a: str, b: str) -> float:
    """How alike two lines are: by their characters, or by the names they share (a
    rewrite moves names around: `loss.backward()` → `accelerator.backward(loss)`)."""
    ratio = difflib.SequenceMatcher(a=a.strip(), b=b.strip()).ratio()
    words_a, words_b = set(_WORD.findall(a)), set(_WORD.findall(b))
    if words_a and words_b:
        ratio = max(ratio, len(words_a & words_b) / len(words_a | words_b))
    return ratio if ratio >= 0.5 else 0.0


_WORD = re.compile(r"[A-Za-z_]\w*")
