"""A tiedlm output layer as a Hugging Face causal LM's ``lm_head``, and the model type that saves and reloads it.

:func:`with_output_layer` turns a ``XForCausalLM`` into ``TiedLMXForCausalLM``, a subclass made once per
architecture whose config is ``TiedLMXConfig`` (the architecture's config, saved with ``model_type = "tiedlm"``,
the architecture's own type in ``tiedlm_base`` and the output layer's table in ``tiedlm_output``). Importing this
module registers ``tiedlm`` with ``AutoConfig``: its ``from_dict`` rebuilds the architecture's classes and
registers them with ``AutoModelForCausalLM``, which then builds the model and loads its safetensors.
"""

from __future__ import annotations

import contextlib
import copy
import weakref
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedConfig, PreTrainedModel
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

from ..errors import UsageError
from ..models.outputs import OUTPUTS, OutputLayer, build_output

MODEL_TYPE = "tiedlm"


class LiveEmbedding:
    """The model's input embedding as the output layer sees it: ``weight`` is read from
    ``model.get_input_embeddings()`` at every use, so the head scores against the embedding the model reads, through
    ``set_input_embeddings``, PEFT's wrappers (``modules_to_save``) and copies. A deep copy of the whole model points
    at the copy; a deep copy of the head alone (PEFT's ``modules_to_save=["lm_head"]``) at the model it came from."""

    def __init__(self, model: nn.Module):
        self.model = weakref.ref(model)

    @property
    def weight(self) -> torch.Tensor:
        model = self.model()
        if model is None:
            raise UsageError("this tiedlm head was copied out of its model, which is gone; attach it to a model again")
        embedding = model.get_input_embeddings()
        return embedding.weight

    def __deepcopy__(self, memo: dict) -> "LiveEmbedding":
        model = self.model()
        copied = memo.get(id(model)) if model is not None else None  # the model itself is being copied: follow it
        return LiveEmbedding(copied if isinstance(copied, nn.Module) else model)

    def __getstate__(self):
        raise TypeError("a tiedlm head is saved with save_pretrained (safetensors), not pickled")


class _Rows:
    """Some rows of E, as the label encoder reads an embedding (``weight``): the probe words of :class:`OutputHead`."""

    def __init__(self, weight: torch.Tensor):
        self.weight = weight


class OutputHead(nn.Module):
    """``lm_head`` replaced: hidden states h (…, d_h) -> logits (…, |V|) = g_out(E) g_in(h) + b (DRILL eq. 7).

    Outside ``generate()``, g_out(E) is computed afresh in every forward pass, so the logits are always those of the
    weights as they are (an optimiser step, an EMA written through ``.data``, PEFT's ``disable_adapter()``). Within a
    ``generate()`` call, whose weights cannot change, it is computed at most once (:meth:`labels_kept`), and kept for
    the next call while the weights are unchanged: checked at each call's first token by a float64 projection of E on
    fixed random directions and by the label encoding of 64 probe words (any change of E, of the encoder's weights or
    of its function, as PEFT's ``disable_adapter()`` makes, changes one of them). A generated token then costs the
    tied head's one (|V| × d) product, not DRILL's label encoder (depth·|V|·d² a pass).
    """

    PROBES = 64  # words whose label encoding tells whether the encoder is still the one the kept table came from

    def __init__(self, layer: OutputLayer):
        super().__init__()
        self.layer = layer
        self._keep = 0  # > 0 inside generate(): g_out(E) computed at most once
        self._checked = False  # this call has checked the kept table against the weights
        self._labels: torch.Tensor | None = None
        self._key: tuple | None = None  # what the kept table was computed from (:meth:`_weights_key`)

    @contextlib.contextmanager
    def labels_kept(self):
        """g_out(E) computed at most once for what runs inside (a ``generate()`` call)."""
        self._keep += 1
        if self._keep == 1:
            self._checked = False
        try:
            yield
        finally:
            self._keep -= 1

    def _weights_key(self) -> tuple | None:
        """(E projected on fixed random directions, in float64; the probe words' label encoding), or None for a
        layer whose table is not built from E (``full``: its table is its own weight, nothing to compute)."""
        layer = self.layer
        if not hasattr(layer, "_embedding"):
            return None
        e = layer.embedding_weight
        draw = torch.Generator().manual_seed(0)
        directions = torch.randn(e.shape[1], 2, generator=draw).to(e.device, e.dtype)
        weights = torch.randn(e.shape[0], generator=draw).to(e.device, torch.float64)
        projection = (weights @ (e @ directions).double()).tolist()
        rows = torch.linspace(0, e.shape[0] - 1, min(self.PROBES, e.shape[0])).long().to(e.device)
        saved = layer._embedding
        layer._embedding = [_Rows(e[rows])]
        try:
            probe = layer.encode_labels()
        finally:
            layer._embedding = saved
        return projection, probe

    def _kept_labels(self) -> torch.Tensor:
        if not self._checked:
            key = self._weights_key()
            old = self._key
            same = key is not None and old is not None and key[0] == old[0] and torch.equal(key[1], old[1])
            if not same:
                self._labels, self._key = None, key
            self._checked = True
        if self._labels is None:
            self._labels = self.layer.encode_labels()
        return self._labels

    @property
    def weight(self) -> torch.Tensor:
        """The (|V|, ·) table whose rows stand for the words, as tools that size a vocabulary from ``lm_head.weight``
        read it: E for the layers built on it, ``full``'s own matrix otherwise (the logits are :meth:`forward`'s)."""
        layer = self.layer
        return layer.embedding_weight if hasattr(layer, "_embedding") else layer.weight

    @property
    def bias(self) -> torch.Tensor | None:
        """The per-word output bias b (None where the layer has none)."""
        return self.layer.bias

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        live = getattr(self.layer, "_embedding", [None])[0]
        model = live.model() if isinstance(live, LiveEmbedding) else None
        with _onloaded(model.get_input_embeddings() if model is not None else None), _onloaded(self.layer):
            if not self._keep or self.training or torch.is_grad_enabled():
                return self.layer(h)[0]
            return self.layer.score(h, self._kept_labels())


@contextlib.contextmanager
def _onloaded(module: nn.Module | None):
    """``module``'s weights in memory while the head reads them outside the module's own forward: a module that
    accelerate offloads (``device_map`` with ``"disk"``, or CPU offload) holds them only inside that forward, so
    its hook loads them here too, and offloads them again after."""
    hook = getattr(module, "_hf_hook", None)
    if hook is None or not any(p.is_meta for p in module.parameters()):
        yield
        return
    hook.pre_forward(module)
    try:
        yield
    finally:
        hook.post_forward(module, None)


def with_output_layer(model: PreTrainedModel, name: str, **keys) -> PreTrainedModel:
    """``model`` (a causal LM) with the tiedlm output layer ``name`` (keys as ``[model.output]``'s, e.g.
    ``depth=2``) in place of its ``lm_head``, built on ``model.get_input_embeddings()``; the same object,
    now of class ``TiedLM<its class>``, with a config of its own (the one given is left as it was). One-line
    :class:`~tiedlm.errors.UsageError` where the model has no LM head or no input embeddings, already has a tiedlm
    layer, or the layer needs h and E of one size."""
    if not isinstance(model, PreTrainedModel):
        raise UsageError(f"with_output_layer: expected a transformers PreTrainedModel, got {type(model).__name__}")
    if isinstance(model.get_output_embeddings(), OutputHead):
        raise UsageError(
            f"with_output_layer: {type(model).__name__} already has a tiedlm output layer "
            f"({model.config.tiedlm_output}); start again from the model without one"
        )
    cfg = OUTPUTS.config({"name": name, **keys}, origin="with_output_layer")
    _attach(model, cfg)
    given = model.config
    config = _output_config(given, cfg, type(model))  # the caller's object stays a plain config they can reuse
    for module in model.modules():  # every part of the model that reads the config reads the new one
        if getattr(module, "config", None) is given:
            module.config = config
    if hasattr(model, "all_tied_weights_keys"):
        model.all_tied_weights_keys = {}
    model.__class__ = _MODELS[type(model)]
    return model


def with_output_config(config: PreTrainedConfig, name: str, **keys) -> PreTrainedConfig:
    """A copy of ``config`` (a causal LM's) from which ``AutoModelForCausalLM.from_config`` builds the model with
    tiedlm's output layer ``name`` (keys as ``[model.output]``'s) in place of its ``lm_head``."""
    cfg = OUTPUTS.config({"name": name, **keys}, origin="with_output_config")
    base = type(config)
    if base not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise UsageError(f"with_output_config: {base.__name__} has no causal LM in transformers")
    return _output_config(config, cfg, MODEL_FOR_CAUSAL_LM_MAPPING[base])


def _output_config(config: PreTrainedConfig, cfg, model_cls: type) -> PreTrainedConfig:
    """``TiedLM<Base>``'s copy of ``config`` with the output layer ``cfg``; its model class made and registered."""
    base = type(config)
    config_cls = _config_class(base)
    _model_class(model_cls, config_cls)
    new = copy.deepcopy(config)
    new.__class__ = config_cls
    new.tiedlm_base = base.model_type
    new.tiedlm_output = cfg.to_dict()
    new.tie_word_embeddings = False  # E is read from the input embedding inside the layer, never copied
    return new


def _attach(model: PreTrainedModel, cfg) -> OutputHead:
    """Build the output layer of ``cfg`` (a validated ``[model.output]`` config) on the model's input embeddings,
    initialise it by its own rule and set it as the model's LM head; the layer reads E live from the model
    (:class:`LiveEmbedding`)."""
    kind = type(model).__name__
    old = model.get_output_embeddings()
    if old is None:
        raise UsageError(f"with_output_layer: {kind} has no language-model head; load it with AutoModelForCausalLM")
    embedding = model.get_input_embeddings()
    if not isinstance(embedding, nn.Embedding):
        raise UsageError(f"with_output_layer: {kind} has no input embedding table (nn.Embedding) to build on")
    hidden = old.in_features if isinstance(old, nn.Linear) else model.config.get_text_config().hidden_size
    d = embedding.embedding_dim
    if cfg.needs_embedding_size and hidden != d:
        raise UsageError(
            f"with_output_layer: output layer {cfg.name!r} scores {kind}'s hidden states (size {hidden}) against its "
            f"input embeddings (size {d}); use 'bilinear' or 'dual', which take any sizes"
        )
    weight = embedding.weight
    layer = build_output(cfg, embedding, hidden).to(device=weight.device, dtype=weight.dtype)
    if hasattr(layer, "_embedding"):
        layer._embedding = [LiveEmbedding(model)]
    layer.reset_parameters()
    head = OutputHead(layer)
    model.set_output_embeddings(head)
    return head


def _resize_rows(layer: nn.Module, old: int, new: int, mean_resizing: bool, std: float) -> None:
    """The layer's per-word parameters (its bias; ``full``'s matrix) from ``old`` to ``new`` rows as Hugging Face
    resizes an LM head: kept rows copied, added ones at the old rows' mean (``mean_resizing``) or drawn
    N(0, ``std``²) (a bias: 0)."""
    for name, param in list(layer.named_parameters(recurse=False)):
        if param.dim() == 0 or param.shape[0] != old:
            continue
        data = param.data.new_empty((new, *param.shape[1:]))
        kept = min(old, new)
        data[:kept] = param.data[:kept]
        if new > old:
            if mean_resizing:
                data[old:] = param.data.float().mean(0).to(data.dtype)
            elif param.dim() == 1:
                data[old:] = 0
            else:
                data[old:].normal_(0.0, std)
        setattr(layer, name, nn.Parameter(data, requires_grad=param.requires_grad))


MODEL_CARD = """---
library_name: transformers
tags:
- tiedlm
---

# A language model with a tiedlm output layer

Its `lm_head` is tiedlm's `{name}` output layer ({summary}), built on the model's own input embeddings, on a
`{base}` body. Transformers alone does not know this model type (`tiedlm`), and loading it as a plain `{base}`
model would give it a random `lm_head`. Load it with tiedlm's Hugging Face extra:

```python
# pip install 'tiedlm[hf]'
import tiedlm.hf  # registers the model type "tiedlm" with AutoConfig and AutoModelForCausalLM
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("PATH_OR_REPO")
```
"""


_CONFIGS: dict[type, type] = {}
_MODELS: dict[type, type] = {}


def _config_class(base: type) -> type:
    """``TiedLM<Base>``: the architecture's config class, saved as model_type "tiedlm" (made once per class)."""
    if base not in _CONFIGS:
        _CONFIGS[base] = type(f"TiedLM{base.__name__}", (base,), {"model_type": MODEL_TYPE, "__module__": __name__})
    return _CONFIGS[base]


def _model_class(base: type, config_cls: type) -> type:
    """``TiedLM<Base>``: the causal LM whose ``__init__`` puts the output layer of ``config.tiedlm_output`` in
    place of ``lm_head``; registered with ``AutoModelForCausalLM`` for ``config_cls`` (made once per class)."""
    if base not in _MODELS:

        def __init__(self, config):
            base.__init__(self, config)
            _attach(self, OUTPUTS.config(dict(config.tiedlm_output), origin="tiedlm_output"))
            self.loss_type = self.loss_type or "ForCausalLM"

        def generate(self, *args, **kwargs):
            with self.get_output_embeddings().labels_kept():  # the weights cannot change within one call
                return base.generate(self, *args, **kwargs)

        def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
            """Hugging Face's resize of the input embedding E, then the head's per-word parts alike; the label
            encoder is kept, and the head reads the new E."""
            head, old = self.get_output_embeddings(), self.get_input_embeddings().num_embeddings
            self.get_output_embeddings = lambda: None  # Hugging Face resizes E only: the head follows it
            try:
                embeddings = base.resize_token_embeddings(self, new_num_tokens, pad_to_multiple_of, mean_resizing)
            finally:
                del self.get_output_embeddings
            std = getattr(self.config.get_text_config(), "initializer_range", 0.02)
            _resize_rows(head.layer, old, embeddings.num_embeddings, mean_resizing, std)
            return embeddings

        def save_pretrained(self, save_directory, *args, **kwargs):
            """Hugging Face's ``save_pretrained``, and a model card (README.md, unless there is one) that tells a
            person and a program what loading it needs."""
            base.save_pretrained(self, save_directory, *args, **kwargs)
            card = Path(save_directory) / "README.md"
            if not card.exists():
                output = OUTPUTS.config(dict(self.config.tiedlm_output), origin="tiedlm_output")
                text = MODEL_CARD.format(name=output.name, summary=output.summary(), base=base.__name__)
                card.write_text(text, encoding="utf-8")

        members = {"__init__": __init__, "generate": generate, "resize_token_embeddings": resize_token_embeddings}
        members |= {"save_pretrained": save_pretrained}
        members |= {"config_class": config_cls, "_tied_weights_keys": {}, "__module__": __name__}
        _MODELS[base] = type(f"TiedLM{base.__name__}", (base,), members)
        AutoModelForCausalLM.register(config_cls, _MODELS[base], exist_ok=True)
    return _MODELS[base]


class TiedLMConfig(PreTrainedConfig):
    """The ``tiedlm`` entry of ``AutoConfig``: reading a saved config.json gives the ``TiedLM<Base>`` config of the
    architecture named by ``tiedlm_base`` (and registers its model class)."""

    model_type = MODEL_TYPE

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        config_dict = dict(config_dict)
        config_dict.pop("model_type", None)
        base = _saved_base(config_dict)
        OUTPUTS.config(dict(config_dict["tiedlm_output"]), origin="config.json tiedlm_output")  # before any build
        config_cls = _config_class(base)
        _model_class(MODEL_FOR_CAUSAL_LM_MAPPING[base], config_cls)
        return config_cls.from_dict(config_dict, **kwargs)


def _saved_base(config_dict: dict) -> type:
    """The architecture's config class that a saved ``tiedlm`` config names, checked before anything is built:
    ``tiedlm_base`` a causal LM's model type whose width key the file holds, ``tiedlm_output`` a table, and the
    saved ``architectures`` the ``TiedLM`` class of that base (one line each)."""
    base_type, output = config_dict.get("tiedlm_base"), config_dict.get("tiedlm_output")
    if not isinstance(base_type, str) or base_type == MODEL_TYPE or base_type not in CONFIG_MAPPING:
        raise UsageError(f"config.json: tiedlm_base must be a transformers model type, not {base_type!r}")
    base = CONFIG_MAPPING[base_type]
    if base not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise UsageError(f"config.json: tiedlm_base = {base_type!r} has no causal LM in transformers")
    if not isinstance(output, dict) or not isinstance(output.get("name"), str):
        raise UsageError("config.json: tiedlm_output must be an output layer's table with its name (e.g. drill)")
    model_cls = MODEL_FOR_CAUSAL_LM_MAPPING[base]
    saved = config_dict.get("architectures")
    if isinstance(saved, list) and saved and f"TiedLM{model_cls.__name__}" not in saved:
        raise UsageError(
            f"config.json: tiedlm_base = {base_type!r} but the weights were saved by {', '.join(map(str, saved))}; "
            "set tiedlm_base to the architecture that saved them"
        )
    width = getattr(base, "attribute_map", {}).get("hidden_size", "hidden_size")
    if width not in config_dict and "text_config" not in config_dict:
        raise UsageError(
            f"config.json: tiedlm_base = {base_type!r} but the file has no {width!r}, which a {base_type} config "
            "holds; set tiedlm_base to the architecture of these keys"
        )
    return base


AutoConfig.register(MODEL_TYPE, TiedLMConfig, exist_ok=True)
