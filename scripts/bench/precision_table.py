#!/usr/bin/env python3
"""Markdown table of scripts/bench_precision.sh's cells.

Arguments: the cells folder, then one NAME:DTYPE:RECOMPUTE:SEQ:EXIT per cell. Each cell's
run_dir/metrics.jsonl has one training line per step (log_interval 1): tokens/s is the median
of the steps after the first, peak allocated bytes the last line's peak_allocated_bytes.
"""
import json
import statistics
import sys


def read_cell(folder):
    lines = [json.loads(l) for l in open(f"{folder}/metrics.jsonl") if l.strip()]
    train = [l for l in lines if "tokens_per_s" in l]
    timed = [l["tokens_per_s"] for l in train if l["step"] > 1]
    return statistics.median(timed), train[-1]["peak_allocated_bytes"], len(timed)


def main():
    folder, specs = sys.argv[1], sys.argv[2:]
    rows = []
    for spec in specs:
        name, dtype, recompute, seq, code = spec.split(":")
        if code != "0":
            rows.append((dtype, recompute, int(seq), None, None, 0))
            continue
        tps, peak, n = read_cell(f"{folder}/{name}")
        rows.append((dtype, recompute, int(seq), tps, peak, n))
    base = {r[2]: r for r in rows if r[0] == "fp32" and r[1] == "none" and r[3] is not None}
    print("| precision | recompute | seq | tokens/s | vs fp32/none | peak allocated | vs fp32/none |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for dtype, recompute, seq, tps, peak, n in rows:
        if tps is None:
            print(f"| {dtype} | {recompute} | {seq} | n/a (not built) | | | |")
            continue
        b = base.get(seq)
        rt = f"{tps / b[3]:.2f}x" if b else ""
        rp = f"{peak / b[4]:.2f}x" if b else ""
        print(f"| {dtype} | {recompute} | {seq} | {tps:.0f} | {rt} | {peak / 2**20:.1f} MiB | {rp} |")
    steps = sorted({r[5] for r in rows if r[3] is not None})
    print()
    print("bert-base (configs/bert-base.yaml, with the extra arguments below if any), mock data, micro-batch 8; tokens/s = median over "
          f"{'/'.join(map(str, steps))} timed steps after the first; peak allocated = the caching "
          "allocator's peak allocated bytes over the run (parameters, gradients, masters, "
          "optimizer state, activations, temporaries).")


if __name__ == "__main__":
    main()
