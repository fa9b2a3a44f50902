"""``tiedlm reproduce``: the papers' tables as lists of runs, started, resumed or skipped, and rendered.

A table is a list of :class:`RunSpec` (preset + overrides + seed, with the paper's numbers for that row) at a
scale: ``budget`` (what this 2-core CPU can train) or ``paper`` (the papers' settings, for a GPU). Each run is
an ordinary ``tiedlm train`` run in ``RUNS/<table>/<run>``: missing runs are started, interrupted ones
resumed exactly (``train --resume``), finished ones skipped; a finished run whose table now asks more epochs
(``short``) is resumed for the rest. The page ``OUT/<table>.md`` sets ours beside
the paper's numbers, with parameters, epochs, wall time, device, tokens/s, the exact command of every run
and the validation curves.

The package follows the command's steps: ``tables`` (what the papers report and what we run), ``plan`` (the runs
on disk and their commands), ``estimate`` (``--dry-run``), ``execute`` (training them), ``publish`` (the
committed results and Figure 3's bands) and ``page`` (the results page).
"""

from ..errors import UsageError
from .estimate import ESTIMATE, estimate_rows, machine_load, save_estimates
from .execute import execute
from .page import render
from .plan import (
    data_settings,
    fraction_left,
    plan,
    rerun_command,
    run_config,
    run_status,
    skip_published,
    train_command,
)
from .publish import BANDS, PUBLISHED, band_analysis, publish, publish_bands, publish_estimates
from .tables import BUDGET_PRECISION, SCALES, TABLES, RunSpec, Table, table

# the package's names (the command's steps' functions, imported here so that each, not its module, is the name)
__all__ = ["UsageError", "ESTIMATE", "estimate_rows", "machine_load", "save_estimates", "execute", "render"]
__all__ += ["data_settings", "fraction_left", "plan", "rerun_command", "run_config", "run_status", "skip_published"]
__all__ += ["train_command", "BANDS", "PUBLISHED", "band_analysis", "publish", "publish_bands", "publish_estimates"]
__all__ += ["BUDGET_PRECISION", "SCALES", "TABLES", "RunSpec", "Table", "table"]
