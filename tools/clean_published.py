"""Make published run files and benchmark results portable: machine paths become the paths a user types.

``python tools/clean_published.py [FILE_OR_FOLDER ...]`` (default: ``results/`` and ``benchmarks/results/``)
rewrites, in place, every absolute path of the machine that made a file by :func:`tiedlm.paths.portable`: a corpus
folder becomes ``$TIEDLM_DATA/ptb``, a run folder ``runs/TABLE/RUN``. ``tiedlm reproduce --publish`` writes new
runs by the same rule; ``tests/test_published.py`` checks that no published file holds a machine path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tiedlm.paths import machine_paths, portable

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [ROOT / "results", ROOT / "benchmarks" / "results"]
TEXT = {".json", ".jsonl", ".log", ".toml", ".txt", ".md", ".csv"}


def files(targets: list[Path]):
    for target in targets:
        found = [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file())
        yield from (p for p in found if p.suffix in TEXT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    left = []
    for path in files(args.targets):
        text = path.read_text(encoding="utf-8")
        if (new := portable(text)) != text:
            path.write_text(new, encoding="utf-8")
            print(f"cleaned {path}")
        left += [f"{path}: {p}" for p in machine_paths(new)]
    for line in left:
        print(f"machine path left in {line}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
