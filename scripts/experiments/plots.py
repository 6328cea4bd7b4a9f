#!/usr/bin/python3
"""The grid's PNGs (matplotlib from Debian's python3-matplotlib), from cells.csv and run.json.

  utilization_per_policy.png   utilization of every policy in every measured cell
  peak_by_tag.png              bytes by tag at the step's peak (stacked), per configuration
  max_micro_batch.png          largest micro-batch that fits, per setting and device
  timeline.png                 one step: allocated and reserved bytes, best_fit against pytorch

    /usr/bin/python3 scripts/experiments/plots.py results/bert_large_memory
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grid  # noqa: E402
from report import GiB, group, load  # noqa: E402

MAIN_LAYOUT = "dp4_40gb"


def label(key):
    _, kind, precision, recompute, seq, mb = key
    return f"{precision}/{recompute}/{seq}x{mb}" + (" dyn" if kind == "dynamic" else "")


def measured(cells, layout=MAIN_LAYOUT):
    return [(k, c) for k, c in cells.items()
            if k[0] == layout and c.get("best_fit", {}).get("status") not in (None, "not_available", "failed")]


def utilization_plot(cells, out):
    items = measured(cells)
    if not items:
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(items) + 3), 5))
    xs = range(len(items))
    for policy, marker in zip(grid.POLICIES, "xos^D"):
        ys = [float(c[policy]["utilization"]) if c[policy]["status"] == "ok" else float("nan")
              for _, c in items]
        ax.plot(xs, ys, marker, label=policy, markersize=5, linestyle="none")
    ax.axhline(0.97, color="grey", linestyle="--", linewidth=0.8)
    ax.axhline(0.95, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xticks(list(xs), [label(k) for k, _ in items], rotation=90, fontsize=7)
    ax.set_ylabel("peak allocated / peak reserved")
    ax.set_ylim(0.6, 1.01)
    ax.set_title("BERT-Large, one training step per configuration, data parallel 4 x 40 GB (per rank);"
                 "\ndashed: 0.97 target (fixed shapes), dotted: 0.95 (dynamic lengths); OOM cells omitted",
                 fontsize=9)
    ax.legend(fontsize=8, ncol=5, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / "utilization_per_policy.png", dpi=120)
    plt.close(fig)


def tag_plot(cells, out):
    items = [(k, c) for k, c in measured(cells) if k[1] == "fixed"]
    if not items:
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(items) + 3), 5.5))
    bottom = [0.0] * len(items)
    for tag in grid.TAGS + ["other"]:
        ys = [int(c["best_fit"][f"at_peak_{tag}_bytes"] or 0) / GiB for _, c in items]
        if not any(ys):
            continue
        ax.bar(range(len(items)), ys, bottom=bottom, label=tag)
        bottom = [b + y for b, y in zip(bottom, ys)]
    cap = int(items[0][1]["best_fit"]["capacity_bytes"]) / GiB
    ax.axhline(cap, color="black", linestyle="--", linewidth=0.8)
    ax.text(0, cap, f" device {cap:.0f} GiB", va="bottom", fontsize=8)
    ax.set_xticks(range(len(items)), [label(k) for k, _ in items], rotation=90, fontsize=7)
    ax.set_ylabel("live bytes at the step's peak (GiB)")
    ax.set_title("Peak memory by tag (requested bytes, any policy), data parallel 4 x 40 GB per rank",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "peak_by_tag.png", dpi=120)
    plt.close(fig)


def micro_batch_plot(cells, out):
    layouts = [("dp4_40gb", "4 x 40 GB (per rank)"), ("single_80gb", "1 x 80 GB")]
    settings = []
    for k, c in cells.items():
        s = (k[2], k[3], k[4])
        if k[1] == "fixed" and s not in settings:
            settings.append(s)
    values = {}
    for k, c in cells.items():
        r = c.get("best_fit", {})
        if r.get("max_micro_batch_size") not in (None, ""):
            values[(k[0], k[2], k[3], k[4])] = int(r["max_micro_batch_size"])
    if not values:
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(settings) + 3), 5))
    width = 0.4
    for i, (layout, name) in enumerate(layouts):
        ys = [values.get((layout, *s), 0) for s in settings]
        ax.bar([x + (i - 0.5) * width for x in range(len(settings))], ys, width, label=name)
    ax.set_xticks(range(len(settings)), [f"{p}/{r}/seq {s}" for p, r, s in settings],
                  rotation=90, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("largest micro-batch that fits (memtrain plan, best_fit; log scale)")
    ax.set_title("Largest micro-batch per setting (0: does not fit; missing: not available yet)",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "max_micro_batch.png", dpi=120)
    plt.close(fig)


def counters(path):
    """(allocated, reserved) totals after each counter event of a Chrome trace, in event order."""
    events = json.load(open(path))["traceEvents"]
    allocated = reserved = 0
    xs, alloc, res = [], [], []
    for e in events:
        if e.get("ph") != "C":
            continue
        if e["name"] == "allocated_bytes":
            allocated = e["args"]["total"]
        elif e["name"] == "reserved_bytes":
            reserved = e["args"]["total"]
        else:
            continue
        xs.append(len(xs))
        alloc.append(allocated / GiB)
        res.append(reserved / GiB)
    return xs, alloc, res


def timeline_plot(run, out):
    tl = run.get("timeline", {})
    traces = tl.get("traces", {})
    traces = {p: t for p, t in traces.items() if Path(t).exists()}
    if not traces:
        return
    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 3.2 * len(traces)), sharex=True)
    axes = axes if len(traces) > 1 else [axes]
    for ax, (policy, path) in zip(axes, traces.items()):
        xs, alloc, res = counters(path)
        ax.plot(xs, res, label="reserved", color="tab:red", linewidth=1)
        ax.plot(xs, alloc, label="allocated", color="tab:blue", linewidth=1)
        peak_a, peak_r = max(alloc), max(res)
        ax.set_title(f"{policy}: peak allocated {peak_a:.2f} GiB, peak reserved {peak_r:.2f} GiB, "
                     f"utilization {peak_a / peak_r:.3f}", fontsize=9)
        ax.set_ylabel("GiB")
        ax.legend(fontsize=8, loc="upper left")
    axes[-1].set_xlabel("allocator event, in the order of the run (model build, step-0 evaluation, step, final evaluation)")
    fig.suptitle(f"One training step of {Path(run['config']).stem} ({tl.get('setting')}), "
                 f"{'compute run' if run.get('compute') else 'dry run'}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "timeline.png", dpi=120)
    plt.close(fig)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/bert_large_memory")
    cells = group(load(out / "cells.csv"))
    run = json.load(open(out / "run.json"))
    utilization_plot(cells, out)
    tag_plot(cells, out)
    micro_batch_plot(cells, out)
    timeline_plot(run, out)
    print(f"plots: {', '.join(sorted(p.name for p in out.glob('*.png')))}")


if __name__ == "__main__":
    main()
