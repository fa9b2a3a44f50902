"""The documentation stays current: the generated key reference, the links, the README's length."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_key_reference_is_generated_from_the_current_configs():
    tool = _tool("make_config_reference")
    assert tool.PAGE.read_text() == tool.page(), "docs/config-keys.md is stale: python tools/make_config_reference.py"


def test_every_setting_is_in_the_reference_with_its_default():
    from tiedlm.config import Config
    from tiedlm.models.encoders import ENCODERS
    from tiedlm.models.outputs import OUTPUTS
    from tiedlm.optimizers import OPTIMIZERS

    text = (ROOT / "docs" / "config-keys.md").read_text()
    cfg = Config()
    for section in ("data", "model", "loss", "train"):
        for key, value in vars(getattr(cfg, section)).items():
            shown = f"`name = {value.name!r}`" if key in ("encoder", "output", "optimizer") else f"`{value!r}`"
            assert f"| `{section}.{key}` | " in text and shown in text, (section, key)
    for registry in (ENCODERS, OUTPUTS, OPTIMIZERS):  # every registered component and each of its own keys
        for entry in registry:
            assert f"[{registry.key}]` name = `{entry.name}`" in text, entry.name
            for key, value in vars(entry.config()).items():
                assert f"| `{registry.key}.{key}` | " in text and f"`{value!r}`" in text, (entry.name, key)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_relative_links_and_anchors_in_readme_and_docs_resolve():
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]+)(?:#([^)]*))?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = page.parent / target
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and path.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, broken


def test_slug_rule():
    assert _slug("Why REAL trails VD: the augmented loss together with b = 0") == (
        "why-real-trails-vd-the-augmented-loss-together-with-b--0"
    )


def test_readme_is_a_manual_that_fits_a_few_screens():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    first_screen = "\n".join(lines[:60])
    assert "bash setup.sh" in first_screen  # the two commands come first


def _committed_figures() -> set[str]:
    """Every number in the committed result files (JSON), to 2 decimals; fractions also as percentages; and the
    POS table's sparse-minus-dense test differences in points, which the README quotes."""
    import json

    found: set[str] = set()

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            found.add(f"{v:.2f}")
            if 0 < v < 1:
                found.add(f"{100 * v:.2f}")

    for path in (ROOT / "results").rglob("*.json"):
        walk(json.loads(path.read_text()))
    pos = ROOT / "results" / "reproduce" / "demeester2018-pos"
    acc = {p.name: json.loads((p / "summary.json").read_text())["test_accuracy"] for p in pos.iterdir() if p.is_dir()}
    for sparse, dense in [("0.5", 64), ("0.25", 32), ("0.125", 16), ("0.0625", 8)]:
        for seed in ("", "-seed2", "-seed3"):
            a, b = f"sparse-128-{sparse}{seed}", f"dense-{dense}{seed}"
            if a in acc and b in acc:
                found.add(f"{100 * (acc[a] - acc[b]):.2f}")
    return found


def test_every_figure_of_the_readme_results_table_is_in_a_committed_run_file():
    """The two "ours" columns hold only numbers that committed run files hold: a changed or invented figure
    fails here."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Results") :].split("\n\n")[2]
    rows = [r.split("|")[1:-1] for r in table.splitlines()[2:]]
    assert len(rows) >= 10
    figures = _committed_figures()
    for row in rows:
        for cell in row[2:4]:
            for number in re.findall(r"\d+\.\d\d\b", cell):
                assert number in figures, f"{number} in the README's row {row[0].strip()!r} is in no committed run file"
