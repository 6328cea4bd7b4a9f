#!/usr/bin/python3
"""Utilization over time of a multi-job replay (`memtrain replay --workload --json`), per policy.

Reads OUT/replay-no-release.json and OUT/replay.json (scripts/experiments/ten_jobs.py writes
them) and draws OUT/utilization_over_time.png: for each tick of the common clock (one training
step of every running job), at its fullest moment, bytes allocated by all jobs over bytes they
reserve (top row) and over the device's capacity (bottom row); left without cross-job release,
right with it; failures marked with x.

    /usr/bin/python3 scripts/experiments/workload_plots.py results/ten_jobs
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"no_cache": "tab:gray", "pytorch": "tab:red", "best_fit": "tab:blue", "vmm_stitch": "tab:green",
          "planned": "tab:purple"}


def series(report):
    """(ticks, allocated / reserved, allocated / capacity, ticks with a failure) of one policy."""
    t = report["timeline"]
    ticks, util, device, failed = [], [], [], []
    for tick, a, r, f in zip(t["tick"], t["allocated_bytes"], t["reserved_bytes"], t["failures"]):
        if r == 0:
            continue
        ticks.append(tick)
        util.append(a / r)
        device.append(a / report["capacity_bytes"])
        if f:
            failed.append((tick, a / r))
    return ticks, util, device, failed


def main(out):
    out = Path(out)
    files = [("without cross-job release", out / "replay-no-release.json"), ("with cross-job release", out / "replay.json")]
    fig, axes = plt.subplots(2, 2, figsize=(13, 7), sharex=True, sharey="row")
    for col, (title, path) in enumerate(files):
        data = json.loads(path.read_text())
        for report in data["policies"]:
            ticks, util, device, failed = series(report)
            color = COLORS.get(report["policy"])
            label = f"{report['policy']} ({report['failures']} failed)"
            axes[0][col].plot(ticks, util, label=label, color=color, linewidth=1)
            axes[1][col].plot(ticks, device, label=report["policy"], color=color, linewidth=1)
            if failed:
                axes[0][col].scatter([x for x, _ in failed], [y for _, y in failed], marker="x", color=color, s=40)
        axes[0][col].set_title(f"{Path(data['workload']).name}, {title}")
        axes[0][col].legend(fontsize=8, loc="lower left")
        axes[1][col].set_xlabel("tick (one training step of every running job)")
    axes[0][0].set_ylabel("allocated / reserved")
    axes[1][0].set_ylabel("allocated / capacity")
    axes[0][0].set_ylim(0.5, 1.02)
    axes[1][0].set_ylim(0, 1.02)
    fig.tight_layout()
    fig.savefig(out / "utilization_over_time.png", dpi=110)
    print(f"wrote {out / 'utilization_over_time.png'}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: workload_plots.py OUT (with replay.json and replay-no-release.json)")
    main(sys.argv[1])
