"""A tiedlm output layer as a Hugging Face causal LM's ``lm_head``, and the model type that saves and reloads it.

:func:`with_output_layer` turns a ``XForCausalLM`` into ``TiedLMXForCausalLM``, a subclass made once per
architecture whose config is ``TiedLMXConfig`` (the architecture's config, saved with ``model_type = "tiedlm"``,
the architecture's own type in ``tiedlm_base`` and the output layer's table in ``tiedlm_output``). Importing this
module registers ``tiedlm`` with ``AutoConfig``: its ``from_dict`` rebuilds the architecture's classes and
registers them with ``AutoModelForCausalLM``, which then builds the model and loads its safetensors.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedConfig, PreTrainedModel
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

from ..errors import UsageError
from ..models.outputs import OUTPUTS, OutputLayer, build_output

MODEL_TYPE = "tiedlm"


class OutputHead(nn.Module):
    """``lm_head`` replaced: hidden states h (…, d_h) -> logits (…, |V|) = g_out(E) g_in(h) + b (DRILL eq. 7).

    In training, and wherever gradients are recorded, g_out(E) is computed afresh in each forward pass (DRILL's
    label dropout δ and the gradient need it). In evaluation under ``torch.no_grad()`` (``generate()``, scoring)
    it is computed once per version of the weights and kept: a generated token then costs the tied head's one
    (|V| × d) product, not DRILL's label encoder (depth·|V|·d² a pass). A weight changed in place (an optimiser
    step, ``load_state_dict``) or replaced (``.to(dtype)``) makes a new version.
    """

    def __init__(self, layer: OutputLayer):
        super().__init__()
        self.layer = layer
        self._labels: tuple[tuple, torch.Tensor] | None = None  # (weights' version, g_out(E))

    def _version(self) -> tuple:
        tensors = [*self.layer.parameters()]
        if hasattr(self.layer, "embedding_weight"):
            tensors.append(self.layer.embedding_weight)
        return tuple((t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.training or torch.is_grad_enabled():
            self._labels = None
            return self.layer(h)[0]
        version = self._version()
        if self._labels is None or self._labels[0] != version:
            self._labels = (version, self.layer.encode_labels())
        return self.layer.score(h, self._labels[1])


def with_output_layer(model: PreTrainedModel, name: str, **keys) -> PreTrainedModel:
    """``model`` (a causal LM) with the tiedlm output layer ``name`` (keys as ``[model.output]``'s, e.g.
    ``depth=2``) in place of its ``lm_head``, built on ``model.get_input_embeddings()``; the same object,
    now of class ``TiedLM<its class>``. One-line :class:`~tiedlm.errors.UsageError` where the model has no LM
    head or no input embeddings, already has a tiedlm layer, or the layer needs h and E of one size."""
    if not isinstance(model, PreTrainedModel):
        raise UsageError(f"with_output_layer: expected a transformers PreTrainedModel, got {type(model).__name__}")
    if isinstance(model.get_output_embeddings(), OutputHead):
        raise UsageError(
            f"with_output_layer: {type(model).__name__} already has a tiedlm output layer "
            f"({model.config.tiedlm_output}); start again from the model without one"
        )
    cfg = OUTPUTS.config({"name": name, **keys}, origin="with_output_layer")
    _attach(model, cfg)
    base_config = type(model.config)
    config_cls = _config_class(base_config)
    model_cls = _model_class(type(model), config_cls)
    model.config.__class__ = config_cls
    model.config.tiedlm_base = base_config.model_type
    model.config.tiedlm_output = cfg.to_dict()
    model.config.tie_word_embeddings = False  # E is shared by reference inside the layer, never copied
    if hasattr(model, "all_tied_weights_keys"):
        model.all_tied_weights_keys = {}
    model.__class__ = model_cls
    return model


def _attach(model: PreTrainedModel, cfg) -> OutputHead:
    """Build the output layer of ``cfg`` (a validated ``[model.output]`` config) on the model's input embeddings,
    initialise it by its own rule and set it as the model's LM head."""
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
    layer.reset_parameters()
    head = OutputHead(layer)
    model.set_output_embeddings(head)
    return head


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

        def resize_token_embeddings(self, *args, **kwargs):
            raise UsageError(
                "resize_token_embeddings: a tiedlm output layer is sized to the vocabulary it was built on; resize "
                "the model's embeddings first, then call with_output_layer"
            )

        members = {"__init__": __init__, "resize_token_embeddings": resize_token_embeddings}
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
        base_type = config_dict.get("tiedlm_base")
        if base_type == MODEL_TYPE or base_type not in CONFIG_MAPPING:
            raise UsageError(f"a tiedlm config needs tiedlm_base, a transformers model type; got {base_type!r}")
        base = CONFIG_MAPPING[base_type]
        config_cls = _config_class(base)
        _model_class(MODEL_FOR_CAUSAL_LM_MAPPING[base], config_cls)
        return config_cls.from_dict(config_dict, **kwargs)


AutoConfig.register(MODEL_TYPE, TiedLMConfig, exist_ok=True)
