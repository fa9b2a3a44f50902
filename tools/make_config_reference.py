"""Write docs/config-keys.md: every setting of every task, from the typed configs themselves.

Each row is one dataclass field: its key as ``--set`` takes it, its type, its default and the comment written
beside it in the source (the comment is the documentation, so the two cannot drift; a test re-generates the
page and compares).

    python tools/make_config_reference.py            # rewrite docs/config-keys.md
    python tools/make_config_reference.py --check    # exit 1 if the page is stale
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "config-keys.md"


def field_comments(cls) -> dict[str, str]:
    """The comment on each field's line (``name: type = default  # comment``), or the comment lines just above;
    fields inherited from a base dataclass take the base's comments."""
    out = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base) and base is not object:
            out.update(_own_comments(base))
    return out


def _own_comments(cls) -> dict[str, str]:
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    out = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = lines[node.lineno - 1]
            comment = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            above, k = [], node.lineno - 2
            while k >= 0 and lines[k].strip().startswith("#"):
                above.insert(0, lines[k].strip().lstrip("# ").strip())
                k -= 1
            out[node.target.id] = ": ".join(part for part in (" ".join(above), comment) if part)
    return out


def _type(f) -> str:
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def table(cls, prefix: str) -> list[str]:
    from tiedlm.registry import allowed_values, declared

    comments = field_comments(cls)
    rows = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        meaning = comments.get(f.name, "")
        if option := f.metadata.get("option"):  # a command-line option too: its help says what it is
            meaning = "; ".join(part for part in (meaning, option["help"], f"option `{option['flag']}`") if part)
        if bounds := declared(cls, f.name):  # what it allows, as registry.check_settings holds it to
            meaning = "; ".join(part for part in (meaning, f"allowed: {allowed_values(bounds)}") if part)
        meaning = meaning.replace("|", "\\|")
        if f.metadata.get("resumable"):  # a resumed run may change it (`--resume RUN --set KEY=VALUE`)
            meaning += " *(resumable: `--resume` accepts a new value)*"
        if dataclasses.is_dataclass(default):  # a component table: its keys are listed per component below
            rows.append(f"| `{prefix}{f.name}` | table | `name = {default.name!r}` | {meaning} |")
            continue
        rows.append(f"| `{prefix}{f.name}` | {_type(f)} | `{default!r}` | {meaning} |")
    return rows


def components(registry) -> list[str]:
    """One table per registered component: its name, summary and keys (``--set model.output.KEY=VALUE``)."""
    out = []
    for entry in registry:
        out += [f"### `[{registry.key}]` name = `{entry.name}`", "", entry.summary, ""]
        keys = table(entry.config, f"{registry.key}.")
        out += (keys if len(keys) > 2 else ["No keys of its own."]) + [""]
    return out


def page() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from tiedlm.tasks.lm.config import Config
    from tiedlm.tasks.subspace.config import SubspaceExperimentConfig
    from tiedlm.tasks.tagging.config import TaggerConfig
    from tiedlm.tasks.translation.config import TranslationConfig

    out = [
        "# Every setting, generated from the typed configs",
        "",
        "Written by `python tools/make_config_reference.py` from the dataclasses and the comments beside their "
        "fields (*allowed*: the values a setting is held to, however it is set); a test fails when this page is "
        "stale. Explanations with the papers' equations: "
        "[configuration.md](configuration.md).",
        "",
    ]
    for title, cls, cmd in (
        ("Language models", Config, "tiedlm train PRESET"),
        ("POS tagger", TaggerConfig, "tiedlm tag train"),
        ("Translator", TranslationConfig, "tiedlm translate train"),
        ("Subspace experiment", SubspaceExperimentConfig, "tiedlm experiment subspace"),
    ):
        cfg = cls()
        for section in dataclasses.fields(cfg):
            out += [f"## {title}: `[{section.name}]`", "", f"`{cmd} --set {section.name}.KEY=VALUE`", ""]
            out += table(type(getattr(cfg, section.name)), f"{section.name}.") + [""]
            for name, registry in cls.COMPONENTS.get(section.name, {}).items():
                if cls is Config:  # each registered component's keys, once
                    out += components(registry)
                else:
                    out += [f"`[{section.name}.{name}]`: any {registry.kind} and its keys, as listed above.", ""]
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if docs/config-keys.md is stale")
    args = p.parse_args()
    text = page()
    if args.check:
        stale = not PAGE.is_file() or PAGE.read_text() != text
        print(f"{PAGE} is {'stale: run python tools/make_config_reference.py' if stale else 'current'}")
        return 1 if stale else 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
