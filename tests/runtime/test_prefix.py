"""runtime/launch/prefix.py: every line gets its rank once, whole lines in one write."""

from __future__ import annotations

import io

from runtime.launch.prefix import PrefixedStream, rank_prefix


def test_each_line_once_whole_lines_and_partial_lines_on_flush():
    target = io.StringIO()
    stream = PrefixedStream(target, rank_prefix(1))
    print("loss", 0.5, file=stream)
    stream.write("a\nb\n\nc")
    assert target.getvalue() == "[rank1]: loss 0.5\n[rank1]: a\n[rank1]: b\n[rank1]: \n", "whole lines only"
    stream.flush()
    assert target.getvalue().endswith("[rank1]: c"), "a flush sends the partial line"
    stream.write(" continued\n")
    assert target.getvalue().endswith("[rank1]: c continued\n"), "its rest gets no second prefix"
    assert stream.getvalue is not None and stream.write("") == 0  # the rest is the wrapped stream's
