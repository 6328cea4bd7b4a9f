#!/usr/bin/python3
"""Side-by-side training throughput and peak memory: memtrain against PyTorch (one run).

Both train the configuration of configs/bench-bert.yaml (BERT hidden 768, 12 heads, FFN 3072,
2 layers, vocab 30522, micro-batch 8, seq 128, fp32, AdamW, mock data) on 2 threads. The two
programs alternate for --rounds rounds so machine noise hits both alike; each figure is the
median over rounds of each program's median step throughput. Peak RSS is the child's own
(os.wait4). Both run with the same OPENBLAS_CORETYPE (see README: on these virtual machines
OpenBLAS otherwise falls back to its generic kernels), so neither is handicapped.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_coretype():
    flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0].split()
    if {"avx512f", "avx512bw", "avx512vl"} <= set(flags):
        return "SkylakeX"
    if {"avx2", "fma"} <= set(flags):
        return "Haswell"
    return None


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


def run_memtrain(binary, steps, warmup, env):
    run_dir = tempfile.mkdtemp(prefix="memtrain-bench-")
    shutil.rmtree(run_dir)
    cmd = [binary, "train", "--config", "configs/bench-bert.yaml", "--run-dir", run_dir,
           "--set", f"training.max_steps={steps + warmup}"]
    text, rss = run_child(cmd, env)
    lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    train = [l for l in lines if "tokens_per_s" in l and l["step"] > warmup]
    shutil.rmtree(run_dir, ignore_errors=True)
    peak = re.search(r"sgemm peak ([0-9.]+) GFLOP/s", text)
    peak_gflops = float(peak.group(1)) if peak else float("nan")
    return {
        "tokens_per_s": statistics.median(l["tokens_per_s"] for l in train),
        "mfu": statistics.median(l["mfu"] for l in train),
        "sgemm_peak_gflops": peak_gflops,
        "peak_rss_bytes": rss,
    }


def run_pytorch(steps, warmup, env):
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "scripts/bench/pytorch_bert_mlm.py"),
           "--steps", str(steps), "--warmup", str(warmup), "--threads", "2"]
    text, rss = run_child(cmd, env)
    result = json.loads(text.strip().splitlines()[-1])
    result["peak_rss_bytes"] = rss
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/memtrain"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    env = dict(os.environ)
    core = cpu_coretype()
    if core and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = core
    mem, torch = [], []
    for r in range(a.rounds):
        mem.append(run_memtrain(a.binary, a.steps, a.warmup, env))
        torch.append(run_pytorch(a.steps, a.warmup, env))
        print(f"round {r + 1}: memtrain {mem[-1]['tokens_per_s']:.0f} tokens/s, "
              f"pytorch {torch[-1]['tokens_per_s']:.0f} tokens/s", flush=True)
    med = lambda rows, k: statistics.median(x[k] for x in rows)
    m_tps, t_tps = med(mem, "tokens_per_s"), med(torch, "tokens_per_s")
    m_rss, t_rss = med(mem, "peak_rss_bytes"), med(torch, "peak_rss_bytes")
    peak = med(mem, "sgemm_peak_gflops")
    mfu = med(mem, "mfu")
    report = {
        "config": "configs/bench-bert.yaml", "rounds": a.rounds, "timed_steps": a.steps,
        "openblas_coretype": env.get("OPENBLAS_CORETYPE"),
        "memtrain_tokens_per_s": m_tps, "pytorch_tokens_per_s": t_tps,
        "speedup": m_tps / t_tps,
        "memtrain_peak_rss_bytes": m_rss, "pytorch_peak_rss_bytes": t_rss,
        "rss_ratio": m_rss / t_rss,
        "sgemm_peak_gflops": peak, "memtrain_achieved_gflops": mfu * peak, "memtrain_mfu": mfu,
    }
    print()
    print(f"{'':22}{'memtrain':>12}{'pytorch':>12}{'ratio':>8}")
    print(f"{'tokens/s (median)':22}{m_tps:12.0f}{t_tps:12.0f}{m_tps / t_tps:8.2f}")
    print(f"{'peak RSS (MiB)':22}{m_rss / 2**20:12.0f}{t_rss / 2**20:12.0f}{m_rss / t_rss:8.2f}")
    print(f"memtrain achieved {mfu * peak:.1f} GFLOP/s = {100 * mfu:.0f}% of the measured "
          f"sgemm peak {peak:.1f} GFLOP/s (2 threads)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
