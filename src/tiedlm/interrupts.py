"""Stop requests: SIGINT (Ctrl-C) and SIGTERM (``kill``, schedulers) set a flag; the training loops act on it.

A signal never raises inside a training step, so the checkpoint written on a stop holds one consistent state:
the loops look at :attr:`StopRequest.requested` between steps (and between evaluation windows), save, and
stop. A *second* signal stops at once (``KeyboardInterrupt``) without writing anything: the last checkpoint
on disk is then the one to resume from, and it is consistent too, since checkpoints are written atomically.
A signal less than :data:`SAME_REQUEST_S` after the one before is the same request reaching the process by
another path (a scheduler that signals every process of a job while ``tiedlm reproduce`` passes its own on):
it is not a second one.

Background jobs started by a non-interactive shell (``nohup tiedlm train ... &``) inherit SIGINT as ignored,
so SIGTERM is the signal that reaches them; both are handled alike. Handlers can only be installed from the
main thread; elsewhere (a library caller's worker thread) the flag is simply never set by a signal.
"""

from __future__ import annotations

import signal
import threading
import time

from .errors import RunInterrupted

__all__ = ["RunInterrupted", "StopRequest", "StopRequested"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
SAME_REQUEST_S = 1.0  # a signal sooner than this after the one before repeats it (module docstring)


class StopRequested(Exception):
    """Raised by a loop that saw the stop flag; the caller saves and reports how to resume."""


class StopRequest:
    """Context manager that turns SIGINT/SIGTERM into a flag while it is active (restoring the handlers after).

    ``budget`` (optional) counts steps down: :meth:`step_done` raises the flag when it reaches zero, the same
    way a signal would (tests and the window budget of :func:`tiedlm.train.run` use it).

    ``second_stops_at_once=False`` only counts the signals (:attr:`signals`): a process that supervises others
    (``tiedlm reproduce``) passes each one on instead of stopping itself."""

    def __init__(self, budget: int | None = None, *, second_stops_at_once: bool = True):
        self.signum: int | None = None
        self.signals = 0
        self.budget = budget
        self.second_stops_at_once = second_stops_at_once
        self._old: dict[int, object] = {}
        self._last_at = 0.0  # when the last signal counted arrived (time.monotonic)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        """Raise :class:`StopRequested` if a stop was asked for."""
        if self.signum is not None:
            raise StopRequested

    def step_done(self, stop_allowed: bool = True) -> None:
        """Count one step against the budget; raise the flag once it is spent (where ``stop_allowed``)."""
        if self.budget is not None:
            self.budget -= 1
            if self.budget <= 0 and stop_allowed and self.signum is None:
                self.signum = 0  # not a signal: the budget ran out

    def _handle(self, signum, frame) -> None:
        now = time.monotonic()
        if self.signals and now - self._last_at < SAME_REQUEST_S:
            return  # the request before, reaching this process by another path
        self._last_at = now
        self.signals += 1
        if self.signum and self.second_stops_at_once:  # a second signal: stop now, write nothing
            raise KeyboardInterrupt
        if not self.signum:
            self.signum = signum

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                old = signal.getsignal(s)
                if old is signal.SIG_IGN:  # ignored by the parent (e.g. SIGINT of a background job): keep it so
                    continue
                self._old[s] = old
                signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()
