#!/usr/bin/python3
"""Issue 48 section 7: gradient compression's convergence over several seeds and batch splits.

Every method of the README's convergence table is trained on configs/main.yaml (2 ranks, 1,500
steps, 32 rows a step) for every seed and every batch split:
  - "16x1": micro_batch_size 16 per rank, no accumulation (the table's original split);
  - "8x2":  micro_batch_size 8 per rank, 2 accumulation steps (the same 32 rows a step).
Each compressed run is compared with its reference of the same seed and split (AdamW with
main.yaml's adam_beta2 0.98 for PowerSGD and 1-bit; AdamW with 0.999 for 1-bit Adam). The
held-out eval_loss at step 1500 is deterministic for a seed and split (any run repeats it bit
for bit), so one run per cell is enough; the spread is over seeds and splits.

Writes runs.csv (one row per run, with its command) and table.md (per method: the mean, min
and max of the relative difference over every cell, and the worst cell).

    /usr/bin/python3 scripts/experiments/compression_convergence.py --binary build/memtrain \
        --out runs/compression-convergence [--seeds 1234,4321,777] [--steps 1500]
"""
import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memtrain_cli  # noqa: E402

BETA2 = ["--set", "training.adam_beta2=0.999"]
# name, extra arguments, the reference it is compared with (None: it is a reference)
METHODS = [
    ("none", [], None),
    ("powersgd", ["--set", "compression.method=powersgd"], "none"),
    ("onebit", ["--set", "compression.method=onebit"], "none"),
    ("none_beta2_0.999", BETA2, None),
    ("onebit_adam", BETA2 + ["--set", "training.optimizer=onebit_adam", "--set", "compression.freeze_step=300"],
     "none_beta2_0.999"),
]
SPLITS = {"16x1": 16, "8x2": 8}  # micro_batch_size per rank at 2 ranks and 32 rows a step
RANKS = 2


def train(args, method, extra, seed, split, out):
    run_dir = out / "runs" / f"{method}-seed{seed}-{split}"
    metrics = run_dir / "metrics.jsonl"
    argv = ["train", "--config", "configs/main.yaml", "--run-dir", str(run_dir),
            "--set", f"training.max_steps={args.steps}", "--set", f"training.eval_interval={args.steps}",
            "--set", "training.log_interval=100", "--set", "training.num_threads=1",
            "--set", f"training.seed={seed}", "--set", "training.global_batch_size=32",
            "--set", f"training.micro_batch_size={SPLITS[split]}", *extra]
    command = " ".join(memtrain_cli.MPIRUN + [str(RANKS), args.binary, *argv])
    if not metrics.exists() or not any('"eval_loss"' in l for l in metrics.read_text().splitlines()):
        if run_dir.exists():
            import shutil
            shutil.rmtree(run_dir)
        memtrain_cli.check(memtrain_cli.run(args.binary, argv, timeout_s=3600, ranks=RANKS))
    eval_loss, ratio = None, None
    for line in metrics.read_text().splitlines():
        j = json.loads(line)
        if j.get("step") == args.steps and "eval_loss" in j:
            eval_loss = j["eval_loss"]
        if j.get("compression_ratio") is not None:
            ratio = j["compression_ratio"]
    return {"method": method, "seed": seed, "split": split, "eval_loss": eval_loss,
            "compression_ratio": ratio, "command": command}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="build/memtrain")
    p.add_argument("--out", default="runs/compression-convergence")
    p.add_argument("--seeds", default="1234,4321,777")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--table-only", action="store_true", help="rewrite table.md from runs.csv without training")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]

    rows = []
    if args.table_only:
        with open(out / "runs.csv") as f:
            for r in csv.DictReader(f):
                r["seed"] = int(r["seed"])
                r["eval_loss"] = float(r["eval_loss"])
                r["compression_ratio"] = float(r["compression_ratio"])
                rows.append(r)
    else:
        for seed in seeds:
            for split in SPLITS:
                for method, extra, _ in METHODS:
                    row = train(args, method, extra, seed, split, out)
                    rows.append(row)
                    print(f"{method:18s} seed {seed:5d} split {split}: eval_loss {row['eval_loss']:.4f}", flush=True)
        with open(out / "runs.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    loss = {(r["method"], r["seed"], r["split"]): r["eval_loss"] for r in rows}
    ratio = {r["method"]: r["compression_ratio"] for r in rows}
    lines = [f"| method | vs reference: mean | min | max | worst cell | eval_loss range | ratio |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for method, _, ref in METHODS:
        values = [loss[(method, s, sp)] for s in seeds for sp in SPLITS]
        span = f"{min(values):.3f}-{max(values):.3f}"
        if ref is None:
            lines.append(f"| {method} (reference) | | | | | {span} | 1 |")
            continue
        rel = {(s, sp): loss[(method, s, sp)] / loss[(ref, s, sp)] - 1 for s in seeds for sp in SPLITS}
        worst = max(rel, key=rel.get)
        lines.append(f"| {method} vs {ref} | {100 * statistics.mean(rel.values()):+.1f} % | "
                     f"{100 * min(rel.values()):+.1f} % | {100 * max(rel.values()):+.1f} % | "
                     f"seed {worst[0]}, {worst[1]}: {loss[(method, *worst)]:.3f} against "
                     f"{loss[(ref, *worst)]:.3f} | {span} | {ratio[method]:.1f} |")
    # Every cell: eval_loss, and for a compressed method its difference from its reference.
    cells = [(s, sp) for s in seeds for sp in SPLITS]
    lines += ["", "| method | " + " | ".join(f"seed {s}, {sp}" for s, sp in cells) + " |",
              "|---|" + "---:|" * len(cells)]
    for method, _, ref in METHODS:
        parts = []
        for s, sp in cells:
            v = loss[(method, s, sp)]
            parts.append(f"{v:.3f}" if ref is None else f"{v:.3f} ({100 * (v / loss[(ref, s, sp)] - 1):+.1f} %)")
        lines.append(f"| {method} | " + " | ".join(parts) + " |")
    table = "\n".join(lines) + "\n"
    (out / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
