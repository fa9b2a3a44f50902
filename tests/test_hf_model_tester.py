"""Hugging Face's own model tests (``ModelTesterMixin``) on tiedlm.hf models.

The test module is the one of the *installed* transformers version: ``tests/test_modeling_common.py`` from its
source distribution on PyPI, fetched into a cache on first use (``~/.cache/tiedlm/transformers-tests``; never
committed). It runs on tiny Llama and GPT-2 models, plain (the baseline) and with tiedlm's ``tied`` and ``drill``
heads. Where a tiedlm model differs from the plain one by design, the test is an expected failure with its reason
(:data:`DIFFERENCES`); every other test the plain model passes, the tiedlm models pass. Without the source
distribution (no network), the module skips, saying so."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("parameterized")
hf = pytest.importorskip("tiedlm.hf")

import torch  # noqa: E402

from conftest import TINY_HF  # noqa: E402

pytestmark = pytest.mark.slow

PACKAGE = "transformers_tests"  # the fetched tests' package name (not "tests": this folder is ours)
STUBS = {  # what test_modeling_common imports from the repository's other test modules, none in the sdist
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
}

# tests of this harness's own making, for every model alike
HARNESS = {
    "test_generation_tester_mixin_inheritance": "GenerationTesterMixin is not in the source distribution (a stub here)",
    "test_bc_cache_name_forward": "fails on the plain models too: it needs transformers' own model testers, not here",
}

# what a tiedlm head is by design, and so where Hugging Face's generic tests of an lm_head do not apply
DIFFERENCES = {
    "test_model_get_set_embeddings": "get_output_embeddings() is a tiedlm OutputHead, not an nn.Linear",
}


def _fetch(cache: Path) -> Path:
    """The folder holding the package of the installed transformers version's tests, fetched if missing."""
    version = transformers.__version__
    root = cache / version
    package = root / PACKAGE
    if (package / "test_modeling_common.py").is_file():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d", tmp]
        done = subprocess.run([*pip, f"transformers=={version}"], capture_output=True, text=True, timeout=300)
        archives = list(Path(tmp).glob("transformers-*.tar.gz"))
        if done.returncode or not archives:
            pytest.skip(
                f"Hugging Face's model tests: cannot fetch the transformers {version} source distribution "
                f"({(done.stderr.strip().splitlines() or ['no archive'])[-1][:120]})",
                allow_module_level=True,
            )
        staging = root / f".{PACKAGE}.{os.getpid()}"
        with tarfile.open(archives[0]) as tar:
            for member in tar.getmembers():
                name = member.name.split("/", 1)[-1]
                if name in ("tests/test_modeling_common.py", "tests/test_configuration_common.py"):
                    member.name = name.split("/", 1)[1]
                    tar.extract(member, staging, filter="data")
        (staging / "__init__.py").write_text("")
        for name, text in STUBS.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / Path(name).parent / "__init__.py").write_text("")
            (staging / name).write_text(text)
        staging.rename(package)  # atomic: a half-fetched cache is never used
    return root


root = _fetch(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tiedlm" / "transformers-tests")
sys.path.insert(0, str(root))
common = importlib.import_module(f"{PACKAGE}.test_modeling_common")


class TinyCausalLMTester:
    """The model tester a ``ModelTesterMixin`` case asks for: a tiny config of ``arch`` (with a tiedlm head
    ``head``, or none) and its inputs."""

    batch_size, seq_length, vocab_size, is_training = 2, 7, 99, True

    def __init__(self, parent, arch: str, head: str | None):
        self.parent, self.arch, self.head = parent, arch, head
        shape = TINY_HF[arch]
        self.hidden_size = shape.get("hidden_size", shape.get("n_embd"))
        self.num_hidden_layers = shape.get("num_hidden_layers", shape.get("n_layer"))
        self.num_attention_heads = shape.get("num_attention_heads", shape.get("n_head"))
        self.encoder_seq_length = self.seq_length

    def get_config(self):
        config = transformers.AutoConfig.for_model(**TINY_HF[self.arch], vocab_size=self.vocab_size, pad_token_id=0)
        return config if self.head is None else hf.with_output_config(config, self.head)

    def prepare_config_and_inputs_for_common(self):
        ids = torch.randint(1, self.vocab_size, (self.batch_size, self.seq_length))
        return self.get_config(), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _model_class(arch: str, head: str | None) -> type:
    """The class a case tests: the architecture's causal LM, or its ``TiedLM`` subclass (made by attaching once)."""
    plain = transformers.MODEL_FOR_CAUSAL_LM_MAPPING[
        type(transformers.AutoConfig.for_model(TINY_HF[arch]["model_type"]))
    ]
    if head is None:
        return plain
    return transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(TinyCausalLMTester(None, arch, head).get_config())]


def _marked(name: str, mark) -> object:
    """The mixin's test ``name`` under ``mark``, as a method of its own (marking the mixin's would mark every case)."""
    upstream = getattr(common.ModelTesterMixin, name)

    def test(self, *args, **kwargs):
        return upstream(self, *args, **kwargs)

    test.__name__ = test.__qualname__ = name
    return mark(test)


def _case(arch: str, head: str | None) -> type:
    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        # the mixin gives labels to the classes named in transformers' causal-LM table; a TiedLM class is one too
        inputs = common.ModelTesterMixin._prepare_for_class(self, inputs_dict, model_class, return_labels)
        if return_labels and "labels" not in inputs:
            inputs["labels"] = inputs["input_ids"].clone()
        return inputs

    attributes = {
        "_prepare_for_class": _prepare_for_class,
        "all_model_classes": (_model_class(arch, head),),
        "setUp": lambda self: setattr(self, "model_tester", TinyCausalLMTester(self, arch, head)),
        "__module__": __name__,
    }
    for name, reason in HARNESS.items():
        attributes[name] = _marked(name, pytest.mark.skip(reason=reason))
    if head is not None:
        for name, reason in DIFFERENCES.items():
            attributes[name] = _marked(name, pytest.mark.xfail(reason=reason, strict=True))
    return type(
        f"Test{arch.capitalize()}{(head or 'plain').capitalize()}",
        (common.ModelTesterMixin, unittest.TestCase),
        attributes,
    )


globals().update({case.__name__: case for case in (_case(a, h) for a in TINY_HF for h in (None, "tied", "drill"))})
