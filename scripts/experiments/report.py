#!/usr/bin/python3
"""cells.csv -> table.md, and the check of issue 4's targets (printed; exit 0 either way).

Targets (issue 4, "Targets"): best_fit and vmm_stitch keep utilization (peak allocated / peak
reserved) at or above 0.97 in every fixed-shape cell and at or above 0.95 in the dynamic-length
run, with pytorch's figure from the same trace beside them. A cell counts when its trace exists
and the policy served every request on the layout's device (status ok); cells that do not fit
are listed apart, cells whose feature has not landed are shown as not available.

    /usr/bin/python3 scripts/experiments/report.py results/bert_large_memory
"""
import csv
import sys
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grid  # noqa: E402

GiB = float(1 << 30)
TARGET = {"fixed": 0.97, "dynamic": 0.95}
CHECKED = ["best_fit", "vmm_stitch"]


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def group(rows):
    """(layout, kind, precision, recompute, seq, mb) -> {policy: row}, in file order."""
    cells = OrderedDict()
    for r in rows:
        key = (r["layout"], r["kind"], r["precision"], r["recompute"], int(r["seq_length"]),
               int(r["micro_batch_size"]))
        cells.setdefault(key, {})[r["policy"]] = r
    return cells


def gib(x):
    return f"{int(x) / GiB:.2f}" if x not in ("", None) else ""


def util(r):
    if r["status"] in ("not_available", "failed"):
        return "n/a"
    u = f"{float(r['utilization']):.3f}"
    return u if r["status"] == "ok" else f"{u} (OOM)"


def check_targets(cells):
    """Returns (lines, failures): one line per checked cell group and target."""
    lines, failures = [], 0
    for kind in ("fixed", "dynamic"):
        for policy in CHECKED:
            vals = [(key, c[policy]) for key, c in cells.items()
                    if key[1] == kind and policy in c and c[policy]["status"] == "ok"]
            if not vals:
                lines.append(f"{kind:<8} {policy:<11} no measured cell")
                continue
            worst_key, worst = min(vals, key=lambda kv: float(kv[1]["utilization"]))
            below = [kv for kv in vals if float(kv[1]["utilization"]) < TARGET[kind]]
            failures += len(below)
            py = cells[worst_key].get("pytorch", {})
            lines.append(
                f"{kind:<8} {policy:<11} cells {len(vals):>3}  min utilization "
                f"{float(worst['utilization']):.4f} (target >= {TARGET[kind]})  "
                f"{'PASS' if not below else f'FAIL in {len(below)} cells'}  "
                f"worst: {'/'.join(map(str, worst_key))}, pytorch there {util(py) if py else '-'}")
        py_vals = [float(c["pytorch"]["utilization"]) for key, c in cells.items()
                   if key[1] == kind and c.get("pytorch", {}).get("status") == "ok"]
        if py_vals:
            lines.append(f"{kind:<8} {'pytorch':<11} cells {len(py_vals):>3}  utilization "
                         f"min {min(py_vals):.4f}, median {sorted(py_vals)[len(py_vals) // 2]:.4f}, "
                         f"max {max(py_vals):.4f} (reported beside, no target)")
    return lines, failures


def table(cells, layout, kind="fixed", reasons=None):
    """Markdown rows of one layout; a not-available cell points at its reason in `reasons`."""
    reasons = [] if reasons is None else reasons
    head = ("| precision | recompute | seq | micro-batch | " +
            " | ".join(grid.POLICIES) +
            " | peak allocated GiB | device util. | fragmentation | largest micro-batch |")
    out = [head, "|" + " --- |" * 4 + " ---: |" * (len(grid.POLICIES) + 4)]
    for key, c in cells.items():
        if key[0] != layout or key[1] != kind:
            continue
        bf = c.get("best_fit", {})
        if bf.get("status") in ("not_available", "failed"):
            if bf["reason"] not in reasons:
                reasons.append(bf["reason"])
            note = reasons.index(bf["reason"]) + 1
            what = "not available yet" if bf["status"] == "not_available" else "FAILED"
            out.append(f"| {key[2]} | {key[3]} | {key[4]} | {key[5]} | " +
                       " | ".join("n/a" for _ in grid.POLICIES) +
                       f" | {what} [{note}] | | | |")
            continue
        out.append(
            f"| {key[2]} | {key[3]} | {key[4]} | {key[5]} | " +
            " | ".join(util(c[p]) for p in grid.POLICIES) +
            f" | {gib(bf['peak_allocated_bytes'])} | {float(bf['device_utilization']):.3f}"
            f" | {float(bf['fragmentation']):.3f} | {bf['max_micro_batch_size']}"
            f"{' (!)' if bf.get('max_micro_batch_check', '').startswith('MISMATCH') else ''} |")
    return out


def tag_table(cells, layout):
    cols = grid.TAGS + ["other"]
    out = ["| precision | recompute | seq | micro-batch | " + " | ".join(cols) + " | total (peak live) |",
           "|" + " --- |" * 4 + " ---: |" * (len(cols) + 1)]
    for key, c in cells.items():
        r = c.get("best_fit", {})
        if key[0] != layout or key[1] != "fixed" or r.get("status") in ("not_available", "failed"):
            continue
        out.append(f"| {key[2]} | {key[3]} | {key[4]} | {key[5]} | " +
                   " | ".join(gib(r[f"at_peak_{t}_bytes"]) for t in cols) +
                   f" | {gib(r['peak_live_bytes'])} |")
    return out


def markdown(cells, rows, target_lines):
    layouts = OrderedDict((r["layout"], (r["layout_label"], r)) for r in rows)
    md = ["# BERT-Large memory grid (generated by scripts/bert_large_memory.sh)", "",
          "Utilization = peak allocated / peak reserved of the allocator for one training step, "
          "per policy, replayed from one dry-run trace per setting. Device util. = best_fit's peak "
          "allocated / the device's capacity. Largest micro-batch: `memtrain plan` (best_fit) on "
          "the layout's device. GiB = 2^30 bytes. (OOM): the policy could not serve every "
          "request on the device (capacity minus the memory outside the allocator). (!) after "
          "the largest micro-batch: `train --dry-run` on the same device disagrees with plan "
          "(cells.csv, max_micro_batch_check).", ""]
    md += ["## Targets", "", "```", *target_lines, "```", ""]
    for name, (label, r) in layouts.items():
        md.append(f"## {label} (`{name}`)")
        md.append("")
        sample = cells_of(cells, name)
        if all(c.get("best_fit", {}).get("status") in ("not_available", "failed") for c in sample):
            reasons = sorted({c["best_fit"]["reason"] for c in sample})
            md += [f"Not available yet: {'; '.join(reasons)}.", ""]
            continue
        reasons = []
        md += table(cells, name, reasons=reasons) + [""]
        if any(k[0] == name and k[1] == "dynamic" for k in cells):
            md += ["Dynamic sequence lengths (mock rows of uniform length, each micro-batch padded "
                   "to its longest row; several steps):", ""]
            md += table(cells, name, "dynamic", reasons) + [""]
        md += [f"[{i + 1}] {r}" + ("  " if i + 1 < len(reasons) else "") for i, r in enumerate(reasons)]
        md += [""] if reasons else []
        md += [f"Bytes by tag at the step's peak of live bytes (GiB), `{name}`:", ""]
        md += tag_table(cells, name) + [""]
    return "\n".join(md) + "\n"


def cells_of(cells, layout):
    return [c for k, c in cells.items() if k[0] == layout]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/bert_large_memory")
    rows = load(out / "cells.csv")
    cells = group(rows)
    target_lines, failures = check_targets(cells)
    (out / "table.md").write_text(markdown(cells, rows, target_lines))
    print("issue 4 targets (utilization = peak allocated / peak reserved):")
    for line in target_lines:
        print("  " + line)
    na = sum(1 for c in cells.values() if c.get("best_fit", {}).get("status") == "not_available")
    checks = {(k[0], k[2], k[3], k[4]): c["best_fit"].get("max_micro_batch_check", "")
              for k, c in cells.items() if k[1] == "fixed" and "best_fit" in c}
    checks = {k: v for k, v in checks.items() if v}  # empty: no plan, or a --compute run
    bad = {k: v for k, v in checks.items() if v.startswith("MISMATCH")}
    print(f"largest micro-batch (plan) against train --dry-run at n and n+1: "
          f"{len(checks) - len(bad)} of {len(checks)} settings consistent")
    for k, v in bad.items():
        print(f"  {'/'.join(map(str, k))}: {v}")
    failed = [(k, c["best_fit"]["reason"]) for k, c in cells.items()
              if c.get("best_fit", {}).get("status") == "failed"]
    print(f"cells: {len(cells)} ({na} not available yet, {len(failed)} failed); {failures} below "
          f"target; wrote {out / 'table.md'}")
    for key, reason in failed:
        print(f"FAILED {'/'.join(map(str, key))}: {reason}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
