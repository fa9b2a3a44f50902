"""Where a Hugging Face encoder's config.json is, and the sizes tiedlm reads from it (no transformers import)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ...errors import UsageError

SHIPPED = Path(__file__).resolve().parents[2] / "presets" / "hf"  # configs shipped with tiedlm, by name
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim")  # the model width, by the names architectures give it
POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")


def shipped_configs() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.json"))


def config_path(source: str, key: str = "model.encoder.config") -> Path:
    """The config.json that ``source`` names: the file itself, a model folder holding one, or a shipped name."""
    path = Path(source).expanduser()
    if path.is_dir():
        path = path / "config.json"
    elif not path.exists() and (SHIPPED / f"{source}.json").is_file():
        path = SHIPPED / f"{source}.json"
    if not path.is_file():
        raise UsageError(
            f"{key} = {source!r} is not allowed; expected a config.json, a model folder holding one, or one of the "
            f"shipped configs: {', '.join(shipped_configs())}"
        )
    return path


def read_config(source: str, key: str = "model.encoder.config") -> dict:
    """The HF config.json of ``source`` as a dict (one line for a file that is not a JSON object)."""
    path = config_path(source, key)
    return dict(_read(str(path.resolve()), path.stat().st_mtime_ns, key))


@lru_cache(maxsize=16)
def _read(path: str, mtime: int, key: str) -> tuple:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"{key}: cannot read {path} as JSON ({e}); give a Hugging Face config.json") from None
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise UsageError(f"{key}: {path} has no model_type; give a Hugging Face config.json")
    return tuple(raw.items())


def read_sizes(source: str, key: str = "model.encoder.config") -> dict[str, int]:
    """``hidden``: the model width d; ``positions``: the longest sequence it takes (0: no limit given)."""
    raw = read_config(source, key)
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    hidden = next((text[k] for k in HIDDEN_KEYS if isinstance(text.get(k), int)), None)
    if hidden is None:
        raise UsageError(
            f"{key}: {config_path(source, key)} gives no hidden size ({', '.join(HIDDEN_KEYS)}); give a causal LM's "
            "config.json"
        )
    positions = next((text[k] for k in POSITION_KEYS if isinstance(text.get(k), int)), 0)
    return {"hidden": hidden, "positions": positions}
