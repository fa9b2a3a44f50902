"""One exception type for every problem a user can fix.

The CLI turns a :class:`TiedlmError` into a single line ``tiedlm: error: ...``
and an exit code (2 for usage errors, 1 for everything else), never a traceback.
"""


class TiedlmError(Exception):
    """A problem with the user's input or environment, with a message that says how to fix it."""

    exit_code = 1


class UsageError(TiedlmError):
    """Bad command-line arguments or configuration values (exit code 2)."""

    exit_code = 2


class DataError(TiedlmError):
    """A corpus file that is missing, corrupt or cannot be downloaded."""

    exit_code = 1


class RunInterrupted(Exception):
    """A training run stopped early by a signal and can be resumed; the message says how (exit code 130)."""
