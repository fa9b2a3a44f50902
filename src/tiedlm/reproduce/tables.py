"""The papers' tables that ``tiedlm reproduce`` knows, read from the data files ``reproduce/tables/<table>.toml``.

A table file names the table (``title``, ``source``, ``task``), the rows whose difference its page gives per seed
(``pairs``), the baseline of Figure 3's bands (``bands_baseline``), and one ``[[row]]`` per row of the table: the
preset and its ``set`` overrides, the paper's figures (``paper_valid``, ``paper_test``), a short ``note``, the
scales it belongs to (``budget``, ``paper``; both by default), its ``seeds``, ``same_as`` (``TABLE/RUN``: the
row is that row of another table, the same config, so both read one run folder) and ``gpu_epoch_s`` (an epoch's
measured time on a GPU, for the page's estimate of a row not run yet).

A row with seeds runs once per seed, each with ``train.seed=N``: the first as ``ROW``, the others as
``ROW-seedN``; the page gives each row's mean ± sd over its seeds. The notes printed under a table are Markdown
beside the pages (``docs/results/notes/<table>.md``), not part of the package: see :mod:`.notes`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import UsageError

SCALES = ("budget", "paper")
SEEDED = re.compile(r"^(?P<row>.+)-seed(?P<seed>\d+)$")  # run ROW-seedN: row ROW at another seed

# The budget rows train in fp32 on every machine: where the CPU has bf16 (AVX512-BF16), "auto" would train in
# bf16 there, and a table whose rows were trained on different machines would then compare precisions as well
# as models; a row whose `set` names train.precision keeps its own
BUDGET_PRECISION = "train.precision=fp32"
ROW_KEYS = {"name", "preset", "set", "seeds", "paper_valid", "paper_test", "note", "same_as", "scales", "gpu_epoch_s"}
TABLE_KEYS = {"title", "source", "task", "bands_baseline", "pairs", "row"}


@dataclass(frozen=True)
class RunSpec:
    name: str
    preset: str  # a language-model preset; "" for the tagger and the translator (their defaults)
    overrides: tuple[str, ...] = ()
    paper: tuple[float | None, float | None] = (None, None)  # the paper's (valid, test) figure for this row
    note: str = ""
    task: str = "lm"  # lm (tiedlm train) | tag (tiedlm tag train) | translate (tiedlm translate train)
    # "TABLE/RUN": this row is that row of another table (the same config, checked by a test), so both read,
    # train and publish one run folder, RUNS/TABLE/RUN, instead of training the same model twice
    same_as: str = ""
    gpu_epoch_s: float | None = None  # an epoch's measured time on a GPU (the page's estimate while not run)

    def folder(self, table_name: str) -> Path:
        """This row's run folder under a ``--runs`` folder (its own, or the row it is the same as)."""
        return Path(self.same_as) if self.same_as else Path(table_name) / self.name


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    source: str
    runs: dict[str, tuple[RunSpec, ...]] = field(default_factory=dict)  # scale -> runs
    bands_baseline: str = ""  # a run's name: the page shows Figure 3's bands of the finished runs against it
    # (baseline, other) row names whose difference the page gives per seed, with its mean and whether its sign
    # held at every seed; a row's seeds are the runs named ROW and ROW-seedN (reproduce.page.seed_groups)
    pairs: tuple[tuple[str, str], ...] = ()


def _runs_of_row(row: dict, task: str, scale: str) -> list[tuple[int, RunSpec]]:
    """(seed index, run) for each seed of one ``[[row]]`` at ``scale``."""
    sets = tuple(row.get("set", ()))
    if scale == "budget" and not any(s.startswith("train.precision=") for s in sets):
        sets = (BUDGET_PRECISION, *sets)  # unless the row names its precision itself
    seeds = row.get("seeds") or [None]
    runs = []
    for i, seed in enumerate(seeds):
        name = row["name"] if i == 0 else f"{row['name']}-seed{seed}"
        overrides = sets if seed is None else (*sets, f"train.seed={seed}")
        paper = (row.get("paper_valid"), row.get("paper_test"))
        first = {"paper": paper, "note": row.get("note", ""), "same_as": row.get("same_as", "")} if i == 0 else {}
        own = {"task": task, "gpu_epoch_s": row.get("gpu_epoch_s")} | first
        runs.append((i, RunSpec(name, row.get("preset", ""), overrides, **own)))
    return runs


def load_table(path: Path) -> Table:
    """A :class:`Table` from its data file; an unknown key is an error naming the file and the key."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    name = path.stem
    unknown = set(data) - TABLE_KEYS
    for row in data.get("row", []):
        unknown |= {f"row.{k}" for k in set(row) - ROW_KEYS}
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    task = data.get("task", "lm")
    runs = {}
    for scale in SCALES:
        # the first seed of every row, then the second of every row that has one, and so on
        ordered = [
            r for row in data["row"] if scale in row.get("scales", SCALES) for r in _runs_of_row(row, task, scale)
        ]
        runs[scale] = tuple(spec for _, spec in sorted(ordered, key=lambda r: r[0]))
    pairs = tuple(tuple(p) for p in data.get("pairs", ()))
    return Table(name, data["title"], data["source"], runs, bands_baseline=data.get("bands_baseline", ""), pairs=pairs)


def _load_all() -> dict[str, Table]:
    folder = resources.files(__package__) / "tables"
    return {
        t.name: t
        for t in (load_table(Path(str(p))) for p in sorted(folder.iterdir(), key=str) if p.name.endswith(".toml"))
    }


TABLES: dict[str, Table] = _load_all()


def table(name: str) -> Table:
    """A known table by name, or a table file of one's own (``PATH.toml``, the same format)."""
    if name.endswith(".toml") and Path(name).is_file():
        return load_table(Path(name))
    if name not in TABLES:
        import difflib

        close = difflib.get_close_matches(name, TABLES, n=3, cutoff=0.5)
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise UsageError(f"unknown table {name!r}{hint}; `tiedlm reproduce --list` names them all")
    return TABLES[name]
