"""Rewrite run folders written by older tiedlm versions to today's layout, once, in place.

    python tools/migrate_runs.py RUN_OR_FOLDER [...]   # every run folder at or below each path

What it rewrites (a folder already in today's layout is left alone, so running it twice changes nothing):

- the settings: ``config.json`` (flat keys) or a ``config.toml`` with flat keys, the language model's old flat
  ``[model]`` keys (``encoder = "awd-lstm"``, ``hidden_size``, ``drill_depth``, ``tied_bias`` ...) and ``[train]``
  keys (``optimizer = "nt-asgd"``, ``nonmono``, ``finetune_epochs``), the translator's flat output-layer keys
  (``tied_bias``, ``drill_*``, ``output_options``), the subspace experiment's ``optimizer = "sgd" | "adam"`` and
  ``momentum``: into today's sections and component tables, saved as ``config.toml`` with the run's ``task``
  (which older folders did not record: it is read off their files, as tiedlm once did);
- the checkpoints: a tagger's or translator's ``checkpoint.safetensors`` becomes ``checkpoints/last.safetensors``;
  a checkpoint from before the one training loop gets the loop's position metadata, and the best weights it holds
  inside become ``checkpoints/best.safetensors``; a carried state saved as ``state.N.h/.c`` is renamed
  ``state.N.0/.1``, and the CPU generator's state saved as ``rng`` (a tagger's, a translator's) ``rng.torch``;
  a language model's NT-ASGD state from before it kept where its average began (``averaged_from``) gets it from
  the metrics lines' stages (the average's first entry follows the SGD epochs');
- the summary: one from before runs recorded their device gets the device its log's first line names (a
  tagger's: the CPU).

The tiedlm readers of these older layouts were removed from the package once its own results were migrated.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tomllib
from pathlib import Path

from tiedlm.checkpoint_file import load_checkpoint, save_checkpoint
from tiedlm.registry import field_names, tasks
from tiedlm.run_dir import RunDir, write_text_atomic

SCHEMA = "tiedlm.train.loop/1"
# the LM's old flat [model] keys -> (component table, the layer it belonged to or None for any, its key)
OUTPUT_KEYS = {"tied_bias": ("tied", "bias"), "joint_size": ("dual", "joint_size")} | {
    f"drill_{k}": ("drill", k)
    for k in ("depth", "activation", "dropout", "variational", "residual_embedding", "residual_previous", "init_range")
}
TRAIN_KEYS = {"nonmono": ("nt-asgd", "nonmono"), "finetune_epochs": ("nt-asgd", "finetune_epochs")}
TRANSLATOR_OUTPUT_KEYS = {"tied_bias": "bias", "joint_size": "joint_size"} | {
    f"drill_{k}": k for k in ("depth", "activation", "dropout", "variational", "init_range")
}
SUBSPACE_OPTIMIZERS = {"sgd": ({}, "sum_over_time"), "adam": ({"beta2": 0.999}, "mean")}


def task_of(folder: Path, raw: dict) -> str:
    """The task of an older run folder, by its files or, in a published folder (settings, metrics and summary
    only), by its settings' keys (today's folders record it in config.toml)."""
    keys = set(raw) | {k for v in raw.values() if isinstance(v, dict) for k in v}
    if (folder / "tags.txt").is_file() or "min_count" in keys:
        return "tag"
    if any(folder.glob("spm.*.model")) or "source_lang" in keys:
        return "translate"
    if (folder / "subspace.csv").is_file() or (folder / "points").is_dir() or "slice_words" in keys:
        return "subspace"
    return "lm"


def sectioned(raw: dict, cls) -> dict:
    """Flat keys moved into the section of the settings class ``cls`` that has them."""
    sections = cls.section_names()
    defaults, out = cls(), {k: dict(v) for k, v in raw.items() if k in sections}
    for key, value in ((k, v) for k, v in raw.items() if k not in sections):
        homes = [s for s in cls.section_names() if key in field_names(getattr(defaults, s))]
        if not homes:
            raise SystemExit(f"{key!r} belongs to no section of today's {cls.task_info.noun} settings")
        out.setdefault(homes[0], {})[key] = value
    return out


def lm_model(model: dict) -> dict:
    from tiedlm.models.encoders import ENCODERS
    from tiedlm.models.outputs import OUTPUTS

    encoder, output = (model.pop(k, d) for k, d in (("encoder", ENCODERS.names()[0]), ("output", "full")))
    encoder = {"name": encoder} if isinstance(encoder, str) else dict(encoder)
    output = {"name": output} if isinstance(output, str) else dict(output)
    for old, (layer, key) in OUTPUT_KEYS.items():
        if old in model and (value := model.pop(old)) is not None and output["name"] == layer:
            output[key] = value
    encoder_keys = {k for e in ENCODERS for k in field_names(e.config)}
    for key in [k for k in model if k in encoder_keys]:
        value = model.pop(key)
        if key in field_names(ENCODERS[encoder["name"]].config):
            encoder[key] = value
    assert OUTPUTS[output["name"]]  # a layer today's tiedlm knows
    return model | {"encoder": encoder, "output": output}


def lm_train(train: dict) -> dict:
    value = train.get("optimizer", "sgd")
    table = {"name": value} if isinstance(value, str) else dict(value)
    for old, (name, key) in TRAIN_KEYS.items():
        if old in train and (value := train.pop(old)) is not None and table["name"] == name:
            table[key] = value
    return train | {"optimizer": table}


def translator_model(raw: dict) -> dict:
    from tiedlm.tasks.translation.config import translator_output

    model = dict(raw.get("model", {}))
    for where in (raw, model):
        for old in [*TRANSLATOR_OUTPUT_KEYS, "output_options", "output"]:
            if old in where and not (old == "output" and isinstance(where[old], dict)):
                model[old] = where.pop(old)
    if isinstance(model.get("output"), str) or any(k in model for k in [*TRANSLATOR_OUTPUT_KEYS, "output_options"]):
        keys = {new: model.pop(old) for old, new in TRANSLATOR_OUTPUT_KEYS.items() if old in model}
        name = model.pop("output", "tied")
        model["output"] = translator_output(name, "migration", **keys, **model.pop("output_options", {})).to_dict()
    return raw | ({"model": model} if model else {})


def subspace_optimizer(raw: dict) -> dict:
    if isinstance(raw.get("optimizer"), str) or "momentum" in raw:
        name, momentum = raw.pop("optimizer", "sgd"), raw.pop("momentum", 0.0)
        keys, reduction = SUBSPACE_OPTIMIZERS[name]
        raw["optimizer"] = {"name": name, **keys, **({"momentum": momentum} if momentum else {})}
        raw.setdefault("loss_reduction", reduction)
    return raw


def saved_settings(folder: Path) -> dict:
    files, legacy = RunDir(folder), folder / "config.json"
    if files.config.is_file():
        return tomllib.loads(files.config.read_text(encoding="utf-8"))
    return json.loads(legacy.read_text(encoding="utf-8")) if legacy.is_file() else {}


def migrate_config(folder: Path, task: str) -> bool:
    files, legacy = RunDir(folder), folder / "config.json"
    raw = saved_settings(folder)
    if not raw or (raw.get("task") and not legacy.is_file()):
        return False  # no settings, or today's layout
    raw.pop("task", None)
    info = tasks()[task]
    if task == "translate":
        raw = translator_model(raw)
    if task == "subspace":
        raw = subspace_optimizer(raw)
    raw = sectioned(raw, info.config)
    if task == "lm":
        raw["model"] = lm_model(raw.get("model", {}))
        raw["train"] = lm_train(raw.get("train", {}))
    cfg = info.config.from_dict(raw, origin=str(folder))
    write_text_atomic(files.config, cfg.to_toml())
    legacy.unlink(missing_ok=True)
    return True


def progress_of(meta: dict, task: str) -> dict:
    """A checkpoint's metadata from before the one training loop, as its position."""
    if task == "lm":
        sums = meta["sums"]
        return {
            "epoch": meta["epoch"],
            "batch": meta["window"],
            "updates": meta.get("updates", 0),
            "sums": {"loss": sums["ce"], "count": sums["tokens"], "aug": sums["aug"], "skipped": sums["skipped"]},
            "epoch_seconds": sums["time"],
            "seconds": meta["elapsed"],
            "best_score": None if math.isinf(meta["best_valid"]) else meta["best_valid"],
            "best_epoch": meta["best_epoch"],
        }
    names = ("epoch", "batch", "updates", "sums", "epoch_seconds", "seconds", "best_score", "best_epoch")
    if task == "tag":
        meta = meta | {"epoch": meta["epoch"] + 1, "best_score": meta.get("best_dev"), "updates": 0}
    else:
        meta = meta | {"updates": meta.get("step", 0), "best_score": meta.get("best_valid")}
    if isinstance(meta.get("sums"), list):
        meta["sums"] = {"loss": meta["sums"][0], "count": meta["sums"][1]}
    return {k: meta[k] for k in names if k in meta}


def migrate_checkpoints(folder: Path, task: str) -> bool:
    files, old = RunDir(folder), folder / "checkpoint.safetensors"
    last, moved = files.checkpoint("last"), False
    if old.is_file() and not last.is_file():
        last.parent.mkdir(exist_ok=True)
        old.rename(last)
        moved = True
    if not last.is_file():
        return False
    tensors, meta = load_checkpoint(last)
    renamed = {k: k for k in tensors}
    for k in tensors:
        if k.startswith("state.") and k.endswith((".h", ".c")):
            renamed[k] = k[:-1] + {"h": "0", "c": "1"}[k[-1]]
    if "rng" in tensors and "rng.torch" not in tensors:  # the tagger's and translator's CPU generator
        renamed["rng"] = "rng.torch"
    meta, started = nt_asgd_start(folder, meta, tensors, task)
    if meta.get("schema") == SCHEMA and renamed == {k: k for k in tensors} and not started:
        return moved
    if meta.get("schema") != SCHEMA:
        progress = progress_of(meta, task)
        kept = {k: meta[k] for k in ("param_groups",) if k in meta}  # the optimiser's groups, where the loop reads them
        meta = {"schema": SCHEMA, **progress, **kept, "task": meta}
        best = {k[len("best.") :]: v for k, v in tensors.items() if k.startswith("best.")}
        if best and not files.checkpoint("best").is_file():
            save_checkpoint(
                files.checkpoint("best"),
                {f"model.{k}": v for k, v in best.items()},
                {"which": "best", "epoch": progress.get("best_epoch", 0)},
            )
    save_checkpoint(last, {renamed[k]: v for k, v in tensors.items()}, meta)
    return True


def nt_asgd_start(folder: Path, meta: dict, tensors: dict, task: str) -> tuple[dict, bool]:
    """A language model's checkpoint metadata with NT-ASGD's ``averaged_from`` and ``main_end``, where it has
    NT-ASGD's state without them; and whether it added them."""
    state = meta.get("task", {}) if meta.get("schema") == SCHEMA else meta
    if task != "lm" or "valid_history" not in state or "averaged_from" in state:
        return meta, False
    start = None
    if "avg.n_averaged" in tensors:  # stopped while averaging
        records = [r for r in RunDir(folder).read_metrics() if r["epoch"] < meta["epoch"]]
        if all("stage" in r for r in records):
            start = sum(r["stage"] == "sgd" for r in records)
    state.update(averaged_from=start, main_end=state.get("main_end"))
    return meta, True


def migrate_summary(folder: Path, task: str) -> bool:
    """A summary from before runs recorded their device: the device that the first line of the run's log names
    (``| device cpu |``; a tagger's log, which named none: the CPU, where they all trained)."""
    path, log = RunDir(folder).summary, folder / "train.log"
    if not path.is_file():
        return False
    summary = json.loads(path.read_text(encoding="utf-8"))
    found = (
        re.search(r"\| device (\S+) \|", log.read_text(encoding="utf-8").split("\n", 1)[0]) if log.is_file() else None
    )
    device = found[1] if found else "cpu" if task == "tag" else ""
    if summary.get("device") or not device:
        return False
    write_text_atomic(path, json.dumps({**summary, "device": device}, indent=2) + "\n")
    return True


def run_folders(path: Path):
    for folder in [path, *sorted(p for p in path.rglob("*") if p.is_dir())]:
        if any((folder / name).exists() for name in ("config.toml", "config.json", "checkpoint.safetensors")):
            yield folder


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run folders, or folders holding them")
    args = parser.parse_args(argv)
    changed = 0
    for path in args.paths:
        for folder in run_folders(path):
            raw = saved_settings(folder)
            task = raw.get("task") or task_of(folder, raw)
            done = [
                what
                for what, f in (
                    ("settings", migrate_config),
                    ("checkpoints", migrate_checkpoints),
                    ("summary", migrate_summary),
                )
                if f(folder, task)
            ]
            if done:
                changed += 1
                print(f"{folder}: {task} run, {' and '.join(done)} rewritten")
    print(f"{changed} run folder(s) rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
