"""Where a Hugging Face encoder's config.json is and the sizes tiedlm reads from it, without importing transformers
(reading a run's config stays instant); and the config transformers builds from it (:func:`body_config`, which
imports transformers when it is first called)."""

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


def is_inline(source: str) -> bool:
    """Whether ``source`` is the HF config itself (JSON text, as a run saves it) rather than where it is."""
    return source.lstrip().startswith("{")


def inline(source: str) -> str:
    """The HF config of ``source`` as one line of JSON (keys sorted), what a run's config.toml keeps."""
    return json.dumps(read_config(source), sort_keys=True)


def where(source: str) -> str:
    """How a message names the config: its path or name, or "kept in the run" for an inline one."""
    return "kept in the run's config.toml" if is_inline(source) else source


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
    """The HF config.json of ``source`` (a file, a model folder, a shipped name, or the JSON itself) as a dict
    (one line for text that is not a JSON object). A model saved by ``tiedlm.hf`` gives its base architecture's
    config: its body is that architecture's."""
    if is_inline(source):
        raw = dict(_parse(source, "the JSON kept in the run's config.toml", key))
    else:
        path = config_path(source, key)
        raw = dict(_read(str(path.resolve()), path.stat().st_mtime_ns, key))
    if raw.get("model_type") == "tiedlm":
        base = raw.get("tiedlm_base")
        if not isinstance(base, str) or base == "tiedlm":
            raise UsageError(f"{key}: a tiedlm.hf model's config needs tiedlm_base, its architecture; got {base!r}")
        raw = {k: v for k, v in raw.items() if not k.startswith("tiedlm_") and k != "architectures"}
        raw["model_type"] = base
    return raw


@lru_cache(maxsize=16)
def _read(path: str, mtime: int, key: str) -> tuple:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, ValueError) as e:
        raise UsageError(f"{key}: cannot read {path} as JSON ({e}); give a Hugging Face config.json") from None
    return _parse(text, path, key)


@lru_cache(maxsize=16)
def _parse(text: str, what: str, key: str) -> tuple:
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{key}: cannot read {what} as JSON ({e}); give a Hugging Face config.json") from None
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise UsageError(f"{key}: {what} has no model_type; give a Hugging Face config.json")
    return tuple(raw.items())


def read_sizes(source: str, key: str = "model.encoder.config") -> dict[str, int]:
    """``hidden``: the model width d; ``positions``: the longest sequence it takes (0: no limit given)."""
    raw = read_config(source, key)
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    hidden = next((text[k] for k in HIDDEN_KEYS if isinstance(text.get(k), int)), None)
    if hidden is None:
        raise UsageError(
            f"{key}: {where(source)} gives no hidden size ({', '.join(HIDDEN_KEYS)}); give a causal LM's config.json"
        )
    positions = next((text[k] for k in POSITION_KEYS if isinstance(text.get(k), int)), 0)
    return {"hidden": hidden, "positions": positions}


def import_transformers():
    """The ``transformers`` module, or a one-line error saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise UsageError(
            "the Hugging Face encoder needs transformers: pip install 'tiedlm[hf]' (or pip install transformers)"
        ) from None
    return transformers


def check_config(source: str, key: str = "model.encoder.config") -> None:
    """One line, before a run starts, where transformers does not know the model type, refuses the config (a
    hidden size its heads do not divide), or the model is not a decoder-only body (T5's encoder-decoder)."""
    body_config(source, key)


def body_config(source: str, key: str = "model.encoder.config"):
    """The HF config of ``source`` for a body fed embeddings: its own token table cut to one row (unused) and
    no special token ids in it (one line for a config that transformers refuses or that is not a causal body's)."""
    transformers = import_transformers()
    raw = read_config(source, key)
    kind = raw["model_type"]
    try:
        config = transformers.AutoConfig.for_model(**raw)
    except Exception as e:  # ValueError, KeyError, huggingface_hub's validation errors: transformers refuses it
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        reason = lines[-1][:160] if lines else type(e).__name__  # the innermost cause, e.g. "The hidden size ..."
        if kind not in transformers.CONFIG_MAPPING:
            reason = f"transformers {transformers.__version__} knows no model type {kind!r}"
        raise UsageError(f"{key}: transformers refuses it ({reason}); give a causal LM's config.json") from None
    if getattr(config, "is_encoder_decoder", False):
        raise UsageError(f"{key}: {kind} is an encoder-decoder model; give a decoder-only (causal) LM's config.json")
    text = config.get_text_config()
    text.vocab_size = 1
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if hasattr(text, key):
            setattr(text, key, None)
    text.use_cache = False
    return config
