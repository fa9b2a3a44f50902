"""tiedlm's output layers and augmented loss on Hugging Face ``transformers`` causal LMs (``pip install
'tiedlm[hf]'``).

- :func:`with_output_layer`: any causal LM (GPT-2, Llama, Qwen, Mistral, …) with a tiedlm output layer (``tied``,
  ``bilinear``, ``dual``, ``drill``, ``full``) in place of its ``lm_head``, built on the model's own input
  embeddings; it still trains with ``Trainer``, generates with ``generate()`` and saves with ``save_pretrained``.
- :func:`with_output_config`: the same as a config, for ``AutoModelForCausalLM.from_config``.
- :class:`AugmentedLoss`: Inan et al.'s J + γτ·J_aug (eq. 3.3) as a ``Trainer(compute_loss_func=...)``.

Importing this package imports ``transformers`` and registers the ``tiedlm`` model type, so that
``AutoModelForCausalLM.from_pretrained`` reloads a saved model (no ``trust_remote_code``). The rest of tiedlm
never imports it.
"""

from .head import OutputHead, with_output_config, with_output_layer
from .loss import AugmentedLoss

__all__ = ["AugmentedLoss", "OutputHead", "with_output_config", "with_output_layer"]
