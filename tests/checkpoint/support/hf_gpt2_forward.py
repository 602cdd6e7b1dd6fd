#!/usr/bin/python3
"""GPT-2's forward as Hugging Face transformers' GPT2LMHeadModel computes it,
written out plainly in PyTorch, on a folder that `giant checkpoint export
--format hf-gpt2` wrote. No transformers and no safetensors package: the
file is read with struct, json and numpy, so the test checks Giant's file
against the format itself.

usage: hf_gpt2_forward.py FOLDER TOKENS_JSON
  TOKENS_JSON: a [batch][seq] list of token ids.
Prints {"shape": [batch, seq, vocab_size], "logits": [...]} (row-major).
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_bytes])
    base = 8 + header_bytes
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise SystemExit(f"{name}: dtype {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[base + begin:base + end], dtype="<f4").reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return metadata, tensors


def gelu_new(x):
    # transformers' NewGELUActivation, GPT-2's "gelu_new".
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


ACTIVATIONS = {"gelu_new": gelu_new, "gelu": F.gelu}


def conv1d(x, weight, bias):
    # transformers' Conv1D: weight stored [in, out].
    shape = x.shape[:-1] + (weight.shape[1],)
    return torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight).view(shape)


def forward(config, weights, tokens):
    used = set()

    def w(name):
        used.add("transformer." + name)
        return weights["transformer." + name]

    batch, seq = tokens.shape
    hidden, heads = config["n_embd"], config["n_head"]
    head_dim = hidden // heads
    eps = config["layer_norm_epsilon"]
    act = ACTIVATIONS[config["activation_function"]]
    x = w("wte.weight")[tokens] + w("wpe.weight")[torch.arange(seq)]
    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    for i in range(config["n_layer"]):
        p = f"h.{i}."
        a = F.layer_norm(x, (hidden,), w(p + "ln_1.weight"), w(p + "ln_1.bias"), eps)
        q, k, v = conv1d(a, w(p + "attn.c_attn.weight"), w(p + "attn.c_attn.bias")).split(hidden, dim=2)
        q, k, v = (t.view(batch, seq, heads, head_dim).permute(0, 2, 1, 3) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_dim)
        scores = torch.where(causal, scores, torch.tensor(torch.finfo(scores.dtype).min))
        a = torch.matmul(scores.softmax(dim=-1), v).permute(0, 2, 1, 3).reshape(batch, seq, hidden)
        x = x + conv1d(a, w(p + "attn.c_proj.weight"), w(p + "attn.c_proj.bias"))
        m = F.layer_norm(x, (hidden,), w(p + "ln_2.weight"), w(p + "ln_2.bias"), eps)
        m = act(conv1d(m, w(p + "mlp.c_fc.weight"), w(p + "mlp.c_fc.bias")))
        x = x + conv1d(m, w(p + "mlp.c_proj.weight"), w(p + "mlp.c_proj.bias"))
    x = F.layer_norm(x, (hidden,), w("ln_f.weight"), w("ln_f.bias"), eps)
    logits = torch.matmul(x, w("wte.weight").t())  # the tied head
    return logits, used


def main():
    folder, tokens_json = sys.argv[1], sys.argv[2]
    with open(folder + "/config.json") as f:
        config = json.load(f)
    assert config["model_type"] == "gpt2", config["model_type"]
    assert config["tie_word_embeddings"] is True
    metadata, weights = read_safetensors(folder + "/model.safetensors")
    assert metadata.get("format") == "pt", metadata
    assert "lm_head.weight" not in weights
    assert weights["transformer.wte.weight"].shape[0] == config["vocab_size"]
    assert weights["transformer.wpe.weight"].shape[0] == config["n_positions"]
    inner = config["n_inner"] if config["n_inner"] is not None else 4 * config["n_embd"]
    assert weights["transformer.h.0.mlp.c_fc.weight"].shape[1] == inner
    tokens = torch.tensor(json.loads(tokens_json), dtype=torch.long)
    with torch.no_grad():
        logits, used = forward(config, weights, tokens)
    unused = sorted(set(weights) - used)
    if unused:
        raise SystemExit(f"tensors the forward never used: {unused}")
    print(json.dumps({"shape": list(logits.shape), "logits": logits.flatten().double().tolist()}))


if __name__ == "__main__":
    main()
