#!/usr/bin/python3
"""Side-by-side training throughput and peak memory: memtrain against PyTorch (one run).

All sides train the configuration of configs/bench-bert.yaml (BERT hidden 768, 12 heads, FFN
3072, 2 layers, vocab 30522, micro-batch 8, seq 128, AdamW, mock data, 15% masked) on 2 threads:

  memtrain          fp32, MLM head at the masked positions only
  pytorch_masked    fp32, MLM head at the masked positions only (NVIDIA's BERT): like for like
  pytorch_all       fp32, logits at every position (Hugging Face): about 2x the model FLOPs
  memtrain_bf16     --set precision.dtype=bf16, masked positions only
  pytorch_bf16      torch.autocast("cpu", dtype=torch.bfloat16), masked positions only
  memtrain_fp16     --set precision.dtype=fp16 (dynamic loss scaling), masked positions only

Every side's loss is the mean cross-entropy over the masked tokens; PyTorch's weights are
N(0, 0.02) as BERT's. The programs alternate for --rounds rounds (each round runs every side
once) so machine noise hits all alike; each figure is the median over rounds of each program's
median step throughput. Peak RSS is the child's own (os.wait4). Model FLOPs per token are
counted with one formula for every side (scripts/bench/bert_flops.py, memtrain's own), so
"model GFLOP/s" compares how fast each side does the work it chose to do. All run with the
same OPENBLAS_CORETYPE (see README: on these virtual machines OpenBLAS otherwise falls back to
its generic kernels), so none is handicapped.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_flops import train_flops_per_token  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = "configs/bench-bert.yaml"
# configs/bench-bert.yaml's model and batch, and memtrain's default data.mlm_probability.
SHAPE = dict(vocab=30522, hidden=768, layers=2, ffn=3072, seq=128)
MLM_PROBABILITY = 0.15

SIDES = [  # (name, program, options) in the order each round runs them
    ("memtrain", "memtrain", []),
    ("pytorch_masked", "pytorch", ["--head", "masked", "--dtype", "fp32"]),
    ("pytorch_all", "pytorch", ["--head", "all", "--dtype", "fp32"]),
    ("memtrain_bf16", "memtrain", ["--set", "precision.dtype=bf16"]),
    ("pytorch_bf16", "pytorch", ["--head", "masked", "--dtype", "bf16"]),
    ("memtrain_fp16", "memtrain", ["--set", "precision.dtype=fp16"]),
]
RATIOS = [  # (name, numerator, denominator)
    ("memtrain / pytorch_masked (like for like)", "memtrain", "pytorch_masked"),
    ("memtrain / pytorch_all", "memtrain", "pytorch_all"),
    ("memtrain_bf16 / pytorch_bf16", "memtrain_bf16", "pytorch_bf16"),
    ("memtrain_bf16 / memtrain (issue 15: >= 0.95)", "memtrain_bf16", "memtrain"),
    ("memtrain_fp16 / memtrain (issue 15: >= 0.95)", "memtrain_fp16", "memtrain"),
]


def cpu_coretype():
    flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0].split()
    if {"avx512f", "avx512bw", "avx512vl"} <= set(flags):
        return "SkylakeX"
    if {"avx2", "fma"} <= set(flags):
        return "Haswell"
    return None


def median_or_nan(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else math.nan


def finite_or_none(x):
    """JSON has no NaN: an unknown figure is written as null."""
    if isinstance(x, dict):
        return {k: finite_or_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite_or_none(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


def run_child(cmd, env):
    """Runs cmd, returns (stdout, peak RSS bytes of that child)."""
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    text = out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed with exit {proc.returncode}:\n{text[-3000:]}")
    return text, usage.ru_maxrss * 1024


def run_memtrain(binary, steps, warmup, env, extra):
    run_dir = tempfile.mkdtemp(prefix="memtrain-bench-")
    shutil.rmtree(run_dir)
    cmd = [binary, "train", "--config", CONFIG, "--run-dir", run_dir,
           "--set", f"training.max_steps={steps + warmup}"] + extra
    _, rss = run_child(cmd, env)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    train = [l for l in lines if "tokens_per_s" in l and l["step"] > warmup]
    shutil.rmtree(run_dir, ignore_errors=True)
    logged = lambda key: median_or_nan(l.get(key) for l in train)  # null (NaN) when unknown
    return {
        "tokens_per_s": logged("tokens_per_s"),
        "mfu": logged("mfu"),
        "sgemm_fraction": logged("sgemm_fraction"),
        "sgemm_gflops": logged("sgemm_flops") / 1e9,
        "hardware_peak_gflops": logged("peak_flops") / 1e9,
        "logged_flops_per_token": logged("model_flops_per_s") / logged("tokens_per_s"),
        "peak_rss_bytes": rss,
        "loss": train[-1]["loss"],
        "flops_per_token": train_flops_per_token(head_fraction=MLM_PROBABILITY, **SHAPE),
    }


def run_pytorch(steps, warmup, env, extra):
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "scripts/bench/pytorch_bert_mlm.py"),
           "--steps", str(steps), "--warmup", str(warmup), "--threads", "2",
           "--mlm-probability", str(MLM_PROBABILITY)] + extra
    text, rss = run_child(cmd, env)
    result = json.loads(text.strip().splitlines()[-1])
    result["peak_rss_bytes"] = rss
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.environ.get("MEMTRAIN_BIN",
                                                       os.path.join(ROOT, "build/memtrain")))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    env = dict(os.environ)
    core = cpu_coretype()
    if core and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = core
    runs = {name: [] for name, _, _ in SIDES}
    for r in range(a.rounds):
        for name, program, extra in SIDES:
            if program == "memtrain":
                runs[name].append(run_memtrain(binary, a.steps, a.warmup, env, extra))
            else:
                runs[name].append(run_pytorch(a.steps, a.warmup, env, extra))
        print(f"round {r + 1}: " + ", ".join(f"{name} {runs[name][-1]['tokens_per_s']:.0f}"
                                            for name, _, _ in SIDES) + " tokens/s", flush=True)

    def med(name, key):
        return median_or_nan(x[key] for x in runs[name])

    sides = {}
    for name, _, extra in SIDES:
        tps, fpt = med(name, "tokens_per_s"), runs[name][0]["flops_per_token"]
        sides[name] = {
            "options": extra,
            "tokens_per_s": tps,
            "tokens_per_s_rounds": [x["tokens_per_s"] for x in runs[name]],
            "peak_rss_bytes": med(name, "peak_rss_bytes"),
            "flops_per_token": fpt,
            "model_gflops": fpt * tps / 1e9,
            "loss_last_step": runs[name][-1]["loss"],
        }
        if name.startswith("pytorch"):
            sides[name]["masked_fraction"] = med(name, "masked_fraction")
    ratios = {}
    for label, num, den in RATIOS:
        n, d = sides[num], sides[den]
        ratios[label] = {
            "tokens_per_s": n["tokens_per_s"] / d["tokens_per_s"],
            "tokens_per_s_rounds": [x / y for x, y in zip(n["tokens_per_s_rounds"],
                                                          d["tokens_per_s_rounds"])],
            "peak_rss": n["peak_rss_bytes"] / d["peak_rss_bytes"],
            "model_gflops": n["model_gflops"] / d["model_gflops"],
        }
    sgemm, hw_peak = med("memtrain", "sgemm_gflops"), med("memtrain", "hardware_peak_gflops")
    # memtrain's own count (metrics.jsonl model_flops_per_s / tokens_per_s): = the formula's.
    memtrain_fpt_logged = med("memtrain", "logged_flops_per_token")
    report = finite_or_none({
        "config": CONFIG, "binary": binary, "rounds": a.rounds, "timed_steps": a.steps,
        "warmup_steps": a.warmup, "openblas_coretype": env.get("OPENBLAS_CORETYPE"),
        "sides": sides, "ratios": ratios,
        "memtrain_sgemm_gflops": sgemm, "memtrain_sgemm_fraction": med("memtrain", "sgemm_fraction"),
        "memtrain_hardware_peak_gflops": hw_peak, "memtrain_mfu": med("memtrain", "mfu"),
        "memtrain_logged_flops_per_token": memtrain_fpt_logged,
    })

    print()
    names = [name for name, _, _ in SIDES]
    print(f"{'':24}" + "".join(f"{n:>16}" for n in names))
    rows = [("tokens/s (median)", lambda s: f"{s['tokens_per_s']:.0f}"),
            ("peak RSS (MiB)", lambda s: f"{s['peak_rss_bytes'] / 2**20:.0f}"),
            ("model MFLOP/token", lambda s: f"{s['flops_per_token'] / 1e6:.1f}"),
            ("model GFLOP/s", lambda s: f"{s['model_gflops']:.1f}")]
    for label, fmt in rows:
        print(f"{label:24}" + "".join(f"{fmt(sides[n]):>16}" for n in names))
    print()
    print(f"{'ratio':48}{'tokens/s':>10}{'per round':>22}{'peak RSS':>10}{'GFLOP/s':>9}")
    for label, r in ratios.items():
        rounds = " ".join(f"{x:.2f}" for x in r["tokens_per_s_rounds"])
        print(f"{label:48}{r['tokens_per_s']:10.2f}{rounds:>22}{r['peak_rss']:10.2f}"
              f"{r['model_gflops']:9.2f}")
    print()
    m = sides["memtrain"]
    print(f"memtrain (fp32) achieved {m['model_gflops']:.1f} model GFLOP/s = "
          f"{m['model_gflops'] / sgemm:.0%} of the sgemm it measured ({sgemm:.1f} GFLOP/s, "
          f"2 threads), MFU {m['model_gflops'] / hw_peak:.0%} of the hardware peak "
          f"{hw_peak:.1f} GFLOP/s; FLOPs/token logged {memtrain_fpt_logged / 1e6:.1f} M, "
          f"formula {m['flops_per_token'] / 1e6:.1f} M")
    print("model MFLOP/token: training (forward + backward) FLOPs per input token, "
          "scripts/bench/bert_flops.py")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
