"""analysis/reach.py and options.py: where the Accelerator is reachable, and the options it
needs."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from migrator.analysis import ScriptAnalysis, analyze
from migrator.analysis.options import option_status, setup_arguments


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _call(analysis: ScriptAnalysis, text: str) -> cst.Call:
    return next(c.node for c in analysis.facts.calls if analysis.module.code_for_node(c.node).startswith(text))


def test_a_function_creating_it_reaches_module_functions_not_methods_or_module_code() -> None:
    analysis = _analyze(
        """
        import torch
        before()
        def helper():
            step()
        def orphan():
            lonely()
        class Logger:
            def log(self):
                write()
        def main():
            early()
            model = torch.nn.Linear(2, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            helper()
        """
    )
    assert analysis.accelerator == "accelerator"
    assert analysis.accelerator_at(_call(analysis, "step(")) == "accelerator"  # threaded by AM002
    # no caller in this file: a caller elsewhere would not pass it
    assert analysis.accelerator_at(_call(analysis, "lonely(")) is None
    assert analysis.accelerator_at(_call(analysis, "early(")) == "accelerator"
    assert analysis.accelerator_at(_call(analysis, "write(")) is None
    assert analysis.accelerator_at(_call(analysis, "before(")) is None


def test_a_trainer_class_owns_it_as_self_accelerator() -> None:
    analysis = _analyze(
        """
        import torch
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, loss):
                loss.backward()
        def main():
            Trainer(torch.nn.Linear(2, 2)).step(report())
        """
    )
    assert analysis.accelerator == "self.accelerator"
    assert analysis.accelerator_at(_call(analysis, "loss.backward(")) == "self.accelerator"
    assert analysis.accelerator_at(_call(analysis, "report(")) is None


def test_options_are_written_after_the_names_they_read() -> None:
    analysis = _analyze(
        """
        import torch
        def main():
            args = parse()
            model = torch.nn.Linear(2, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.cuda.amp.GradScaler()
            with torch.autocast("cuda", enabled=args.amp):
                loss = model(x).sum()
            scaler.scale(loss).backward()
        """
    )
    assert analysis.module.code_for_node(analysis.setup.before).strip().startswith("model =")
    assert setup_arguments(analysis) == 'mixed_precision="fp16" if args.amp else "no"'


def test_an_existing_accelerator_that_cannot_see_the_option_is_a_problem() -> None:
    analysis = _analyze(
        """
        import torch
        from runtime import Accelerator
        accelerator = Accelerator()
        def train(args, model, loader):
            for x in loader:
                with torch.autocast("cuda", enabled=args.amp):
                    loss = model(x).sum()
        """
    )
    call, option, problem = option_status(analysis, "mixed_precision")
    assert call is None and option is not None and "`args`" in problem
