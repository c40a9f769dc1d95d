"""Unit tests of analysis/branches.py: rank tests, the branches they guard, collectives."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from migrator.analysis import Audience, ScriptAnalysis, analyze

HEADER = "import torch\nimport torch.distributed as dist\nfrom runtime import Accelerator\naccelerator = Accelerator()\n"


def _analyze(code: str) -> ScriptAnalysis:
    module = cst.parse_module(HEADER + textwrap.dedent(code))
    return analyze(MetadataWrapper(module, unsafe_skip_copy=True))


def _calls(analysis: ScriptAnalysis, func: str) -> list[cst.Call]:
    return [c.node for c in analysis.facts.calls if c.func == func]


@pytest.mark.parametrize(
    "test,expected",
    [
        ("accelerator.is_main_process", Audience.MAIN),
        ("accelerator.is_local_main_process", Audience.MAIN),
        ("self.accelerator.is_main_process", Audience.MAIN),
        ("not accelerator.is_main_process", Audience.OTHERS),
        ("accelerator.process_index == 0", Audience.MAIN),
        ("0 == accelerator.process_index", Audience.MAIN),
        ("rank == 0", Audience.MAIN),
        ("rank != 0", Audience.OTHERS),
        ("rank > 0", Audience.OTHERS),
        ("args.local_rank in (-1, 0)", Audience.MAIN),
        ("args.local_rank in [-1, 0]", Audience.MAIN),
        ("args.local_rank not in (-1, 0)", Audience.OTHERS),
        ("dist.get_rank() == 0", Audience.MAIN),
        ("torch.distributed.get_rank() == 0", Audience.MAIN),
        ('int(os.environ["RANK"]) == 0', Audience.MAIN),
        ('os.environ.get("LOCAL_RANK") == "0"', Audience.MAIN),
        ("is_main_process()", Audience.MAIN),
        ("accelerator.is_main_process and step % 10 == 0", Audience.MAIN),
        ("step % 10 == 0 and not accelerator.is_main_process", Audience.OTHERS),
        ("accelerator.is_main_process or args.debug", None),
        ("rank == -1", None),
        ("step == 0", None),
        ("args.debug", None),
        ("rank == 1", None),
    ],
)
def test_rank_tests(test: str, expected: Audience | None) -> None:
    analysis = _analyze("")
    assert analysis.branches.audience_of_test(cst.parse_expression(test)) is expected


def test_aliases_of_rank_tests_and_ranks() -> None:
    analysis = _analyze("is_main = accelerator.is_main_process\nr = dist.get_rank()\n")
    assert analysis.branches.audience_of_test(cst.parse_expression("is_main")) is Audience.MAIN
    assert analysis.branches.audience_of_test(cst.parse_expression("r == 0")) is Audience.MAIN


def test_branch_of_body_else_and_elif() -> None:
    analysis = _analyze(
        """
        if accelerator.is_main_process:
            a()
        elif other:
            b()
        else:
            c()
        d()
        """
    )
    branches = analysis.branches
    a, b, c, d = (_calls(analysis, n)[0] for n in "abcd")
    assert branches.branch_of(a).audience is Audience.MAIN
    assert branches.branch_of(a).test == "accelerator.is_main_process"
    assert branches.branch_of(b).audience is Audience.OTHERS
    assert branches.branch_of(c).audience is Audience.OTHERS
    assert branches.branch_of(d) is None


def test_early_exit_guard_covers_the_rest_of_the_block() -> None:
    analysis = _analyze(
        """
        def save():
            before()
            if not accelerator.is_main_process:
                return
            after()

        for batch in loader:
            if rank != 0: continue
            inside()
        outside()
        """
    )
    branches = analysis.branches
    assert branches.branch_of(_calls(analysis, "before")[0]) is None
    assert branches.branch_of(_calls(analysis, "after")[0]).audience is Audience.MAIN
    assert branches.branch_of(_calls(analysis, "inside")[0]).audience is Audience.MAIN
    assert branches.branch_of(_calls(analysis, "outside")[0]) is None


def test_branch_stops_at_the_function_but_sees_main_process_decorators() -> None:
    analysis = _analyze(
        """
        if accelerator.is_main_process:
            def helper():
                inner()

        @accelerator.on_main_process
        def log():
            logged()
        """
    )
    branches = analysis.branches
    assert branches.branch_of(_calls(analysis, "inner")[0]) is None
    assert branches.branch_of(_calls(analysis, "logged")[0]).audience is Audience.MAIN


def test_runs_only_on_main_through_the_callers() -> None:
    analysis = _analyze(
        """
        def save_checkpoint():
            torch.save(1, "a.pt")

        def save_everywhere():
            torch.save(2, "b.pt")

        def never_called():
            torch.save(3, "c.pt")

        if accelerator.is_main_process:
            save_checkpoint()
            save_everywhere()
        save_everywhere()
        """
    )
    first, second, third = _calls(analysis, "torch.save")
    assert analysis.branches.runs_only_on_main(first)
    assert not analysis.branches.runs_only_on_main(second)
    assert not analysis.branches.runs_only_on_main(third)


def test_collectives_are_recognised_by_receiver_and_import() -> None:
    analysis = _analyze(
        """
        from accelerate.utils import gather_object
        accelerator.wait_for_everyone()
        self.accelerator.gather(x)
        dist.barrier()
        gather_object(x)
        accelerator.print("no")
        accelerator.backward(loss)
        other.gather(x)
        """
    )
    names = [c.name for c in analysis.branches.collectives]
    assert names == [
        "accelerator.wait_for_everyone()", "self.accelerator.gather()", "dist.barrier()", "gather_object()",
    ]


def test_backward_is_a_collective_once_models_are_prepared() -> None:
    analysis = _analyze("model, opt = accelerator.prepare(model, opt)\naccelerator.backward(loss)\n")
    names = [c.name for c in analysis.branches.collectives]
    assert "accelerator.backward()" in names


def test_collective_reached_through_functions_of_the_file() -> None:
    analysis = _analyze(
        """
        def evaluate():
            return accelerator.gather_for_metrics(x)

        def report():
            evaluate()

        class Trainer:
            def sync(self):
                accelerator.wait_for_everyone()

            def run(self):
                self.sync()

        report()
        evaluate()
        log()
        """
    )
    branches = analysis.branches
    report, evaluate, log = (_calls(analysis, n)[-1] for n in ("report", "evaluate", "log"))
    assert branches.collective_in_function(evaluate) == "accelerator.gather_for_metrics()"
    assert branches.collective_in_function(report) == "evaluate() → accelerator.gather_for_metrics()"
    assert branches.collective_in_function(log) is None
    run = [c.node for c in analysis.facts.calls if c.func == "self.sync"][0]
    assert branches.collective_in_function(run) == "accelerator.wait_for_everyone()"
