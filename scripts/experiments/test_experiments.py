"""Unit tests of the experiment tooling (no memtrain binary needed):
    /usr/bin/python3 -m unittest discover -s scripts/experiments
"""
import csv
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grid  # noqa: E402
import report  # noqa: E402
from trace_stats import read_trace_stats  # noqa: E402


def write(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    f.write(text)
    f.close()
    return f.name


class TraceStatsTest(unittest.TestCase):
    def test_peak_and_its_split_by_tag_follow_the_live_set(self):
        # Live sets by hand: {a:100p} 100, +b:50g 150, +c:30a 180 <- peak, -a 80, +d:90a 170.
        path = write("op,id,bytes,stream,tag\n"
                     "alloc,a,100,0,parameter\n"
                     "alloc,b,50,0,gradient   # trailing comment\n"
                     "\n"
                     "alloc,c,30,0,activation\n"
                     "free,a,,0,\n"
                     "alloc,d,90,0,activation\n")
        s = read_trace_stats(path)
        os.unlink(path)
        self.assertEqual(s.events, 5)
        self.assertEqual(s.peak_live_bytes, 180)
        self.assertEqual(s.at_peak_by_tag, {"parameter": 100, "gradient": 50, "activation": 30})
        self.assertEqual(s.peak_by_tag["activation"], 120)
        self.assertEqual(s.tags, ["parameter", "gradient", "activation"])

    def test_step_rows_are_boundaries_not_events(self):
        path = write("op,id,bytes,stream,tag\nstep,0,,,\nalloc,a,100,0,parameter\nstep,1,,,\nfree,a,,0,\n")
        s = read_trace_stats(path)
        os.unlink(path)
        self.assertEqual(s.events, 2)
        self.assertEqual(s.peak_live_bytes, 100)

    def test_free_of_an_unknown_id_names_the_file_and_row(self):
        path = write("op,id,bytes,stream,tag\nfree,x,,0,\n")
        with self.assertRaisesRegex(ValueError, r"row 2: free of unknown id x"):
            read_trace_stats(path)
        os.unlink(path)

    def test_wrong_header_is_refused(self):
        path = write("Thread,Time,Action,Pointer,Size,Stream\n")
        with self.assertRaisesRegex(ValueError, "expected op,id,bytes,stream,tag"):
            read_trace_stats(path)
        os.unlink(path)


class WorkloadPlotsTest(unittest.TestCase):
    def test_series_skips_ticks_with_nothing_reserved_and_marks_failures(self):
        import workload_plots
        report = {"capacity_bytes": 100, "timeline": {"tick": [0, 1, 2], "allocated_bytes": [50, 0, 30],
                                                      "reserved_bytes": [100, 0, 60], "failures": [0, 0, 1]}}
        ticks, util, device, failed = workload_plots.series(report)
        self.assertEqual(ticks, [0, 2])
        self.assertEqual(util, [0.5, 0.5])
        self.assertEqual(device, [0.5, 0.3])
        self.assertEqual(failed, [(2, 0.5)])


class GridTest(unittest.TestCase):
    def test_grid_has_every_policy_precision_recompute_and_shape_of_issue_4(self):
        cells = list(grid.fixed_cells())
        per_layout = len(grid.PRECISIONS) * len(grid.RECOMPUTES) * len(grid.SHAPES)
        self.assertEqual(per_layout, 3 * 3 * 7)
        full = [l for l in grid.LAYOUTS if l not in grid.BIG_LAYOUTS]
        big = sum(len(l.precisions) * len(l.recomputes) * len(l.shapes) for l in grid.BIG_LAYOUTS)
        self.assertEqual(len(cells), per_layout * len(full) + big)
        # Issue 10: tp 2 and tp 4, with and without sequence parallelism, on 40 and 80 GB.
        names = {l.name for l in grid.LAYOUTS if not l.missing}
        for size in ("40gb", "80gb"):
            for tp in ("tp2_dp2", "tp4"):
                self.assertIn(f"{tp}_{size}", names)
                self.assertIn(f"sp_{tp}_{size}", names)
        # Issue 11: ZeRO-1 is a layout like the others (no longer "not available").
        self.assertIn("zero1_dp4_40gb", names)
        self.assertIn("parallel.zero_stage=1", next(l for l in grid.LAYOUTS if l.name == "zero1_dp4_40gb").sets)
        self.assertEqual(set(grid.POLICIES), {"no_cache", "pytorch", "best_fit", "vmm_stitch", "planned"})

    def test_one_micro_batch_per_step_and_rank(self):
        sets = grid.Setting("bf16", "full", 512, 16, world_size=4).config_sets()
        self.assertIn("training.micro_batch_size=16", sets)
        self.assertIn("training.global_batch_size=64", sets)
        self.assertIn("precision.dtype=bf16", sets)
        self.assertIn("memory.recompute=full", sets)
        # tp 2 x dp 2: one micro-batch for each of the 2 data-parallel ranks.
        tp = grid.Setting("bf16", "none", 128, 8, world_size=4,
                          extra_sets=("parallel.tensor_model_parallel_size=2",)).config_sets()
        self.assertIn("training.global_batch_size=16", tp)


class TargetsTest(unittest.TestCase):
    def rows(self, fixed_utils, dynamic_util):
        rows = []
        for i, u in enumerate(fixed_utils):
            for p in grid.POLICIES:
                rows.append({"layout": "dp4_40gb", "kind": "fixed", "precision": "fp32",
                             "recompute": "none", "seq_length": "128", "micro_batch_size": str(i + 1),
                             "policy": p, "status": "ok", "utilization": str(u)})
        for p in grid.POLICIES:
            rows.append({"layout": "dp4_40gb", "kind": "dynamic", "precision": "fp32",
                         "recompute": "none", "seq_length": "512", "micro_batch_size": "4",
                         "policy": p, "status": "ok", "utilization": str(dynamic_util)})
        return rows

    def test_a_cell_below_097_fails_the_fixed_target(self):
        _, failures = report.check_targets(report.group(self.rows([0.99, 0.969], 0.96)))
        self.assertEqual(failures, 2)  # best_fit and vmm_stitch in the 0.969 cell

    def test_dynamic_run_is_held_to_095(self):
        lines, failures = report.check_targets(report.group(self.rows([0.99], 0.951)))
        self.assertEqual(failures, 0)
        lines, failures = report.check_targets(report.group(self.rows([0.99], 0.949)))
        self.assertEqual(failures, 2)

    def test_oom_and_not_available_cells_are_not_counted(self):
        rows = self.rows([0.99, 0.5], 0.96)
        for r in rows:
            if r["micro_batch_size"] == "2":
                r["status"] = "oom"
        _, failures = report.check_targets(report.group(rows))
        self.assertEqual(failures, 0)


if __name__ == "__main__":
    unittest.main()
