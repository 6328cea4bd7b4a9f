"""memtrain's 16-bit speed over its own fp32 speed (issue 15: bf16 and fp16 at least 0.95 of fp32),
with only memtrain running: the dtypes take turns within each round, so load on this shared
machine falls on both sides alike, and each round's ratio is printed (the six-program benchmark,
compare.py, moves this ratio by 0.1 from round to round). tokens/s of a run is the median of its
steps after the warm-up, as compare.py takes it; the ratio is of the medians over rounds.
Prints one JSON object last."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ROOT, cpu_coretype, run_memtrain  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.environ.get("MEMTRAIN_BIN", os.path.join(ROOT, "build/memtrain")))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dtypes", default="fp32,fp16", help="comma-separated, the first is the denominator")
    a = ap.parse_args()
    dtypes = a.dtypes.split(",")
    if len(dtypes) < 2 or any(d not in ("fp32", "fp16", "bf16") for d in dtypes):
        sys.exit(f"dtype_ratio: --dtypes {a.dtypes}: expected two or more of fp32, fp16, bf16")
    env = dict(os.environ)
    core = cpu_coretype()
    if core and "OPENBLAS_CORETYPE" not in env:
        env["OPENBLAS_CORETYPE"] = core
    tps = {d: [] for d in dtypes}
    for r in range(a.rounds):
        for d in dtypes:
            run = run_memtrain(os.path.abspath(a.binary), a.steps, a.warmup, env, ["--set", f"precision.dtype={d}"])
            tps[d].append(run["tokens_per_s"])
        base = dtypes[0]
        print(f"round {r + 1}: " + ", ".join(f"{d} {tps[d][-1]:.0f}" for d in dtypes) + " tokens/s; " +
              ", ".join(f"{d}/{base} {tps[d][-1] / tps[base][-1]:.3f}" for d in dtypes[1:]), flush=True)
    base = dtypes[0]
    report = {"openblas_coretype": env.get("OPENBLAS_CORETYPE"), "rounds": a.rounds, "timed_steps": a.steps,
              "tokens_per_s": {d: statistics.median(tps[d]) for d in dtypes},
              "tokens_per_s_rounds": tps,
              "ratios": {f"{d}/{base}": statistics.median(tps[d]) / statistics.median(tps[base]) for d in dtypes[1:]},
              "ratio_rounds": {f"{d}/{base}": [x / y for x, y in zip(tps[d], tps[base])] for d in dtypes[1:]}}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
