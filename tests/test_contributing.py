"""CONTRIBUTING.md's example output layer and encoder, run as written: registered, built from a config, trained
a step, and the output layer's maths and parameter count checked against its stated equation."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import torch
from tiedlm.tasks.lm.config import Config
from tiedlm.losses import LanguageModelLoss
from tiedlm.models import LanguageModel
from tiedlm.models.outputs import closed_form_parameters

cfg = Config.load("ptb-small-re").with_overrides(
    ["model.encoder=gru", "model.output=scaled-tied", "model.output.scale=2.0", "model.encoder.hidden_size=16",
     "model.embedding_size=16"])
assert cfg.model.encoder.name == "gru" and cfg.model.output.scale == 2.0
torch.manual_seed(0)
model = LanguageModel(cfg.model, 50)
assert model.parameter_counts()["output"] == closed_form_parameters(cfg.model.output, 50, 16, 16) == 51
h = torch.randn(3, 16)
logits, _ = model.output(h)
assert torch.allclose(logits, 2.0 * h @ model.embedding.weight.t() + model.output.bias)  # s E h + b
opt = torch.optim.SGD(model.parameters(), lr=0.5)
x, y = torch.randint(0, 50, (7, 4)), torch.randint(0, 50, (7, 4))
losses = []
for _ in range(3):
    logits, _ = model(x, model.init_state(4))
    loss = LanguageModelLoss()(logits, y, model.input_embeddings)[0]
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
assert losses[-1] < losses[0], losses
assert model.output.scale.item() != 2.0  # s is learned

# the same new layer in the translator: its name and its own keys, as in the LM's [model.output] table
from tiedlm.tasks.translation import TransformerTranslator, TranslationConfig

small = {"d_model": 16, "ffn_size": 32, "heads": 2, "encoder_layers": 1, "decoder_layers": 1}
tcfg = TranslationConfig.from_dict({"model": small})
tcfg = tcfg.with_overrides(["model.output=scaled-tied", "model.output.scale=3.0"])
translator = TransformerTranslator(tcfg, 40, 40)
assert type(translator.output).__name__ == "ScaledTiedOutput" and translator.output.scale.item() == 3.0
states = translator(torch.randint(3, 40, (2, 5)), torch.randint(3, 40, (2, 4)))
assert translator.output(states)[0].shape == (2, 4, 40)

# a class that is not an Encoder is refused when registered, with one line naming the fix
from tiedlm.errors import UsageError

try:
    ENCODERS.register("plain-gru", builds=torch.nn.GRU)(GRUConfig)
    raise AssertionError("nn.GRU was registered as an encoder")
except UsageError as e:
    assert "'GRU', which is not a tiedlm.models.encoders.Encoder: subclass Encoder" in str(e), e
    assert "\\n" not in str(e) and "plain-gru" not in ENCODERS.names() and GRUConfig.name == "gru"
print("ok")
"""


def test_the_contributing_examples_work_as_written():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2, "CONTRIBUTING.md should hold the output-layer and the encoder example"
    code = "\n".join(blocks) + CHECK  # in a fresh process: the registries of this one stay as they are
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
