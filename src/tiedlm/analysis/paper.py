"""The paper's published perplexities (``paper_results.json``, with its source) and matching runs to them."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

SIZES = {200: "small", 650: "medium", 1500: "large"}


@lru_cache(maxsize=1)
def paper_results() -> dict:
    """{"source": str, "results": [{"data", "size", "model", "valid", "test", ["params"]}, ...]}."""
    return json.loads(resources.files("tiedlm.analysis").joinpath("paper_results.json").read_text())


# Inan et al.'s names of their four variants: (model.output, loss.augmented) -> name
VARIANTS = {("full", False): "VD", ("full", True): "AL", ("tied", False): "RE", ("tied", True): "REAL"}


def variant_name(augmented: bool, output: str) -> str:
    """VD / AL / RE / REAL for a (loss.augmented, model.output) pair (other output layers: their name)."""
    return VARIANTS.get((output, augmented), f"{output}{'+AL' if augmented else ''}")


def paper_row(cfg) -> dict | None:
    """The paper's Table 1/2 row for a run's config: same corpus, size (by hidden units) and variant."""
    size = SIZES.get(getattr(cfg.model.encoder, "hidden_size", None))
    model = variant_name(cfg.loss.augmented, cfg.model.output.name)
    for row in paper_results()["results"]:
        if row["data"] == cfg.data.name and row["size"] == size and row["model"] == model:
            return row
    return None
