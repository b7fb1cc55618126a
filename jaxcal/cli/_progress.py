"""Progress of ``jaxcal report``'s long phases on stderr: a heartbeat, not silence.

A phase (reading a file, one compiled report computation) cannot say how far it is, so
the line says how long it has run: on a terminal ``jaxcal: MESSAGE ... 12 s`` is redrawn
in place every second; elsewhere (a log file, CI) a line ``jaxcal: MESSAGE ... 30 s`` is
added every ``interval`` seconds. The last line is ``jaxcal: MESSAGE ... done (T s)`` (or
``failed``). ``delay``
shows a phase only once it has run that long, so that a quick phase, or a bad file that
fails at once, prints nothing (an error stays one line on stderr).
"""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    """``with progress(message, delay=0.0): ...`` on stderr, unless quiet."""

    def __init__(self, quiet: bool, *, interval: float = 15.0):
        self.quiet, self.interval = quiet, interval

    def __call__(self, message: str, *, delay: float = 0.0) -> Progress:
        self.message, self.delay = message, delay
        return self

    def _write(self, text: str) -> None:
        print(text, end="", file=sys.stderr, flush=True)

    def _tick(self) -> None:
        """The heartbeat thread: show the phase after ``delay``, then its running time."""
        tty = sys.stderr.isatty()
        if self.delay > 0:
            if self.stop.wait(self.delay):
                return
            self._show()
        step = 1.0 if tty else self.interval
        while not self.stop.wait(step):
            took = time.perf_counter() - self.start
            self.beats = "\r" if tty else "\n"
            self._write(f"{self.beats}jaxcal: {self.message} ... {took:.0f} s")

    def _show(self) -> None:
        self.shown = True
        self._write(f"jaxcal: {self.message} ...")

    def __enter__(self) -> Progress:
        self.start = time.perf_counter()
        self.shown, self.beats = False, ""
        if self.quiet:
            return self
        if self.delay <= 0:
            self._show()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, exc_type, *_) -> bool:
        if self.quiet:
            return False
        self.stop.set()
        self.thread.join()
        if self.shown:
            took = time.perf_counter() - self.start
            if self.beats:  # the last line reads "jaxcal: MESSAGE ... done (T s)"
                self._write(f"{self.beats}jaxcal: {self.message} ...")
            self._write(f" done ({took:.1f} s)\n" if exc_type is None else " failed\n")
        return False
