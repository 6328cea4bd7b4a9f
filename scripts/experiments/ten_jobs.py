#!/usr/bin/python3
"""The ten-jobs experiment (issue 44, section 2; docs/memory-experiments.md, "Ten jobs on one
80 GB device"): records the traces of configs/workloads/ten-jobs.yaml by dry runs, then replays
the workload under every policy with and without cross-job release.

Each job's trace is one dry run (`memtrain train --dry-run`, memory.trace true, mock data, three
steps; the dynamic-length job eight, since its steps differ) of BERT-Base
(configs/bert-base.yaml) or BERT-Large (configs/experiments/bert-large-memory.yaml) at the
job's precision, sequence length and micro-batch, recorded on a device no job outgrows. The
traces go to configs/workloads/traces/ (not in git: generated, about 2 MB), where the workload
file names them, so after this script `memtrain replay --workload configs/workloads/ten-jobs.yaml`
works from a fresh clone.

    /usr/bin/python3 scripts/experiments/ten_jobs.py --binary build/memtrain [--out results/ten_jobs] [--record-only]

Writes OUT/replay.json and OUT/replay-no-release.json (`memtrain replay --workload --json`),
OUT/commands.txt, and prints a table; scripts/experiments/workload_plots.py draws the plot.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "configs/workloads/ten-jobs.yaml"
TRACES = ROOT / "configs/workloads/traces"
BASE = "configs/bert-base.yaml"
LARGE = "configs/experiments/bert-large-memory.yaml"
RECORD_TARGET = "4096GiB"

# name -> (config, precision, sequence length, micro-batch, dynamic lengths). The names are the
# trace files' stems, which ten-jobs.yaml names.
JOBS = {
    "large-fp32-s512-b16": (LARGE, "fp32", 512, 16, False),
    "large-bf16-s512-b32": (LARGE, "bf16", 512, 32, False),
    "large-bf16-s512-b8": (LARGE, "bf16", 512, 8, False),
    "large-fp32-s128-b64": (LARGE, "fp32", 128, 64, False),
    "large-bf16-s128-b32": (LARGE, "bf16", 128, 32, False),
    "large-fp32-dyn512-b8": (LARGE, "fp32", 512, 8, True),
    "base-fp32-s512-b32": (BASE, "fp32", 512, 32, False),
    "base-bf16-s512-b16": (BASE, "bf16", 512, 16, False),
    "base-fp32-s128-b64": (BASE, "fp32", 128, 64, False),
    "base-bf16-s128-b128": (BASE, "bf16", 128, 128, False),
}


def record_command(binary, name, run_dir):
    config, precision, seq, micro, dynamic = JOBS[name]
    return [str(binary), "train", "--config", config, "--dry-run", "--target", RECORD_TARGET,
            "--run-dir", str(run_dir), "--set", "data.mock=true", "--set", f"precision.dtype={precision}",
            "--set", f"data.seq_length={seq}", "--set", f"data.dynamic_seq_length={str(dynamic).lower()}",
            "--set", f"training.micro_batch_size={micro}", "--set", f"training.global_batch_size={micro}",
            "--set", f"training.max_steps={8 if dynamic else 3}", "--set", "training.eval_interval=1000",
            "--set", "training.eval_steps=1", "--set", "memory.recompute=none", "--set", "memory.trace=true"]


def run(cmd, log):
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log.write(f"{' '.join(cmd)}  # exit {done.returncode}, {time.monotonic() - start:.1f} s\n")
    if done.returncode != 0:
        sys.exit(f"ten_jobs.py: {' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr}")
    return done.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default="build/memtrain")
    p.add_argument("--out", default="results/ten_jobs")
    p.add_argument("--record-only", action="store_true", help="record the traces and stop")
    args = p.parse_args()
    binary = (ROOT / args.binary).resolve() if not Path(args.binary).is_absolute() else Path(args.binary)
    out = ROOT / args.out
    (out / "runs").mkdir(parents=True, exist_ok=True)
    TRACES.mkdir(parents=True, exist_ok=True)
    with open(out / "commands.txt", "w") as log:
        for name in JOBS:
            run_dir = out / "runs" / name
            shutil.rmtree(run_dir, ignore_errors=True)
            run(record_command(binary, name, run_dir), log)
            shutil.copyfile(run_dir / "memory_trace.csv", TRACES / f"{name}.csv")
        if args.record_only:
            return
        for release, file in ((True, "replay.json"), (False, "replay-no-release.json")):
            cmd = [str(binary), "replay", "--workload", str(WORKLOAD), "--json"] + ([] if release else ["--no-release"])
            (out / file).write_text(run(cmd, log))
    print("| policy | release | failures | failures others' cache would cover | stranded GiB (sum) | "
          "peak alloc. GiB | peak res. GiB | util. at peak | mean util. | mean device util. |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for file in ("replay-no-release.json", "replay.json"):
        report = json.loads((out / file).read_text())
        for r in report["policies"]:
            print(f"| {r['policy']} | {'yes' if r['release'] else 'no'} | {r['failures']} | "
                  f"{r['failures_cached_memory_would_cover']} | {r['stranded_bytes_at_failures'] / 2**30:.2f} | "
                  f"{r['peak_allocated_bytes'] / 2**30:.2f} | {r['peak_reserved_bytes'] / 2**30:.2f} | "
                  f"{r['utilization']:.3f} | {r['mean_utilization']:.3f} | {r['mean_device_utilization']:.3f} |")


if __name__ == "__main__":
    main()
