#!/usr/bin/python3
"""The timing half of scripts/bench_gpu.sh: BERT-Large training on GPU 0, memtrain beside PyTorch.

For each case (sequence 128 and 512; bf16, and fp32 with TF32 GEMMs) it trains
configs/bench-bert-large-gpu.yaml for --steps steps with memtrain and, where a CUDA build of torch
is importable, the same model with a masked-only MLM head in PyTorch eager
(scripts/bench/pytorch_bert_mlm.py --device cuda), alternating the two --rounds times. It prints
per case: tokens/s (median of the timed steps after --warmup, median over rounds), MFU (the model
FLOPs per token that each side counts, masked-only head included, over the GPU's dense peak for
that precision from the table below), memtrain / PyTorch, and each allocator's peak allocated and
reserved bytes and their ratio (memtrain's metrics.jsonl; torch.cuda.memory_stats). A case that
memtrain refuses (a config error, exit 2) is reported with memtrain's one-line reason.
Issue 14's targets: bf16 at sequence 512 at least 50% MFU and at least 1.2x PyTorch eager.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Dense (no sparsity) tensor-core peaks in FLOP/s from NVIDIA's datasheets, SXM parts.
PEAKS = {
    "H200": {"bf16": 989.4e12, "tf32": 494.7e12},
    "H100": {"bf16": 989.4e12, "tf32": 494.7e12},
    "A100": {"bf16": 312e12, "tf32": 156e12},
}


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or "unknown GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown GPU (no nvidia-smi)"


def peak_for(name, precision):
    for key, peaks in PEAKS.items():
        if key in name:
            return peaks[precision]
    return None


def run_memtrain(binary, seq, batch, precision, steps, warmup):
    run_dir = tempfile.mkdtemp(prefix="memtrain-gpu-bench-")
    sets = [f"data.seq_length={seq}", f"training.micro_batch_size={batch}",
            f"training.global_batch_size={batch}", f"training.max_steps={warmup + steps}"]
    sets += ["precision.dtype=bf16"] if precision == "bf16" else ["precision.dtype=fp32", "precision.allow_tf32=true"]
    cmd = [binary, "train", "--config", os.path.join(ROOT, "configs/bench-bert-large-gpu.yaml"),
           "--run-dir", os.path.join(run_dir, "run")]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        return {"error": lines[-1] if lines else f"exit {p.returncode}"}
    with open(os.path.join(run_dir, "run", "metrics.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    train = [l for l in lines if "tokens_per_s" in l and l["step"] > warmup]
    if not train:
        return {"error": "no timed steps in metrics.jsonl"}
    med = lambda k: statistics.median(l[k] for l in train)
    return {"tokens_per_s": med("tokens_per_s"),
            "flops_per_token": med("model_flops_per_s") / med("tokens_per_s"),
            "allocated_bytes_peak": max(l["peak_allocated_bytes"] for l in train),
            "reserved_bytes_peak": max(l["reserved_bytes"] for l in train)}


def run_pytorch(python, seq, batch, precision, steps, warmup):
    cmd = [python, "-W", "ignore", os.path.join(HERE, "pytorch_bert_mlm.py"), "--device", "cuda",
           "--head", "masked", "--layers", "24", "--hidden", "1024", "--heads", "16", "--ffn", "4096",
           "--seq", str(seq), "--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup)]
    cmd += ["--dtype", "bf16"] if precision == "bf16" else ["--dtype", "fp32", "--tf32"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        return {"error": lines[-1] if lines else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/memtrain"))
    ap.add_argument("--python", default=sys.executable, help="a Python whose torch has CUDA")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    name = gpu_name()
    torch_cuda = subprocess.run([a.python, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                                capture_output=True).returncode == 0
    print(f"GPU 0: {name}; PyTorch eager: {'yes' if torch_cuda else 'no CUDA build of torch importable from ' + a.python}")
    cases = [(128, 64, "bf16"), (512, 16, "bf16"), (128, 64, "tf32"), (512, 16, "tf32")]
    results = []
    for seq, batch, precision in cases:
        runs = {"memtrain": [], "pytorch": []}
        for r in range(a.rounds):
            runs["memtrain"].append(run_memtrain(a.binary, seq, batch, precision, a.steps, a.warmup))
            if torch_cuda:
                runs["pytorch"].append(run_pytorch(a.python, seq, batch, precision, a.steps, a.warmup))
        peak = peak_for(name, precision)
        row = {"seq": seq, "micro_batch": batch, "precision": precision, "peak_flops": peak}
        for side, rs in runs.items():
            ok = [x for x in rs if "error" not in x]
            if not rs:
                continue
            if not ok:
                row[side] = {"error": rs[-1]["error"]}
                continue
            tps = statistics.median(x["tokens_per_s"] for x in ok)
            fpt = ok[0]["flops_per_token"]
            row[side] = {"tokens_per_s": tps, "tokens_per_s_rounds": [x["tokens_per_s"] for x in ok],
                         "mfu": tps * fpt / peak if peak else None,
                         "allocated_bytes_peak": ok[-1]["allocated_bytes_peak"],
                         "reserved_bytes_peak": ok[-1]["reserved_bytes_peak"]}
        if "tokens_per_s" in row.get("memtrain", {}) and "tokens_per_s" in row.get("pytorch", {}):
            row["speedup"] = row["memtrain"]["tokens_per_s"] / row["pytorch"]["tokens_per_s"]
        results.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{'case':24}{'memtrain tok/s':>16}{'MFU':>7}{'PyTorch tok/s':>15}{'MFU':>7}{'ratio':>7}"
          f"{'alloc/reserved GiB (memtrain | torch)':>40}")
    gib = lambda b: b / 2**30
    for row in results:
        case = f"seq {row['seq']} x {row['micro_batch']} {row['precision']}"
        cells = []
        for side in ("memtrain", "pytorch"):
            s = row.get(side, {})
            if "tokens_per_s" in s:
                mfu = f"{s['mfu']:.2f}" if s["mfu"] is not None else "n/a"
                cells.append((f"{s['tokens_per_s']:.0f}", mfu,
                              f"{gib(s['allocated_bytes_peak']):.1f}/{gib(s['reserved_bytes_peak']):.1f}"))
            else:
                cells.append(("-", "-", "-"))
        ratio = f"{row['speedup']:.2f}" if "speedup" in row else "-"
        print(f"{case:24}{cells[0][0]:>16}{cells[0][1]:>7}{cells[1][0]:>15}{cells[1][1]:>7}{ratio:>7}"
              f"{cells[0][2] + ' | ' + cells[1][2]:>40}")
        for side in ("memtrain", "pytorch"):
            if "error" in row.get(side, {}):
                print(f"    {side} did not run: {row[side]['error']}")


if __name__ == "__main__":
    main()
