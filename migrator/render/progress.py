"""A progress bar on stderr for long runs at a terminal; nothing at all otherwise.

Piped output, CI logs and machine formats never see it (and never import rich). It is
transient: the bar is erased before the results are printed.
"""

from __future__ import annotations

import os
import time
from typing import Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")

MIN_FILES = 20  # below this a run is quick; a bar would only flicker
_INTERVAL = 0.1  # seconds between redraws


def wanted(stream: TextIO) -> bool:
    """Whether `stream` is a terminal that can redraw a line."""
    if os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


class ProgressBar:
    """Counts results as they arrive; drawn only when enabled and the run is long enough.

    `start(total)` is handed to the api as its `on_total`; `track()` wraps the results.
    """

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self._progress = None
        self._task = None
        self._drawn = 0.0

    def start(self, total: int) -> None:
        if not self.enabled or total < MIN_FILES:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self.stream, highlight=False, emoji=False, markup=False)
        # No refresh thread: workers fork from this process, and forking while another
        # thread holds a lock can deadlock the child.
        self._progress = Progress(
            TextColumn("Migrating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=True, auto_refresh=False, redirect_stdout=False, redirect_stderr=False,
        )
        self._task = self._progress.add_task("files", total=total)
        self._progress.start()
        self._progress.refresh()

    def track(self, results: Iterable[T]) -> Iterator[T]:
        """`results` unchanged, advancing the bar by one for each."""
        try:
            for result in results:
                if self._progress is not None:
                    self._advance()
                yield result
        finally:
            self.close()

    def _advance(self) -> None:
        self._progress.advance(self._task)
        now = time.monotonic()
        if now - self._drawn >= _INTERVAL:
            self._drawn = now
            self._progress.refresh()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
