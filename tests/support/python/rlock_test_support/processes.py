"""Child processes spoken to one line at a time, every read with a deadline:
a process that hangs fails the test that waits on it instead of hanging it."""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
from typing import IO, Any, List, Mapping, Optional, Sequence

# How much of a process's stderr a failure message quotes: its end.
STDERR_TAIL = 2000


class Silent(AssertionError):
    """A process said nothing within the deadline."""


class Lines:
    """The lines of a process's output, read on a thread into a queue, so
    that every read has a deadline."""

    def __init__(self, stream: IO[str], who: str) -> None:
        self.who = who
        self._queue: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def next(self, within: float) -> Optional[str]:
        """The next line, without its newline; None when the output ended.
        Raises Silent when none came within `within` seconds."""
        try:
            return self._queue.get(timeout=within)
        except queue.Empty:
            raise Silent(f"{self.who} said nothing within {within:g} s") from None

    def pending(self) -> bool:
        """Whether a line (or the end) arrived that was not read yet."""
        return not self._queue.empty()


class Child:
    """A process reading lines on its stdin and answering on its stdout.

    Its environment is ours plus `env`. Its stderr goes to `stderr_path`
    (appended to) when given, else to a pipe read on a thread; either way
    `stderr()` is its end, quoted when a read fails. `popen`: more
    subprocess.Popen arguments (`start_new_session`, or `stderr` to send it
    elsewhere)."""

    def __init__(
        self,
        argv: Sequence[str],
        who: str,
        env: Optional[Mapping[str, str]] = None,
        stderr_path: Optional[str] = None,
        **popen: Any,
    ) -> None:
        self.who = who
        self.stderr_path = stderr_path
        self._stderr: List[str] = []
        self._stderr_reader: Optional[threading.Thread] = None
        if stderr_path is not None:
            with open(stderr_path, "a") as f:
                popen["stderr"] = f
                self.proc = self._popen(argv, env, popen)
        else:
            popen.setdefault("stderr", subprocess.PIPE)
            self.proc = self._popen(argv, env, popen)
            if self.proc.stderr is not None:
                # Read as it comes, so a chatty process never blocks on a full pipe.
                self._stderr_reader = threading.Thread(
                    target=self._stderr.extend, args=(self.proc.stderr,), daemon=True)
                self._stderr_reader.start()
        assert self.proc.stdout is not None
        self.lines = Lines(self.proc.stdout, who)

    @staticmethod
    def _popen(argv: Sequence[str], env: Optional[Mapping[str, str]], popen: Any) -> "subprocess.Popen[str]":
        return subprocess.Popen(
            list(argv),
            env={**os.environ, **env} if env is not None else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            **popen,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, text: str) -> None:
        """Writes `text` as one line."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def line(self, within: float = 10) -> str:
        """The next line; fails when none came within `within` seconds or the
        output ended."""
        try:
            line = self.lines.next(within)
        except Silent as silent:
            raise Silent(f"{silent}{self._quoted_stderr()}") from None
        if line is None:
            try:
                code: Optional[int] = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            raise AssertionError(f"{self.who} ended (exit {code}){self._quoted_stderr()}")
        return line

    def stderr(self) -> str:
        """The end of what the process wrote to stderr so far."""
        if self.stderr_path is not None:
            with open(self.stderr_path) as f:
                return f.read()[-STDERR_TAIL:]
        if self._stderr_reader is not None and self.proc.poll() is not None:
            self._stderr_reader.join(1)  # the rest of it, once the process is gone
        return "".join(self._stderr)[-STDERR_TAIL:]

    def _quoted_stderr(self) -> str:
        said = self.stderr()
        return f": {said}" if said else ""

    def kill(self) -> None:
        """SIGKILL, if it still runs, and reaped."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def die_with_parent() -> None:
    """Run in a child before it starts (`preexec_fn`): it gets SIGTERM when
    its parent dies, even by SIGKILL (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
