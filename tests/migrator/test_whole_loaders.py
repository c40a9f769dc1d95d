"""analysis/whole_loaders.py: which loader parameters every call hands a loader left whole."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import analyze

SCRIPT = textwrap.dedent('''\
    import torch
    from torch.utils.data import DataLoader


    def count(loader):
        total = 0
        for _, y in loader:
            total += y.sum().item()
        return total


    def main():
        loader = DataLoader(data, batch_size=8)
        {before}
        model = torch.nn.Linear(2, 2).to("cuda")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        {after}
''')


def _whole(before: str = "", after: str = "", called_elsewhere: frozenset[str] = frozenset()) -> set[str]:
    module = cst.parse_module(SCRIPT.format(before=before or "pass", after=after or "pass"))
    analysis = analyze(MetadataWrapper(module, unsafe_skip_copy=True), called_elsewhere=called_elsewhere)
    names = {id(f): f.name.value for defs in analysis.facts.functions.values() for f in defs}
    return {f"{names[function]}.{param}" for function, param in analysis.facts.whole_loaders}


def test_a_loader_counted_before_its_prepare_is_whole() -> None:
    assert _whole(before="weights = count(loader)") == {"count.loader"}


def test_a_loader_counted_after_its_prepare_is_this_process_share() -> None:
    assert _whole(after="total = count(loader)") == set()
    assert _whole(before="weights = count(loader)", after="total = count(loader)") == set()


def test_a_function_other_files_call_is_not_judged_from_this_file_alone() -> None:
    assert _whole(before="weights = count(loader)", called_elsewhere=frozenset({"count"})) == set()
