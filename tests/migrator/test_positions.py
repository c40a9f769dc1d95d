"""The analysis's own position table and read-only walk give what LibCST's do."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from migrator.analysis.collect import node_tables
from migrator.analysis.positions import positions
from migrator.analysis.walk import children, descendants, walk

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

ODD = {
    "crlf": "import torch\r\nx = (1,\r\n     2)\r\nif x:\r\n    y = x  # note\r\n",
    "cr": "a = 1\rb = [a,\r  a]\r",
    "no-trailing-newline": "def f(a, *, b=2):\n    return f'{a!r:>{b}}'",
    "empty": "",
    "comments-only": "# one\n\n# two\n",
    "tabs-and-unicode": "def f():\n\tname = 'héllo'  # ünïcode\n\treturn [n for n in name if n]\n",
    "decorated-class": "@dataclass(frozen=True)\nclass A(B, metaclass=M):\n    x: int = 1\n\n    async def g(self):\n        async with a as b, c:\n            await b\n",
    "strings": 'x = """a\nb""" "c" \\\n    f"{x}\\n"\ny = lambda *a, **k: (yield)\n',
    "match": "match p:\n    case [1, *rest] if rest:\n        pass\n    case {'k': v, **kw}:\n        pass\n",
}


def _cases() -> list[tuple[str, str]]:
    cases = list(ODD.items())
    parsable = [p for p in sorted(FIXTURES.glob("*/input.py")) if not p.parent.name.startswith("err-")]
    for path in parsable[::5]:
        cases.append((path.parent.name, path.read_text(encoding="utf-8")))
    return cases


@pytest.mark.parametrize(("name", "source"), _cases(), ids=[n for n, _ in _cases()])
def test_positions_are_libcsts(name: str, source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = positions(module)
    assert len(found) == len(expected)
    for node, rng in expected.items():
        assert found[node] == rng, (type(node).__name__, rng, found[node])


class _Record(cst.CSTVisitor):
    """Every callback in order; does not enter lambdas (a visit_ answering False)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", node))
        return not isinstance(node, cst.Lambda)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.calls.append(("leave", original_node))


@pytest.mark.parametrize(("name", "source"), _cases(), ids=[n for n, _ in _cases()])
def test_walk_is_libcsts_visit(name: str, source: str) -> None:
    module = cst.parse_module(source)
    expected, found = _Record(), _Record()
    module.visit(expected)
    walk(module, found)
    assert [(k, id(n)) for k, n in found.calls] == [(k, id(n)) for k, n in expected.calls]
    every = [n for k, n in expected.calls if k == "visit"]
    for node in every[:200]:
        assert [id(c) for c in children(node)] == [id(c) for c in node.children]


@pytest.mark.parametrize(("name", "source"), _cases(), ids=[n for n, _ in _cases()])
def test_node_tables_order_and_subtrees(name: str, source: str) -> None:
    module = cst.parse_module(source)
    tables = node_tables(module)
    pre_order = list(descendants(module))
    seen: list[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            seen.append(node)
            return True

    module.visit(_All())
    assert [id(n) for n in pre_order] == [id(n) for n in seen]
    assert list(tables.order) == pre_order
    assert [tables.order[n] for n in pre_order] == list(range(len(pre_order)))
    for node in pre_order[:300]:
        below = list(descendants(node))
        assert tables.last[node] == tables.order[below[-1]]
        for child in children(node):
            assert tables.parents[child] is node
        calls = [n for n in below if isinstance(n, cst.Call)]
        assert tables.under(node, "Call") == calls
