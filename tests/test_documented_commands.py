"""Every `tiedlm ...` command written in a code block of the README and the docs parses as written, and its
--set settings are valid for the preset or task it names (so a renamed key or flag cannot leave a stale manual)."""

import re
import shlex
from pathlib import Path

import pytest

from tiedlm import reproduce as rp
from tiedlm.cli.main import build_parser
from tiedlm.tasks.lm.config import Config
from tiedlm.tasks.tagging import TaggerConfig
from tiedlm.tasks.translation import TranslationConfig

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                command = line.split("&& ")[-1].strip()
                if command.startswith("tiedlm "):
                    found.append((f"{page.name}: {command}", shlex.split(command, comments=True)[1:]))
    return found


COMMANDS = documented_commands()


def test_the_manual_has_commands():
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_parses_and_its_settings_are_valid(where, argv):
    args = build_parser().parse_args(argv)  # a UsageError (one line) names what is wrong
    sets = list(getattr(args, "set", []) or [])
    if argv[0] == "train" and args.config:
        Config.load(args.config).with_overrides(sets)
    elif argv[:2] == ["tag", "train"]:
        TaggerConfig().with_overrides(sets)
    elif argv[:2] == ["translate", "train"]:
        TranslationConfig().with_overrides(sets)
    elif argv[0] == "reproduce" and args.table:
        runs = [f"{t}/{r.name}" for t in args.table for r in rp.table(t).runs[args.scale]]
        runs += [r.split("/")[1] for r in runs] if len(args.table) == 1 else []
        assert set(args.only or []) <= set(runs), where
