"""Progress of a long verify(): one line on stderr, rewritten in place, per
run and step ("ckpt_verify: reentrant step 2/3, run 4 of 7, 41 s"), shown
only when stderr is a terminal; off a terminal (CI logs, pipes, pytest)
nothing is printed. It only reports: nothing here decides or stores."""
import sys
import time
from typing import TextIO


class TerminalProgress:
    """Steps of each run as they end, on a terminal line of its own."""

    def __init__(self, stream: TextIO, runs_hint: int = 0):
        self.stream, self.runs_hint = stream, runs_hint
        self.started = time.monotonic()
        self.runs_done = 0
        self.width = 0

    def _show(self, text: str) -> None:
        pad = max(0, self.width - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self.width = len(text)

    def step(self, run_name: str, step: int, steps: int) -> None:
        of = f" of ~{self.runs_hint}" if self.runs_hint else ""
        bar = "#" * step + "." * (steps - step) if steps <= 40 else ""
        self._show(f"ckpt_verify: run {self.runs_done + 1}{of} {run_name} [{bar}] step {step}/{steps}, "
                   f"{time.monotonic() - self.started:.0f} s")

    def done(self, run_name: str) -> None:
        self.runs_done += 1

    def note(self, text: str) -> None:
        """A line of its own (the estimate before training)."""
        self.close()
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


class QuietProgress:
    """Off a terminal: nothing."""

    def step(self, run_name: str, step: int, steps: int) -> None:
        pass

    def done(self, run_name: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def for_stderr(runs_hint: int = 0, stream: TextIO | None = None):
    """TerminalProgress when the stream (default stderr) is a terminal,
    QuietProgress otherwise."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return TerminalProgress(stream, runs_hint) if tty else QuietProgress()
