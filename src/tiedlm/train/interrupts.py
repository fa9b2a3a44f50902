"""Stop requests live in :mod:`tiedlm.interrupts` (the base layer, so that evaluation can honour them too);
re-exported here for the training loops and earlier imports."""

from ..interrupts import SAME_REQUEST_S, SIGNALS, RunInterrupted, StopRequest, StopRequested

__all__ = ["SAME_REQUEST_S", "SIGNALS", "RunInterrupted", "StopRequest", "StopRequested"]
