"""The documentation stays current: the generated key reference, the links, the README's length."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

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
        base = page.parent  # a table's notes too: render_notes rewrites their links for the page one folder up
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
    assert len(lines) <= 200, len(lines)  # with the BibTeX block at its end
    first_screen = "\n".join(lines[:60])
    assert "bash setup.sh" in first_screen  # the two commands come first


VERDICTS = (  # docs/results.md#verdicts defines them
    "reproduced",
    "direction reproduced, smaller model",
    "direction reproduced, not converged",
    "partly reproduced",
    "matched only with a change the paper rules out",
    "differs",
    "not run",
)
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
        assert row["verdict"].startswith(VERDICTS) and row["verdict"].split(" (")[0].split(":")[0] in VERDICTS, name
        if "±" in row["ours"]:
            assert re.search(r"n = \d", row["ours"]), f"{name}: ± sd without its n"
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


# ------------------------------------------------------------------ every figure traceable to a committed file
FIGURE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+\.\d+)(?![.\d])")
RESULT_FILE = re.compile(r"((?:benchmarks/)?results/[\w/.\-]+\.(?:txt|json|jsonl|md))")
NOT_FIGURES = re.compile(
    r"https?://\S+|eqs?\. [\d.–-]+|\\?\|V\\?\| [\d,]+|torch [\d.]+\S*|\d+\.\d+\.\d+|v\d+\.\d+|Table \d+\.\d+"
)


def _prose(text: str) -> str:
    """A page's text less code blocks, inline code (but the result files it names), table-of-claims rows (checked
    against their pages above), equation numbers, versions and vocabulary sizes."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", lambda m: " ".join(RESULT_FILE.findall(m.group(0))), text)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| ") or "](docs/results" not in ln)
    return NOT_FIGURES.sub("", text)


def _sources(section: str, page: Path) -> str:
    """The text of the files a section names: result files by path, and the files and pages it links."""
    paths = [ROOT / f for f in RESULT_FILE.findall(section)] + [
        ROOT / "benchmarks" / f for f in RESULT_FILE.findall(section)
    ]
    paths += [page.parent / t for t in re.findall(r"\]\(([^)#\s:]+)", section)]
    paths += [f for p in paths if p.is_dir() for f in sorted(p.iterdir()) if f.suffix in (".json", ".jsonl", ".txt")]
    return "\n".join(p.read_text() for p in paths if p.is_file() and p.suffix not in (".png", ".svg"))


def _traced(figure: str, sources: str, section_figures: list[str]) -> bool:
    """``figure`` is in the sources as written, or as a number there that rounds to it (seconds also as minutes
    and hours), or is the ratio of two
    figures of its section or their difference in % (computed from the table beside it)."""
    if figure in sources:
        return True
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    value = float(figure.replace(",", ""))
    numbers = {float(n) for n in re.findall(r"\d+(?:\.\d+)?", sources.replace(",", ""))}
    if any(round(n / unit, decimals) == value for n in numbers for unit in (1, 60, 3600)):  # s, min, h
        return True
    values = [float(f.replace(",", "")) for f in section_figures if f != figure]
    derived = {f"{a / b:.{decimals}f}" for a in values for b in values if b}  # a speed-up
    derived |= {f"{abs(a - b) / b * 100:.{decimals}f}" for a in values for b in values if b}  # a change in %
    return bool(decimals) and figure in derived


@pytest.mark.parametrize("name", ["README.md", "docs/performance.md", "docs/results.md"])
def test_every_figure_of_the_readme_and_performance_pages_is_in_a_file_its_section_names(name):
    """A speed, perplexity or ratio in these pages comes from a committed run, benchmark result or estimate file
    that its section names or links (or is a ratio of two figures beside it): a figure without a source, or one
    that its file no longer holds, fails here."""
    page = ROOT / name
    untraced = []
    for section in re.split(r"\n(?=## )", page.read_text()):
        prose, sources = _prose(section), _sources(section, page)
        figures = FIGURE.findall(prose)
        untraced += [f"{section.splitlines()[0][:40]}: {f}" for f in figures if not _traced(f, sources, figures)]
    assert not untraced, untraced


def test_the_main_jobs_figures_are_its_runs():
    readme = (ROOT / "README.md").read_text()
    real = json.loads((ROOT / "results/reproduce/inan2017-table1-small/real/summary.json").read_text())
    vd = json.loads((ROOT / "results/reproduce/inan2017-table1-small/vd/summary.json").read_text())
    assert f"{real['wall_time_s'] / 60:.0f} min" in readme and f"seed {real['seed']}" in readme
    assert real["test_protocol"].startswith("10 streams") and f"{real['test_ppl']:.2f} (10 streams)" in readme
    assert f"{vd['test_ppl']:.2f} against 87.3" in readme and vd["test_protocol"].startswith("batch 1")
    checks = json.loads((ROOT / "benchmarks/results/selfcheck-cuda-h100.json").read_text())["checks"]
    graphed = next(c for c in checks if c["name"] == "train vd-lstm + REAL (AL, target_grad) [graph]")
    assert f"{graphed['tokens_per_s']:,.0f} tokens/s" in readme


def test_the_readme_states_the_tally_of_its_verdicts():
    rows = _readme_results()
    counts = {v: sum(r["verdict"].startswith(v) for r in rows) for v in VERDICTS}
    counts["direction reproduced"] = sum(r["verdict"].startswith("direction reproduced") for r in rows)
    said = re.search(r"Of (\d+) claims: (.+?)\.\n", (ROOT / "README.md").read_text().replace("\nonly", " only"))
    assert said and int(said[1]) == len(rows)
    for count, verdict in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", said[2]):
        key = {"differ": "differs"}.get(verdict, verdict)
        assert counts[key] == int(count), (verdict, counts)
    assert sum(int(c) for c, _ in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", said[2])) == len(rows)


def test_the_paper_scale_plans_cpu_estimates_are_its_estimate_files():
    page = (ROOT / "docs/results/paper-scale-plan.md").read_text()
    rows = re.findall(r"^\| `([\w-]+)` \| ([\w-]+) \| .* \| ~(\d+) h \|$", page, flags=re.M)
    assert len(rows) == 4
    for table, run, hours in rows:
        estimate = json.loads((ROOT / "results/paper-scale" / table / "estimate.json").read_text())[run]
        assert f"{estimate['estimated_h']:.0f}" == hours and estimate["threads"] == 1, (table, run)
