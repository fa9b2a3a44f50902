"""DRILL's and tiedlm's tied head on Hugging Face causal LMs against HF's own tied ``lm_head``, side by side.

For a GPT-2-small-shaped and a Llama-shaped config (random weights: the time does not depend on them) this builds
each head on the same body: ``hf-tied`` (the model as transformers builds it, lm_head.weight = E),
``tiedlm-tied`` (``tiedlm.hf.with_output_layer(model, "tied")``) and ``drill-K`` (DRILL depth K). It times, in
alternating blocks (hf-tied, tiedlm-tied, drill-K, hf-tied, ...):

- training: tokens/s of a forward and backward pass (batch x length tokens, no optimiser);
- generation: new tokens/s of ``generate()`` (greedy, KV cache, batch 1), where the DRILL head computes the label
  encoding g(E) once per ``generate()`` call; ``drill-K-per-token`` recomputes it at every token, to show what
  that saves;

and the peak memory of one training step in a fresh process per head (peak RSS on a CPU, the CUDA allocator's
peak on a GPU). Each "vs hf" column is the head's figure divided by hf-tied's. Run with nothing else heavy on the
machine:

    python benchmarks/hf_head.py --threads 2 --blocks 3 > benchmarks/results/hf_head.txt
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

import tiedlm.hf as hf
from tiedlm.runtime import set_threads
from tiedlm.selfcheck.reference import interleaved_medians

SHAPES = {
    "gpt2-small": {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257},
    "llama-768": {  # Llama's block (RMSNorm, RoPE, SwiGLU, grouped KV heads) at GPT-2 small's width and depth
        "model_type": "llama",
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
    },
}


def build(shape: str, head: str, device: str, dtype: torch.dtype):
    torch.manual_seed(0)
    config = AutoConfig.for_model(**SHAPES[shape], tie_word_embeddings=True)
    for key in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):  # no dropout: the time of the maths only
        if hasattr(config, key):
            setattr(config, key, 0.0)
    model = AutoModelForCausalLM.from_config(config)
    if head == "tiedlm-tied":
        hf.with_output_layer(model, "tied")
    elif head.startswith("drill-"):
        hf.with_output_layer(model, "drill", depth=int(head.split("-")[1]))
    return model.to(device=device, dtype=dtype)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train_step(model, ids: torch.Tensor, device: str):
    def step():
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        sync(device)

    return step


def generate(model, prompt: torch.Tensor, new: int, device: str, per_token: bool):
    head = model.get_output_embeddings()

    def run():
        if per_token:  # g(E) not kept for the call: computed again at each generated token
            head.labels_kept = contextlib.nullcontext
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new, min_new_tokens=new)
        sync(device)
        if per_token:
            del head.labels_kept

    return run


def peak_memory(args, shape: str, head: str) -> float:
    """MiB at the peak of one training step, measured in a fresh process (on a CPU: the resident set's high-water
    mark, reset once the model is built, so that building it does not count)."""
    cmd = [sys.executable, __file__, "--memory-of", shape, head, *argv_common(args)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["mib"]


def argv_common(args) -> list[str]:
    return ["--device", args.device, "--dtype", args.dtype, "--threads", str(args.threads), "--batch",
            str(args.batch), "--length", str(args.length)]  # fmt: skip


def measure_memory(args, shape: str, head: str) -> None:
    dtype = getattr(torch, args.dtype)
    model = build(shape, head, args.device, dtype).train()
    ids = torch.randint(0, SHAPES[shape]["vocab_size"], (args.batch, args.length), device=args.device)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: the high-water mark starts again from here
    train_step(model, ids, args.device)()
    if args.device.startswith("cuda"):
        mib = torch.cuda.max_memory_allocated() / 2**20
    else:
        status = Path("/proc/self/status").read_text()
        mib = int(re.search(r"VmHWM:\s+(\d+) kB", status)[1]) / 1024
    print(json.dumps({"mib": mib}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--depth", type=int, default=2, help="DRILL's label-encoder depth")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--length", type=int, default=128, help="tokens per training sequence")
    ap.add_argument("--new-tokens", type=int, default=32, help="tokens generated per timed call")
    ap.add_argument("--blocks", type=int, default=3, help="timed blocks per variant (the median is reported)")
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--memory-of", nargs=2, metavar=("SHAPE", "HEAD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    threads = set_threads(args.threads)
    if args.memory_of:
        return measure_memory(args, *args.memory_of)
    dtype = getattr(torch, args.dtype)
    drill = f"drill-{args.depth}"
    heads = ["hf-tied", "tiedlm-tied", drill]
    print(f"threads={threads} device={args.device} dtype={args.dtype} batch={args.batch} length={args.length} "
          f"new_tokens={args.new_tokens} blocks={args.blocks} torch={torch.__version__}")  # fmt: skip
    print(f"{'shape':11s} {'head':20s} {'train tok/s':>11s} {'vs hf':>5s} {'gen tok/s':>9s} {'vs hf':>5s} "
          f"{'peak MiB':>8s} {'vs hf':>5s}")  # fmt: skip
    for shape in args.shapes:
        models = {h: build(shape, h, args.device, dtype) for h in heads}
        vocab = SHAPES[shape]["vocab_size"]
        ids = torch.randint(0, vocab, (args.batch, args.length), device=args.device)
        prompt = torch.randint(0, vocab, (1, 16), device=args.device)
        steps = {h: train_step(m.train(), ids, args.device) for h, m in models.items()}
        train = interleaved_medians(steps, args.blocks)
        variants = {h: generate(m.eval(), prompt, args.new_tokens, args.device, False) for h, m in models.items()}
        variants[f"{drill}-per-token"] = generate(models[drill], prompt, args.new_tokens, args.device, True)
        with torch.no_grad():
            gen = interleaved_medians(variants, args.blocks)
        del models
        memory = {h: peak_memory(args, shape, h) for h in heads}
        tokens = args.batch * args.length
        for h in variants:
            t = f"{tokens / train[h]:11.0f} {train['hf-tied'] / train[h]:5.2f}" if h in train else " " * 17
            m = f"{memory[h]:8.0f} {memory[h] / memory['hf-tied']:5.2f}" if h in memory else ""
            g = f"{args.new_tokens / gen[h]:9.1f} {gen['hf-tied'] / gen[h]:5.2f}"
            print(f"{shape:11s} {h:20s} {t} {g} {m}", flush=True)


if __name__ == "__main__":
    main()
