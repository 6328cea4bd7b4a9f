#!/usr/bin/python3
"""The PyTorch side of scripts/bench_vs_pytorch.sh (and, with --device cuda, of
scripts/bench_gpu.sh): BERT masked-LM training steps on mock data.

A standard nn.Module BERT as Hugging Face's modeling_bert builds it (post-LN encoder layers,
separate Q/K/V projections, erf GELU, MLM head with a decoder tied to the word embeddings,
N(0, 0.02) weights), with torch.optim.AdamW. The loss is the mean cross-entropy over the masked
tokens. --head all computes logits at EVERY position as Hugging Face does; --head masked gathers
the masked rows of the final hidden states first and runs the MLM head (transform + decoder) on
those only, as NVIDIA's BERT and memtrain do. --dtype bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (fp32 weights, optimizer and gradients).
Run with Debian's /usr/bin/python3 (python3-torch 1.13; needs libopenblas0-pthread).
Prints one JSON object: tokens_per_s (median over the timed steps), step times, peak RSS, and
the model training FLOPs per token that this head computes (scripts/bench/bert_flops.py).
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
from torch import nn

from bert_flops import train_flops_per_token


class SelfAttention(nn.Module):
    def __init__(self, C, NH, p):
        super().__init__()
        self.NH, self.HS = NH, C // NH
        self.query, self.key, self.value = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)
        self.dropout = nn.Dropout(p)

    def forward(self, x, mask_bias):  # x [B, T, C]; mask_bias [B, 1, 1, T]
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.NH, self.HS).transpose(1, 2)  # [B, NH, T, HS]
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.HS) + mask_bias  # [B, NH, T, T]
        probs = self.dropout(torch.softmax(scores, dim=-1))
        return (probs @ v).transpose(1, 2).reshape(B, T, C)


class Layer(nn.Module):
    def __init__(self, C, NH, I, p, eps):
        super().__init__()
        self.attention = SelfAttention(C, NH, p)
        self.attn_out, self.attn_ln = nn.Linear(C, C), nn.LayerNorm(C, eps=eps)
        self.intermediate, self.output = nn.Linear(C, I), nn.Linear(I, C)
        self.out_ln, self.dropout = nn.LayerNorm(C, eps=eps), nn.Dropout(p)

    def forward(self, x, mask_bias):
        a = self.attn_ln(x + self.dropout(self.attn_out(self.attention(x, mask_bias))))
        h = nn.functional.gelu(self.intermediate(a))
        return self.out_ln(a + self.dropout(self.output(h)))


class BertForMaskedLM(nn.Module):
    def __init__(self, V, C, L, NH, I, P=512, p=0.1, eps=1e-12):
        super().__init__()
        self.word, self.pos, self.token_type = nn.Embedding(V, C), nn.Embedding(P, C), nn.Embedding(2, C)
        self.emb_ln, self.dropout = nn.LayerNorm(C, eps=eps), nn.Dropout(p)
        self.layers = nn.ModuleList([Layer(C, NH, I, p, eps) for _ in range(L)])
        self.transform, self.head_ln = nn.Linear(C, C), nn.LayerNorm(C, eps=eps)
        self.bias = nn.Parameter(torch.zeros(V))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, attention_mask, positions=None):  # ids [B, T]; positions [M] flat b*T+t
        B, T = ids.shape
        pos = torch.arange(T).unsqueeze(0)
        x = self.dropout(self.emb_ln(self.word(ids) + self.pos(pos) + self.token_type(torch.zeros_like(ids))))
        mask_bias = (1.0 - attention_mask[:, None, None, :]) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, mask_bias)
        if positions is not None:  # the masked rows only: [M, C]
            x = x.reshape(B * T, -1).index_select(0, positions)
        # .float(): a no-op in fp32; under bf16 autocast PyTorch 1.13's CPU layer_norm rejects a
        # bf16 input with fp32 weights (the encoder's LayerNorms get fp32 sums with the residual).
        h = self.head_ln(nn.functional.gelu(self.transform(x)).float())
        # logits: [B, T, V] at every position, or [M, V] at the masked positions only
        return h @ self.word.weight.t() + self.bias


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mlm-probability", type=float, default=0.15)
    ap.add_argument("--head", choices=["all", "masked"], default="all",
                    help="MLM head at every position (Hugging Face) or at the masked ones only")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast(<device>, torch.bfloat16)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the model, batch and optimizer on GPU 0 (scripts/bench_gpu.sh)")
    ap.add_argument("--tf32", action="store_true",
                    help="with --device cuda: fp32 matmuls may use TF32 (torch.backends.cuda.matmul.allow_tf32)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    model = BertForMaskedLM(a.vocab, a.hidden, a.layers, a.heads, a.ffn).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)  # mean over the labelled (masked) tokens
    times, masked = [], []
    for step in range(a.warmup + a.steps):
        ids = torch.randint(0, a.vocab, (a.batch, a.seq)).to(dev)
        labels = torch.where(torch.rand(a.batch, a.seq).to(dev) < a.mlm_probability, ids,
                             torch.full_like(ids, -100)).view(-1)
        mask = torch.ones(a.batch, a.seq).to(dev)
        if a.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            if a.head == "masked":
                positions = (labels != -100).nonzero().squeeze(1)
                labels = labels.index_select(0, positions)
                logits = model(ids, mask, positions)  # [M, V]
            else:
                logits = model(ids, mask).view(-1, a.vocab)  # [B * T, V]
            loss = loss_fn(logits.float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if a.device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if step >= a.warmup:
            times.append(dt)
            masked.append(int((labels != -100).sum()) / (a.batch * a.seq))
    median = statistics.median(times)
    head_fraction = 1.0 if a.head == "all" else a.mlm_probability
    gpu = {}
    if a.device == "cuda":
        # The caching allocator's own figures (torch.cuda.memory_stats), beside memtrain's.
        st = torch.cuda.memory_stats()
        gpu = {"gpu_name": torch.cuda.get_device_name(0),
               "allocated_bytes_peak": st.get("allocated_bytes.all.peak", 0),
               "reserved_bytes_peak": st.get("reserved_bytes.all.peak", 0),
               "num_ooms": st.get("num_ooms", 0)}
    print(json.dumps({**gpu,
        "framework": "pytorch " + torch.__version__,
        "head": a.head,
        "dtype": a.dtype,
        "flops_per_token": train_flops_per_token(a.vocab, a.hidden, a.layers, a.ffn, a.seq,
                                                 head_fraction),
        "masked_fraction": statistics.mean(masked),
        "loss": float(loss),
        "tokens_per_s": a.batch * a.seq / median,
        "median_step_s": median,
        "step_s": times,
        "steps_timed": len(times),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
