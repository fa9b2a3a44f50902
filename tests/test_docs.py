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
    from tiedlm.models.encoders import ENCODERS
    from tiedlm.models.outputs import OUTPUTS
    from tiedlm.optimizers import OPTIMIZERS
    from tiedlm.tasks.lm.config import Config

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
    pages += [ROOT / "results" / "README.md", ROOT / "benchmarks" / "README.md"]
    broken = []
    for page in pages:
        # a table's notes are rendered into its page one folder up: their links are relative to the page
        base = page.parent.parent if page.parent.name == "notes" else page.parent
        for target, anchor in re.findall(r"\]\(([^)#\s]+)(?:#([^)]*))?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = base / target
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
    assert len(lines) <= 150, len(lines)
    first_screen = "\n".join(lines[:60])
    assert "bash setup.sh" in first_screen  # the two commands come first


VERDICTS = ("reproduced at smaller scale", "reproduced", "differs", "not run")
NUMBER = re.compile(r"[+−-]?\d+(?:\.\d+)?")


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def _readme_results() -> list[dict]:
    """The README's Results table: one dict per row with its cells and the text of the page it links to."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Results") :].split("\n## ", 1)[0]
    table = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith(("| claim", "| ---"))]
    rows = []
    for line in table:
        claim, paper, ours, verdict, page = (c.strip() for c in line.strip("|").split(" | "))
        target = re.search(r"\]\(([^)#]+)", page)[1]
        rows.append(
            {"claim": claim, "paper": paper, "ours": ours, "verdict": verdict, "page": (ROOT / target).read_text()}
        )
    return rows


def test_the_readme_results_table_has_one_short_row_per_claim_and_each_number_is_on_its_page():
    """Every number of the table is on the page the row links to (pages are drawn from the committed run files:
    test_reproduce checks each page against them), a verdict is one of four, and a "differs (+X)" gap is ours
    minus the paper's figure: a changed or invented number fails here."""
    rows = _readme_results()
    assert len(rows) >= 12 and len({r["claim"] for r in rows}) == len(rows)
    for row in rows:
        name = row["claim"]
        assert all(len(row[c].split()) <= 15 for c in ("claim", "paper", "ours", "verdict")), name
        assert row["verdict"].startswith(VERDICTS), name
        page = row["page"].replace("−", "-")
        gap = re.fullmatch(r"differs \(([+−-]\d+\.\d+)\)", row["verdict"])
        checked = [row["paper"], row["ours"], "" if gap else row["verdict"]]
        for cell in checked:
            for number in NUMBER.findall(cell):
                digits = number.lstrip("+−-")
                if "." not in digits and len(digits) < 2:
                    continue  # a count such as "5 seeds" or "b = 0"
                assert re.search(rf"(?<![\d.]){re.escape(digits)}(?![\d])", page), f"{number} ({name}) not on its page"
        if gap:
            ours, paper = _number(NUMBER.findall(row["ours"])[0]), _number(NUMBER.findall(row["paper"])[0])
            decimals = len(gap[1].split(".")[1])
            assert f"{ours - paper:+.{decimals}f}" == gap[1].replace("−", "-"), name
