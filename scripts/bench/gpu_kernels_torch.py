#!/usr/bin/env python3
"""PyTorch eager at the shapes of benchmarks/bench_gpu_kernels.cpp, for a side-by-side run on
one GPU (scripts/bench_gpu_kernels.sh). BERT-Large: micro-batch 8 x sequence 512 tokens,
hidden 1024, FFN 4096, 16 heads, bf16 (fp32 and TF32 for one GEMM). Each case: 3 warm-ups, then
the median of 20 iterations timed with CUDA events. Prints one JSON object per case with the
same names and counters as the C++ benchmark (TFLOP/s, or GB/s for the memory-bound ops)."""
import json
import statistics

import torch

B, T, C, FF, NH = 8, 512, 1024, 4096, 16
N = B * T
dev = "cuda"


def timed(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return statistics.median(times)


def report(name, seconds, flop=None, bytes_=None):
    out = {"name": name, "time_us": seconds * 1e6}
    if flop:
        out["TFLOP/s"] = flop / seconds / 1e12
    if bytes_:
        out["GB/s"] = bytes_ / seconds / 1e9
    print(json.dumps(out), flush=True)


def linear(name, fin, fout, backward, dtype, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    x = torch.full((N, fin), 0.0115, device=dev, dtype=dtype, requires_grad=backward)
    lin = torch.nn.Linear(fin, fout, device=dev, dtype=dtype)

    def step():
        y = lin(x)
        if backward:
            y.backward(y)
    report(name, timed(step), flop=2.0 * N * fin * fout * (3 if backward else 1))


def attention(name, backward):
    q = torch.full((B, NH, T, C // NH), 0.0115, device=dev, dtype=torch.bfloat16, requires_grad=backward)
    drop = torch.nn.Dropout(0.1)

    def step():
        # BERT's eager attention (Hugging Face's BertSelfAttention without the fused kernel)
        scores = torch.matmul(q, q.transpose(-1, -2)) / (C // NH) ** 0.5
        probs = drop(torch.softmax(scores, dim=-1))
        out = torch.matmul(probs, q)
        if backward:
            out.backward(out)
    report(name, timed(step), flop=2.0 * 2 * B * NH * T * T * (C // NH) * (3 if backward else 1))


def flash(name, backward):
    q = torch.full((B, NH, T, C // NH), 0.0115, device=dev, dtype=torch.bfloat16, requires_grad=backward)

    def step():
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
        if backward:
            out.backward(out)
    report(name, timed(step), flop=2.0 * 2 * B * NH * T * T * (C // NH) * (3 if backward else 1))


def main():
    torch.manual_seed(0)
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
    linear("BM_LinearBf16/qkv_fwd_bf16", C, 3 * C, False, torch.bfloat16)
    linear("BM_LinearBf16/ffn_up_fwd_bwd_bf16", C, FF, True, torch.bfloat16)
    linear("BM_LinearBf16/ffn_down_fwd_bwd_bf16", FF, C, True, torch.bfloat16)
    linear("BM_LinearFp32/ffn_up_fwd_bwd_tf32", C, FF, True, torch.float32, tf32=True)
    linear("BM_LinearFp32/ffn_up_fwd_bwd_fp32", C, FF, True, torch.float32)
    attention("BM_AttentionBf16/fwd", False)
    attention("BM_AttentionBf16/fwd_bwd", True)
    flash("BM_FlashAttentionBf16/fwd (torch SDPA)", False)
    flash("BM_FlashAttentionBf16/fwd_bwd (torch SDPA)", True)
    x = torch.full((N, C), 0.0115, device=dev, dtype=torch.bfloat16)
    ln = torch.nn.LayerNorm(C, eps=1e-12, device=dev, dtype=torch.bfloat16)
    with torch.no_grad():
        report("BM_LayerNormBf16", timed(lambda: ln(x)), bytes_=2 * 2 * N * C)
        h = torch.full((N, FF), 0.0115, device=dev, dtype=torch.bfloat16)
        b = torch.full((FF,), 0.0115, device=dev, dtype=torch.bfloat16)
        report("BM_BiasGeluBf16", timed(lambda: torch.nn.functional.gelu(h + b)), bytes_=2 * 2 * N * FF)
    # AdamW over 335 M fp32 parameters with torch's fused kernel: 28 bytes a parameter, as the
    # bf16-with-fp32-master update of memtrain moves.
    n = 335_141_888
    p = torch.nn.Parameter(torch.full((n,), 0.0115, device=dev))
    p.grad = torch.full_like(p, 0.001)
    opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
    report("BM_AdamWBf16 (torch fused AdamW, fp32)", timed(opt.step, iters=10), bytes_=28 * n)


if __name__ == "__main__":
    main()
