"""Unit tests of the pure parts of scripts/experiments/pool_stress.py (no memtrain binary needed):
    /usr/bin/python3 -m unittest discover -s scripts/experiments -p 'test_pool_stress.py'
"""
import json
import os
import random
import struct
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pool_stress as ps  # noqa: E402

MiB = 1 << 20


class EndsRng:
    """choice, randint and uniform all give the first (or last) end of their range."""

    def __init__(self, last):
        self.last = last

    def choice(self, seq):
        return seq[-1] if self.last else seq[0]

    def randint(self, a, b):
        return b if self.last else a

    def uniform(self, a, b):
        return b if self.last else a


class ScriptedUniformRng(EndsRng):
    """Like EndsRng(last=False), but uniform() returns the scripted values in turn."""

    def __init__(self, uniforms):
        super().__init__(last=False)
        self.uniforms = list(uniforms)

    def uniform(self, a, b):
        return self.uniforms.pop(0)


class DrawTest(unittest.TestCase):
    def test_micro_batches_divide_the_global_batch(self):
        self.assertEqual(ps.micro_batch_choices(8, 2), [4, 8])
        self.assertEqual(ps.micro_batch_choices(16, 2), [8, 16])
        self.assertEqual(ps.micro_batch_choices(16, 4), [4, 8, 16])
        self.assertEqual(ps.micro_batch_choices(32, 8), [4, 8, 16, 32])

    def test_step_flops_by_hand(self):
        # h 64, 1 layer, seq 32, 256 tokens, vocab 8192: per token
        # 3 x (24 x 4096 + 4 x 32 x 64 + 0.3 x (4096 + 8192 x 64)) = 3 x (98304 + 8192 + 158515.2) = 795033.6
        self.assertAlmostEqual(ps.step_flops(64, 1, 32, 256, 8192), 795033.6 * 256, places=3)
        # h 128, 3 layers, seq 128, 2048 tokens: 3 x (3 x (393216 + 65536) + 0.3 x (16384 + 1048576)) = 5087232
        self.assertAlmostEqual(ps.step_flops(128, 3, 128, 2048, 8192), 5087232 * 2048, places=3)

    def test_steps_for_work_rounds_and_clamps(self):
        self.assertEqual(ps.steps_for_work(1e11, 2e8, 20, 1000), 500)
        self.assertEqual(ps.steps_for_work(1.003e11, 2e8, 20, 1000), 502)  # 501.5 rounds to even
        self.assertEqual(ps.steps_for_work(1e9, 2e8, 20, 1000), 20)
        self.assertEqual(ps.steps_for_work(1e13, 2e8, 20, 1000), 1000)

    def test_draws_at_the_ends_of_every_range(self):
        (small,) = ps.draw_jobs(EndsRng(last=False), 1, ps.TINY)
        self.assertEqual((small.name, small.hidden_size, small.num_attention_heads, small.num_hidden_layers,
                          small.intermediate_size, small.seq_length, small.global_batch_size,
                          small.micro_batch_size, small.dtype, small.priority, small.arrival_s, small.seed),
                         ("j00", 64, 2, 1, 256, 32, 8, 4, "fp32", 0, 0.0, 1))
        self.assertEqual(small.max_steps, 1000)  # 300 GFLOP / 0.2035 GFLOP = 1474 steps, clamped
        (big,) = ps.draw_jobs(EndsRng(last=True), 1, ps.TINY)
        self.assertEqual((big.hidden_size, big.num_attention_heads, big.num_hidden_layers, big.intermediate_size,
                          big.seq_length, big.global_batch_size, big.micro_batch_size, big.dtype, big.priority,
                          big.arrival_s, big.seed),
                         (128, 4, 3, 512, 128, 16, 16, "bf16", 3, 20.0, 99999))
        self.assertEqual(big.max_steps, 86)  # 900e9 / (5087232 x 2048) = 86.4

    def test_jobs_are_named_in_arrival_order(self):
        # uniform() is drawn twice a job: the arrival (rounded to 0.1 s), then the work.
        jobs = ps.draw_jobs(ScriptedUniformRng([5.04, 300.0, 1.0, 300.0]), 2, ps.TINY)
        self.assertEqual([(j.name, j.arrival_s) for j in jobs], [("j00", 1.0), ("j01", 5.0)])

    def test_a_seed_names_the_same_jobs_within_the_ranges(self):
        a = ps.draw_jobs(random.Random(7), 10, ps.TINY)
        self.assertEqual(a, ps.draw_jobs(random.Random(7), 10, ps.TINY))
        self.assertNotEqual(a, ps.draw_jobs(random.Random(8), 10, ps.TINY))
        self.assertEqual([j.arrival_s for j in a], sorted(j.arrival_s for j in a))
        for j in a:
            self.assertIn(j.hidden_size, (64, 96, 128))
            self.assertEqual(j.num_attention_heads * 32, j.hidden_size)
            self.assertEqual(j.intermediate_size, 4 * j.hidden_size)
            self.assertTrue(1 <= j.num_hidden_layers <= 3)
            self.assertIn(j.seq_length, (32, 64, 128))
            self.assertIn(j.global_batch_size, (8, 16))
            self.assertEqual(j.global_batch_size % j.micro_batch_size, 0)
            self.assertIn(j.dtype, ("fp32", "bf16"))
            self.assertTrue(0 <= j.priority <= 3)
            self.assertTrue(0 <= j.arrival_s <= 20)
            self.assertTrue(20 <= j.max_steps <= 1000)

    def test_scale_draws_bert_sizes_and_steps(self):
        for j in ps.draw_jobs(random.Random(3), 10, ps.SCALE):
            self.assertIn(j.hidden_size, (768, 1024))
            self.assertEqual(j.num_attention_heads * 64, j.hidden_size)
            self.assertTrue(12 <= j.num_hidden_layers <= 24)
            self.assertTrue(200 <= j.max_steps <= 1000)


TINY_LIKE = """# a comment
device: cpu   # top level

model:
  hidden_size: 128   # a comment
  layer_norm_eps: 1.0e-12
data:
  corpus: kjv                   # `bible -f gen1:1-rev22:21`
training:
  lr: 1.0e-3
"""


class ConfigTest(unittest.TestCase):
    def test_reads_sections_and_keeps_values_as_written(self):
        c = ps.read_simple_yaml(TINY_LIKE)
        self.assertEqual(c, {None: {"device": "cpu"}, "model": {"hidden_size": "128", "layer_norm_eps": "1.0e-12"},
                             "data": {"corpus": "kjv"}, "training": {"lr": "1.0e-3"}})
        self.assertEqual(ps.read_simple_yaml(ps.dump_simple_yaml(c)), c)

    def test_refuses_deeper_yaml(self):
        with self.assertRaisesRegex(ValueError, "line 2: expected a scalar key inside a section"):
            ps.read_simple_yaml("precision:\n  loss_scale:\n    initial_scale: 65536\n")

    def test_the_repository_tiny_config_reads(self):
        c = ps.read_simple_yaml(ps.BASE_CONFIG.read_text())
        self.assertEqual(c["model"]["vocab_size"], "8192")
        self.assertIn("max_steps", c["training"])

    def test_job_config_sets_the_drawn_shape_and_pins_the_bf16_gemm_path(self):
        base = ps.read_simple_yaml(TINY_LIKE)
        job = ps.Job("j03", 96, 3, 2, 384, 64, 16, 8, "bf16", 2, 3.5, 250, 42)
        c = ps.job_config(base, job, ps.TINY)
        self.assertEqual(c["model"]["hidden_size"], "96")
        self.assertEqual(c["model"]["num_attention_heads"], "3")
        self.assertEqual(c["model"]["intermediate_size"], "384")
        self.assertEqual(c["model"]["max_position_embeddings"], "128")
        self.assertEqual(c["model"]["layer_norm_eps"], "1.0e-12")  # base values untouched
        self.assertEqual(c["data"], {"corpus": "kjv", "mock": "true", "seq_length": "64"})
        self.assertEqual((c["training"]["micro_batch_size"], c["training"]["global_batch_size"],
                          c["training"]["max_steps"], c["training"]["warmup_steps"], c["training"]["seed"],
                          c["training"]["num_threads"], c["training"]["eval_interval"]),
                         ("8", "16", "250", "25", "42", "1", "250"))
        self.assertEqual(c["precision"], {"dtype": "bf16", "bf16_gemm": "fp32"})
        self.assertEqual(c["checkpoint"], {"interval": "0"})
        self.assertEqual(base["model"], {"hidden_size": "128", "layer_norm_eps": "1.0e-12"})  # not modified
        job.dtype = "fp32"
        self.assertEqual(ps.job_config(base, job, ps.TINY)["precision"], {"dtype": "fp32"})


class CapacityAndRegimesTest(unittest.TestCase):
    def test_capacity_is_40_percent_of_the_sum_but_at_least_11_tenths_of_the_largest(self):
        self.assertEqual(ps.choose_capacity([10 * MiB] * 10), 40 * MiB)           # 0.4 x 100 > 1.1 x 10
        self.assertEqual(ps.choose_capacity([10 * MiB, 20 * MiB, 30 * MiB]), 33 * MiB)  # 1.1 x 30 > 0.4 x 60
        # 1.1 x 2,000,000 = 2,200,000 bytes, rounded up to 3 MiB
        self.assertEqual(ps.choose_capacity([1_000_001, 2_000_000]), 3 * MiB)
        self.assertEqual(ps.choose_capacity([100, 100], round_to=1), 110)

    def test_regime_order_alternates(self):
        self.assertEqual(ps.regime_order("abc", 0), ["a", "b", "c"])
        self.assertEqual(ps.regime_order("abc", 1), ["c", "b", "a"])
        self.assertEqual(ps.regime_order("abc", 2), ["a", "b", "c"])
        self.assertEqual(ps.regime_order("ac", 3), ["c", "a"])

    def test_regime_keys(self):
        job = ps.Job("j00", 64, 2, 1, 256, 32, 8, 4, "fp32", 2, 0.0, 100, 1)
        common = ["memory.capacity=1048576", "memory.ledger=L"]
        self.assertEqual(ps.regime_sets("a", job, MiB, "L"), common + ["memory.admission=fail"])
        self.assertEqual(ps.regime_sets("a", job, MiB, "L", admission_key=False), common)
        self.assertEqual(ps.regime_sets("b", job, MiB, "L"),
                         common + ["memory.admission=wait", "memory.priority=0", "memory.priority_aging=0",
                                   "memory.elastic=false", "checkpoint.interval=0"])
        self.assertEqual(ps.regime_sets("c", job, MiB, "L"),
                         common + ["memory.admission=wait", "memory.priority=2", "memory.elastic=true",
                                   "memory.elastic_min_micro_batch=1", "checkpoint.interval=12"])
        self.assertEqual(ps.checkpoint_interval(20), 5)
        self.assertEqual(ps.checkpoint_interval(1000), 125)

    def test_unknown_key_marks_a_regime_not_available(self):
        err = ("memtrain: config error: --set memory.admission=wait: memory.admission = wait: unknown key; "
               "expected a key listed in docs/config.md\n")
        self.assertEqual(ps.unavailable_reason(2, err), "--set memory.admission=wait: memory.admission = wait: "
                         "unknown key; expected a key listed in docs/config.md")
        self.assertIsNone(ps.unavailable_reason(1, err))
        self.assertIsNone(ps.unavailable_reason(2, "memtrain: config error: x.yaml:3: bad value\n"))


class MeasuresTest(unittest.TestCase):
    def test_time_weighted_mean_of_a_step_signal(self):
        times, values = [0.0, 1.0, 3.0], [0.5, 1.0, 0.0]
        # 0.5 for 1 s, 1.0 for 2 s, 0.0 for 1 s (until end = 4): 2.5 / 4
        self.assertAlmostEqual(ps.time_weighted_mean(times, values, 4.0), 0.625)
        # without the first segment: (2 + 0) / 3
        self.assertAlmostEqual(ps.time_weighted_mean(times, values, 4.0, [False, True, True]), 2 / 3)
        self.assertIsNone(ps.time_weighted_mean(times, values, 4.0, [False] * 3))
        self.assertIsNone(ps.time_weighted_mean([], [], 4.0))
        # an end before the last sample counts nothing after it
        self.assertAlmostEqual(ps.time_weighted_mean(times, values, 2.0), 2.5 / 3)
        self.assertAlmostEqual(ps.time_where(times, 4.0, [False, True, True]), 3.0)

    def test_spans_merge_consecutive_samples(self):
        self.assertEqual(ps.spans([0, 1, 2, 3, 4], [True, True, False, True, True]), [(0, 2), (3, 4)])
        self.assertEqual(ps.spans([0, 1], [False, False]), [])

    def test_pool_measures_over_busy_and_waiting_time(self):
        def sample(t, committed, states):
            return {"t": t, "capacity": 100, "committed": committed,
                    "jobs": {f"j{i}": {"state": s, "committed": 0} for i, s in enumerate(states)}}
        samples = [sample(0, 0, []), sample(1, 50, ["training"]), sample(2, 90, ["training", "waiting"]),
                   sample(4, 100, ["training", "training"]), sample(5, 0, [])]
        # busy from 1 to 5 (one job 1..5, another 2..5): (0.5 x 1 + 0.9 x 2 + 1.0 x 1) / 4
        m = ps.pool_measures(samples, 100, [(1.0, 5.0), (2.0, 5.0)], 5.0)
        self.assertAlmostEqual(m["util_busy"], 3.3 / 4)
        self.assertAlmostEqual(m["busy_s"], 4.0)
        self.assertAlmostEqual(m["util_waiting"], 0.9)
        self.assertAlmostEqual(m["waiting_s"], 2.0)

    def test_an_empty_sample_uses_the_known_capacity(self):
        s = ps.compact_sample(0.0, None, {})
        self.assertEqual((s["committed"], s["capacity"], s["jobs"]), (0, None, {}))
        m = ps.pool_measures([s], 100, [(0.0, 1.0)], 1.0)
        self.assertEqual(m["util_busy"], 0.0)
        self.assertIsNone(m["util_waiting"])

    def test_compact_sample_names_jobs_by_run_directory(self):
        run_dir = os.path.realpath(tempfile.gettempdir())
        doc = {"capacity_bytes": 100, "committed_bytes": 70, "jobs": [
            {"run_dir": run_dir, "name": "run", "state": "waiting", "step": 0, "charged_bytes": 0,
             "reservation_bytes": 40},
            {"run_dir": "/elsewhere/x", "name": "x", "state": "training", "step": 3, "charged_bytes": 30,
             "reservation_bytes": 10}]}
        s = ps.compact_sample(1.23456, doc, {run_dir: "j04"})
        self.assertEqual(s["t"], 1.235)
        self.assertEqual(s["jobs"]["j04"], {"state": "waiting", "step": 0, "in_use": 0, "reservation": 40,
                                            "committed": 40})
        self.assertEqual(s["jobs"]["x"]["committed"], 30)

    def test_median_over_repeats(self):
        runs = [{"regime": "a", "available": True, "summary": {k: v for k, _, _ in ps.SUMMARY_METRICS
                                                              for v in [i]}} for i in (3, 1, 2)]
        runs.append({"regime": "b", "available": False})
        s = ps.summarize(runs, "ab")
        self.assertEqual(s["a"]["makespan_s"], 2)
        self.assertEqual(s["a"]["repeats"], 3)
        self.assertIsNone(s["b"]["makespan_s"])
        self.assertEqual(s["b"]["repeats"], 0)
        self.assertIsNone(ps.median_or_none([None, None]))
        self.assertEqual(ps.median_or_none([None, 1.0, 3.0]), 2.0)


def next_double(x):
    return struct.unpack("<d", struct.pack("<q", struct.unpack("<q", struct.pack("<d", x))[0] + 1))[0]


class LossTest(unittest.TestCase):
    def test_bitwise_or_relative_difference(self):
        self.assertEqual(ps.compare_loss(9.00974192875574, 9.00974192875574), ("bitwise", 0.0))
        up = next_double(9.0)
        match, rel = ps.compare_loss(up, 9.0)
        self.assertEqual(match, "differs")
        self.assertAlmostEqual(rel, (up - 9.0) / 9.0, delta=1e-30)
        self.assertEqual(ps.compare_loss(8.1, 9.0)[1], abs(8.1 - 9.0) / 9.0)
        self.assertEqual(ps.compare_loss(None, 9.0), (None, None))
        self.assertEqual(ps.compare_loss(0.5, 0.0), ("differs", 0.5))  # absolute against 0

    def test_the_target_is_bitwise_unless_the_micro_batch_changed(self):
        recompute = [{"step": 5, "event": "shrink", "from": {"micro_batch_size": 16, "recompute": "none"},
                      "to": {"micro_batch_size": 16, "recompute": "full"}, "why": "j07 waits"}]
        micro = [{"step": 5, "event": "shrink", "from": {"micro_batch_size": 16}, "to": {"micro_batch_size": 8}}]
        self.assertFalse(ps.micro_batch_changed(recompute))
        self.assertTrue(ps.micro_batch_changed(micro))
        self.assertFalse(ps.micro_batch_changed([{"event": "preempt", "from": None, "to": "x"}]))
        self.assertEqual(ps.loss_verdict(9.0, 9.0, recompute), ("bitwise", 0.0, 0.0, True))
        self.assertEqual(ps.loss_verdict(9.0 * (1 + 1e-7), 9.0, recompute)[3], False)
        self.assertEqual(ps.loss_verdict(9.0 * (1 + 1e-7), 9.0, micro)[2:], (1e-6, True))
        self.assertEqual(ps.loss_verdict(9.0 * (1 + 2e-6), 9.0, micro)[3], False)
        self.assertEqual(ps.loss_verdict(None, 9.0, micro), (None, None, 1e-6, None))

    def test_read_metrics_takes_the_last_training_line(self):
        lines = [{"step": 0, "eval_loss": 9.1, "eval_accuracy": 0.0},
                 {"step": 1, "loss": 9.5, "lr": 0.1},
                 {"step": 2, "event": "shrink", "from": {"micro_batch_size": 8}, "to": {"micro_batch_size": 4}},
                 {"step": 2, "loss": 9.25, "lr": 0.1},
                 {"step": 2, "event": "grow", "from": {"micro_batch_size": 4}, "to": {"micro_batch_size": 8}},
                 {"step": 2, "eval_loss": 9.0}]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("\n".join(json.dumps(l) for l in lines) + '\n{"step": 3, "lo')  # killed mid-line
        m = ps.read_metrics(f.name)
        os.unlink(f.name)
        self.assertEqual((m["last_step"], m["final_loss"], m["final_eval_loss"]), (2, 9.25, 9.0))
        self.assertEqual([e["event"] for e in m["events"]], ["shrink", "grow"])
        self.assertEqual(ps.read_metrics("/nonexistent/metrics.jsonl")["final_loss"], None)


if __name__ == "__main__":
    unittest.main()
