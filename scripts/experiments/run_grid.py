#!/usr/bin/python3
"""Runs the BERT-Large memory grid (issue 4, "The experiments") and writes cells.csv.

Per setting (precision, recompute, shape): one dry run of one training step records the
allocation trace (`memtrain train --dry-run`, memory.trace true, mock data); `memtrain replay
--json` replays it under every policy on the device of every layout; `memtrain plan --json` gives
the largest micro-batch that fits each layout's device and the memory outside the allocator.
Every command is written beside its numbers (cells.csv, commands.txt) so that each figure in
docs/memory-experiments.md can be reproduced on its own.

    /usr/bin/python3 scripts/experiments/run_grid.py --binary build/memtrain --out results/bert_large_memory
"""
import argparse
import dataclasses
import csv
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grid  # noqa: E402
import memtrain_cli  # noqa: E402
from trace_stats import read_trace_stats  # noqa: E402

# A device no setting of the grid outgrows, so that every trace is recorded whole; fitting is
# judged by replaying it on each layout's device.
RECORD_TARGET = "4096GiB"
# plan's search stops at this micro-batch (kMaxMicroBatchSearch, runtime/plan/plan_report.hpp).
PLAN_SEARCH_LIMIT = 1 << 16
# nvidia-smi's memory.total (runtime/config/device_target.hpp); used only when `plan` is missing.
FALLBACK_CAPACITY = {"a100-40gb": 40960 << 20, "a100-80gb": 81920 << 20}

COLUMNS = [
    "layout", "layout_label", "kind", "precision", "recompute", "seq_length", "micro_batch_size",
    "policy", "status", "reason", "capacity_bytes", "non_allocator_bytes",
    "allocator_capacity_bytes", "trace_events", "peak_live_bytes", "peak_allocated_bytes",
    "peak_reserved_bytes", "utilization", "device_utilization", "fragmentation", "num_ooms",
    "max_micro_batch_size", "max_micro_batch_check", "model_state_bytes",
    *[f"at_peak_{t}_bytes" for t in grid.TAGS], "at_peak_other_bytes",
    "record_command", "replay_command", "plan_command",
]


class Grid:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.runs = self.out / "runs"
        self.recordings = {}    # setting name -> dict
        self.plans = {}         # (layout, precision, recompute, seq, dynamic) -> dict
        self.commands = []
        self.has_plan = None

    # --- recording -----------------------------------------------------------------------------
    def record(self, setting):
        if setting.name in self.recordings:
            return self.recordings[setting.name]
        run_dir = self.runs / setting.name
        if run_dir.exists():
            shutil.rmtree(run_dir)
        args = ["train", "--config", self.args.config, "--run-dir", str(run_dir)]
        if not self.args.compute:
            args += ["--dry-run", "--target", RECORD_TARGET]
        for s in setting.config_sets():
            args += ["--set", s]
        r = memtrain_cli.run(self.args.binary, args, ranks=setting.world_size)
        rec = {"command": r.command, "seconds": r.seconds, "status": "ok", "reason": ""}
        why = r.not_available_reason()
        if why:
            rec.update(status="not_available", reason=why)
        elif r.returncode != 0:
            # A crash of one setting is reported in its cells (and makes the script fail at the
            # end), not allowed to hide the rest of the grid.
            lines = r.stderr.strip().splitlines() or [f"exit {r.returncode}"]
            rec.update(status="failed", reason=f"exit {r.returncode}: {lines[-1]}")
        else:
            rec["trace"] = run_dir / "memory_trace.csv"
            rec["stats"] = read_trace_stats(rec["trace"])
            why = self.feature_missing(setting, rec["stats"])
            if why:
                rec.update(status="not_available", reason=why)
        self.commands.append(f"# record {setting.name} ({r.seconds:.1f} s)\n{r.command}")
        print(f"  recorded {setting.name}: {rec['status']} {rec['reason']} ({r.seconds:.1f} s)",
              flush=True)
        self.recordings[setting.name] = rec
        return rec

    # Note [A setting that the loader accepts but the model ignores]
    # The config keys of issue 5 (precision.dtype fp16/bf16, memory.recompute) were accepted by
    # the loader before the model honoured them. A cell recorded then would silently repeat the
    # fp32 / no-recompute trace under another name. So the trace itself must show the feature:
    # 16-bit precision keeps fp32 masters (tag master_weight), and recomputation must lower the
    # activation bytes at the peak below those of the same shape without it. Otherwise the cell
    # is "not available yet".
    def feature_missing(self, setting, stats):
        if setting.precision != "fp32" and not stats.peak_by_tag.get("master_weight"):
            return (f"precision.dtype={setting.precision} is accepted but the trace holds no "
                    "master_weight allocation: 16-bit storage has not landed")
        if setting.recompute != "none":
            base = dataclasses.replace(setting, recompute="none")
            ref = self.record(base)
            if ref["status"] == "ok":
                a = stats.at_peak_by_tag.get("activation", 0)
                a0 = ref["stats"].at_peak_by_tag.get("activation", 0)
                if a >= a0:
                    return (f"memory.recompute={setting.recompute} is accepted but does not lower "
                            "the activation bytes at the step's peak below recompute none's: "
                            "recompute has not landed")
        return ""

    # --- plan ----------------------------------------------------------------------------------
    def plan(self, layout, setting):
        key = (layout.name, setting.precision, setting.recompute, setting.seq_length)
        if key in self.plans:
            return self.plans[key]
        args = ["plan", "--config", self.args.config, "--target", layout.target,
                "--world-size", str(layout.world_size), "--policy", "best_fit", "--json"]
        for s in setting.config_sets():
            args += ["--set", s]
        if self.has_plan is False:
            result = None
        else:
            r = memtrain_cli.run(self.args.binary, args)
            if r.returncode == 2 and "unknown verb 'plan'" in r.stderr:
                self.has_plan = False
                print("  warning: this memtrain has no `plan` verb; largest micro-batch n/a",
                      file=sys.stderr)
                result = None
            else:
                self.has_plan = True
                memtrain_cli.check(r, allowed=(0, 3))
                j = r.json()
                result = j[0] if isinstance(j, list) else j
                result["command"] = r.command
                result["max_micro_batch_check"] = self.check_max_micro_batch(
                    layout, setting, int(result["max_micro_batch_size"]),
                    int(result["non_allocator_bytes"]))
                self.commands.append(f"# plan {layout.name} {setting.name} ({r.seconds:.1f} s)\n"
                                     f"{r.command}")
                print(f"  planned {layout.name} {setting.precision}/{setting.recompute}/"
                      f"s{setting.seq_length}: max micro-batch {result.get('max_micro_batch_size')}"
                      f" ({r.seconds:.1f} s)", flush=True)
        if result is None:
            result = {"capacity_bytes": FALLBACK_CAPACITY[layout.target], "non_allocator_bytes": 0,
                      "max_micro_batch_size": "", "model_state_bytes": "", "command": ""}
        self.plans[key] = result
        return result

    # Note [Largest micro-batch, checked by training]
    # plan's answer n is checked against the training loop itself: `train --dry-run` on the
    # layout's device must finish one step with micro-batch n and run out of memory (exit 1)
    # with n + 1. The two share the allocator and the model, not the search, so a search that
    # stopped early or a plan that measured a different step shows up here. The check runs one
    # process with the layout's memory outside the allocator (--non-allocator, from plan): it
    # needs no mpirun per probe, and one process differs from rank 0 of 4 only by the 4 MiB f32
    # staging buffer of 16-bit gradients. Under ZeRO-1 the probe runs every rank of the layout. (A multi-rank dry run whose rank fails no longer hangs:
    # the failing rank ends the job with MPI_Abort, comms/communicator.hpp.)
    def check_max_micro_batch(self, layout, setting, n, non_allocator_bytes):
        if self.args.compute:
            return ""
        outcome = {}
        # A tensor-parallel layout needs its tp ranks even for one data-parallel rank; a ZeRO-1
        # layout needs all its ranks (the optimizer state is split over the data-parallel ones).
        ranks = layout.world_size if grid.ZERO1 in layout.sets else layout.tp
        for mb in ([n] if n > 0 else []) + [n + 1]:
            s = dataclasses.replace(setting, micro_batch_size=mb, world_size=ranks, dynamic=False,
                                    steps=1)
            run_dir = self.runs / f"check-{layout.name}-{s.name}"
            args = ["train", "--config", self.args.config, "--dry-run", "--target", layout.target,
                    "--non-allocator", str(non_allocator_bytes), "--run-dir", str(run_dir),
                    "--set", "memory.trace=false"]
            for kv in s.config_sets():
                args += ["--set", kv]
            r = memtrain_cli.run(self.args.binary, args, timeout_s=300, ranks=ranks)
            self.commands.append(f"# max micro-batch check ({r.seconds:.1f} s, exit "
                                 f"{r.returncode})\n{r.command}")
            outcome[mb] = r.returncode
            shutil.rmtree(run_dir, ignore_errors=True)
        if n >= PLAN_SEARCH_LIMIT and outcome.get(n, 0) == 0:
            return f"consistent (plan stops searching at {PLAN_SEARCH_LIMIT})"
        ok = outcome.get(n, 0) == 0 and outcome[n + 1] == 1
        return ("consistent" if ok else
                f"MISMATCH: train --dry-run exit {outcome.get(n, '-')} at {n}, "
                f"{outcome[n + 1]} at {n + 1}")

    # --- cells ---------------------------------------------------------------------------------
    def rows_for(self, cell):
        layout, s = cell.layout, cell.setting
        base = {"layout": layout.name, "layout_label": layout.label, "kind": cell.kind,
                "precision": s.precision, "recompute": s.recompute, "seq_length": s.seq_length,
                "micro_batch_size": s.micro_batch_size}
        if layout.missing:
            return [dict(base, policy=p, status="not_available", reason=layout.missing)
                    for p in grid.POLICIES]
        rec = self.record(s)
        if rec["status"] != "ok":
            return [dict(base, policy=p, status=rec["status"], reason=rec["reason"],
                         record_command=rec["command"]) for p in grid.POLICIES]
        plan = self.plan(layout, s)
        capacity = int(plan.get("capacity_bytes") or FALLBACK_CAPACITY[layout.target])
        non_alloc = int(plan.get("non_allocator_bytes") or 0)
        alloc_capacity = capacity - non_alloc
        stats = rec["stats"]
        at_peak = {f"at_peak_{t}_bytes": stats.at_peak_by_tag.get(t, 0) for t in grid.TAGS}
        other = sum(v for t, v in stats.at_peak_by_tag.items() if t not in grid.TAGS)
        rows = []
        for policy in grid.POLICIES:
            r = memtrain_cli.run(self.args.binary, [
                "replay", "--trace", str(rec["trace"]), "--policy", policy,
                "--capacity", str(alloc_capacity), "--json"])
            memtrain_cli.check(r)
            j = r.json()
            if j["peak_live_bytes"] != stats.peak_live_bytes:
                raise RuntimeError(f"{r.command}: peak_live_bytes {j['peak_live_bytes']} but the "
                                   f"trace's own count is {stats.peak_live_bytes}")
            ooms = int(j["num_ooms"])
            rows.append(dict(
                base, policy=policy, status="ok" if ooms == 0 else "oom",
                reason="" if ooms == 0 else f"{ooms} requests failed on {alloc_capacity} bytes",
                capacity_bytes=capacity, non_allocator_bytes=non_alloc,
                allocator_capacity_bytes=alloc_capacity, trace_events=stats.events,
                peak_live_bytes=stats.peak_live_bytes,
                peak_allocated_bytes=j["peak_allocated_bytes"],
                peak_reserved_bytes=j["peak_reserved_bytes"],
                utilization=f"{j['utilization']:.6f}",
                device_utilization=f"{j['peak_allocated_bytes'] / capacity:.6f}",
                fragmentation=f"{j['fragmentation']:.6f}", num_ooms=ooms,
                max_micro_batch_size=plan.get("max_micro_batch_size", ""),
                max_micro_batch_check=plan.get("max_micro_batch_check", ""),
                model_state_bytes=plan.get("model_state_bytes", ""),
                **at_peak, at_peak_other_bytes=other,
                record_command=rec["command"], replay_command=r.command,
                plan_command=plan.get("command", "")))
        return rows

    def timeline(self, setting, policies=("best_fit", "pytorch")):
        """Chrome-trace counters of one step recorded under each policy (for the timeline plot)."""
        out = {}
        for policy in policies:
            s = dataclasses.replace(setting, extra_sets=(f"memory.policy={policy}",))
            self.record(s)
            out[policy] = str(self.runs / s.name / "memory_trace.json")
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="build/memtrain")
    ap.add_argument("--config", default="configs/experiments/bert-large-memory.yaml")
    ap.add_argument("--out", default="results/bert_large_memory")
    ap.add_argument("--compute", action="store_true",
                    help="record with compute-mode training instead of a dry run (small configs: "
                         "a check of the pipeline)")
    ap.add_argument("--quick", action="store_true",
                    help="a few cells only (fp32 and bf16, none and full, seq 128 mb 8 and 16)")
    args = ap.parse_args()

    g = Grid(args)
    g.out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        quick_layouts = [l for l in grid.LAYOUTS if l not in grid.BIG_LAYOUTS]
        cells = list(grid.fixed_cells(layouts=quick_layouts, precisions=["fp32", "bf16"],
                                      recomputes=["none", "full"], shapes=[(128, 8), (128, 16)]))
        dyn = grid.dynamic_cell()
        dyn.setting = grid.Setting("fp32", "none", 128, 4, 4, dynamic=True, steps=8)
    else:
        cells = list(grid.fixed_cells())
        dyn = grid.dynamic_cell()
    cells.append(dyn)

    start = time.monotonic()
    rows = []
    for i, cell in enumerate(cells):
        print(f"[{i + 1}/{len(cells)}] {cell.layout.name} {cell.setting.name}", flush=True)
        rows.extend(g.rows_for(cell))
    timeline_setting = cells[0].setting if args.quick else grid.Setting("fp32", "none", 512, 8, 4)
    timeline = g.timeline(timeline_setting)
    elapsed = time.monotonic() - start

    with open(g.out / "cells.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="raise")
        w.writeheader()
        for row in rows:
            w.writerow({c: row.get(c, "") for c in COLUMNS})
    (g.out / "commands.txt").write_text("\n".join(g.commands) + "\n")
    (g.out / "run.json").write_text(json.dumps({
        "binary": args.binary, "config": args.config, "record_target": RECORD_TARGET,
        "compute": args.compute, "quick": args.quick, "seconds": round(elapsed, 1),
        "timeline": {"setting": timeline_setting.name, "traces": timeline},
        "dynamic_setting": dyn.setting.name,
    }, indent=2) + "\n")
    print(f"grid: {len(rows)} rows, {len(g.recordings)} traces recorded, {elapsed:.0f} s; "
          f"wrote {g.out / 'cells.csv'}")


if __name__ == "__main__":
    main()
