"""`[rankN]: ` before each line a worker prints, when several ranks share one terminal.

Done inside the worker (launch/child.py wraps sys.stdout and sys.stderr), not with torchrun's
--tee: tee sends output through log files polled every 0.1 s, which delays lines, delivers
them in bursts (skewing anything timed by its output) and hides the terminal from the script.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

_LINE_ENDS = re.compile(r"(?<=\n)")


def rank_prefix(rank: int) -> str:
    return f"[rank{rank}]: "


class PrefixedStream:
    """A text stream that writes `prefix` at the start of every line, then passes it on.

    Whole lines go out in one write, so lines of different ranks do not mix even when the
    stream underneath is unbuffered (PYTHONUNBUFFERED); a partial line (a progress bar)
    goes out on flush(), as print(..., flush=True) and tqdm do. Everything else (fileno,
    isatty, buffer, encoding) is the wrapped stream's; bytes written to `.buffer` or the
    file descriptor are not prefixed.
    """

    def __init__(self, stream: TextIO, prefix: str) -> None:
        self._stream = stream
        self._prefix = prefix
        self._pending = ""  # the current line, not written yet
        self._started = False  # its prefix is already out (a partial line was flushed)

    def write(self, text: str) -> int:
        self._pending += text
        end = self._pending.rfind("\n") + 1
        if end:
            lines, self._pending = self._pending[:end], self._pending[end:]
            self._emit(lines)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            text, self._pending = self._pending, ""
            self._emit(text)
        self._stream.flush()

    def _emit(self, text: str) -> None:
        pieces = []
        for piece in _LINE_ENDS.split(text):
            if piece:
                pieces.append(piece if self._started else self._prefix + piece)
                self._started = not piece.endswith("\n")
        self._stream.write("".join(pieces))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
