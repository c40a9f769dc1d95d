"""The equivalence runner's reading of teed output (runner.tagged_lines / parse_steps)."""

from tests.equivalence.runner import parse_steps, tagged_lines


def test_a_line_torchrun_glued_to_another_ranks_partial_line_keeps_its_rank():
    # Seen on a loaded machine: tee polled rank 1's log mid-line and rank 0's step came after it.
    output = "[default0]:step 0 loss 0.5 lr 0.1\n[default1]:warn[default0]:step 1 loss 0.4 lr 0.1\n"
    assert list(tagged_lines(output)) == [(0, "step 0 loss 0.5 lr 0.1"), (1, "warn"), (0, "step 1 loss 0.4 lr 0.1")]
    assert [s.step for s in parse_steps(output)[0]] == [0, 1]


def test_untagged_output_is_rank_zeros():
    assert {r: [s.loss for s in steps] for r, steps in parse_steps("step 3 loss 0.25 lr 0.1\n").items()} == {0: [0.25]}
