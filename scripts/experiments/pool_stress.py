#!/usr/bin/python3
"""The pool stress test of issue 45 (section 6): random-size jobs on one memory pool, three regimes.

    scripts/pool_stress.sh [--jobs N] [--seed S] [--scale] [--repeats R] [--out DIR] [--plot-to PNG]
    /usr/bin/python3 scripts/experiments/pool_stress.py --memtrain build/memtrain [same options]

1. Draws N jobs from the seed (random.Random(seed); the order of the draws is fixed by
   draw_jobs, so a seed names the same jobs on every machine) and prints them. Each job is
   configs/tiny.yaml with mock data (no corpus) at its drawn size: hidden size, heads (head size
   32), layers, FFN 4 x hidden, sequence length, global batch and a micro-batch dividing it,
   precision (bf16 with precision.bf16_gemm: fp32, so the GEMM path is not chosen by a timing
   that moves with load), priority, arrival time and steps. Its config is written to
   OUT/configs/<job>.yaml; the regime's keys go on the command line as --set. Run directories:
   OUT/solo/<job>/ and OUT/<regime>-<repeat>/<job>/, stdout and stderr beside them in
   <job>.stdout.txt and <job>.stderr.txt (memtrain refuses a run directory holding other files).
   Steps follow a drawn amount of work (see Note [Steps from work]); --scale draws BERT-Base /
   BERT-Large sizes and runs of hundreds of steps for a real machine (tens of GB of host memory
   and hours of CPU; pass --threads there).
2. `memtrain plan --json` gives each job's peak reserved bytes under its policy; the pool's
   capacity is 40 % of their sum, at least 1.1 x the largest (choose_capacity), so jobs must share.
3. Runs each job alone first ("solo": same config, no ledger keys, one after another), then the
   regimes, each on its own ledger (stress-<pid>-<regime>-<repeat>), the regimes' order reversed
   on every other repeat (the 2-core machine's speed moves by 4x within minutes):
     a  no coordination: memory.capacity, memory.admission=fail; each job starts at its arrival;
     b  static: admission wait, every priority 0, priority_aging 0, elastic false, no checkpoints: each job
        reserves its planned peak and waits first come, first served;
     c  memtrain's pool: admission wait, the drawn priority, elastic with floor 1, checkpoints
        (so a job can be preempted).
   A regime whose keys the binary does not know yet (exit 2, "unknown key" or "not supported
   yet" from a `plan` probe) is reported as not available, never faked; in (a)
   memory.admission=fail is the default, so a binary without the key runs (a) without it.
4. While a regime runs, `memtrain top --ledger L --json` is sampled every --sample-interval s.
5. Reports per regime: out-of-memory failures and the work they lost, jobs completed, makespan,
   the ledger's committed bytes over capacity (time-weighted, over the busy period and over the
   time some job waits), and each job's final training loss against its solo run ("bitwise" or
   the relative difference; the target is bitwise unless the job's micro-batch changed, then
   1e-6). With --repeats > 1 the summary gives medians. Everything goes to OUT/pool_stress.json.
6. Plots OUT/pool_stress.png: per regime, each job's committed bytes (max(in use, reservation))
   as stacked bands over time, the capacity as a line, the time some job waits shaded.
"""
import argparse
import json
import math
import os
import random
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE_CONFIG = ROOT / "configs/tiny.yaml"
MiB = 1 << 20
REGIMES = ("a", "b", "c")
REGIME_TITLES = {"a": "no coordination", "b": "static (plan, FCFS)", "c": "memtrain's pool"}
LOSS_TOLERANCE = 1e-6  # relative, for a job whose micro-batch changed (issue 45)


# ----------------------------------------------------------------------------------------------
# Jobs


@dataclass(frozen=True)
class Spec:
    """The ranges jobs are drawn from."""
    name: str
    hidden_sizes: tuple
    head_size: int
    layers: tuple            # (lo, hi) inclusive
    seq_lengths: tuple
    global_batch_sizes: tuple
    micro_batch_min_divisor: int  # micro-batches are the divisors of the global batch >= it / this
    dtypes: tuple
    priorities: tuple        # (lo, hi) inclusive
    arrival_max_s: float
    vocab_size: int
    max_position_embeddings: int
    work_gflop: tuple        # (lo, hi): drawn work, steps = work / step_flops; None: steps drawn
    steps: tuple             # (lo, hi) inclusive: the clamp of steps (or their range)
    plan_target: str         # memtrain plan --target: a device no job outgrows
    regime_timeout_s: float
    solo_timeout_s: float


TINY = Spec(name="tiny", hidden_sizes=(64, 96, 128), head_size=32, layers=(1, 3), seq_lengths=(32, 64, 128),
            global_batch_sizes=(8, 16), micro_batch_min_divisor=2, dtypes=("fp32", "bf16"), priorities=(0, 3),
            arrival_max_s=20.0, vocab_size=8192, max_position_embeddings=128, work_gflop=(300.0, 900.0),
            steps=(20, 1000), plan_target="4GiB", regime_timeout_s=900.0, solo_timeout_s=300.0)

# BERT-Base (768 x 12 heads) and BERT-Large (1024 x 16 heads) widths, 12 to 24 layers, sequence 128
# to 512, global batch 32 or 64, arrivals over 5 minutes, 200 to 1000 steps: for a real machine
# (a BERT-Large fp32 job at sequence 512 plans tens of GB of host memory, and a step of it is
# tens of TFLOP), not for the 2-core one.
SCALE = Spec(name="scale", hidden_sizes=(768, 1024), head_size=64, layers=(12, 24), seq_lengths=(128, 256, 512),
             global_batch_sizes=(32, 64), micro_batch_min_divisor=8, dtypes=("fp32", "bf16"), priorities=(0, 3),
             arrival_max_s=300.0, vocab_size=30522, max_position_embeddings=512, work_gflop=None,
             steps=(200, 1000), plan_target="1024GiB", regime_timeout_s=6 * 3600.0, solo_timeout_s=3 * 3600.0)


@dataclass
class Job:
    name: str
    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    intermediate_size: int
    seq_length: int
    global_batch_size: int
    micro_batch_size: int
    dtype: str
    priority: int
    arrival_s: float
    max_steps: int
    seed: int
    planned_peak_bytes: int = 0  # from memtrain plan, filled in later


def micro_batch_choices(global_batch, min_divisor):
    """Divisors of the global batch of at least global_batch / min_divisor, ascending
    (8, 4 -> [2, 4, 8]): small enough to leave accumulation to shrink into, not so small that
    the per-micro-batch overhead dominates."""
    return [d for d in range(1, global_batch + 1) if global_batch % d == 0 and d * min_divisor >= global_batch]


def step_flops(hidden, layers, seq, tokens, vocab, mlm_probability=0.15):
    """Model FLOPs of one training step (forward + backward = 3 x forward): per token and layer
    2 x 12 h^2 (QKV, attention output, FFN 4h in and out) and 2 x 2 x seq x h (scores and
    probabilities x V); the MLM head on the masked tokens only, 2 x (h^2 + vocab x h)."""
    per_token = 3 * (layers * (24 * hidden * hidden + 4 * seq * hidden)
                     + mlm_probability * 2 * (hidden * hidden + vocab * hidden))
    return per_token * tokens


def steps_for_work(work_flops, flops_per_step, lo, hi):
    """Steps that do about work_flops, clamped to [lo, hi]."""
    return max(lo, min(hi, int(round(work_flops / flops_per_step))))


# Note [Steps from work]
# On this machine a step of the tiny jobs takes 3 ms (hidden 64, 1 layer, 8 x 32 tokens) to
# 140 ms (hidden 128, 3 layers, 16 x 128 tokens) at one thread: a fixed number of steps (20 to
# 40) would make every job a fraction of a second long, shorter than a sample of the ledger, and
# the jobs would never meet in the pool. So each job draws an amount of work (300 to 900 GFLOP,
# 5 to 15 s of one core here at about 60 GFLOP/s) and runs the steps that do it (step_flops),
# clamped to 20..1000 (the smallest steps reach the cap: those jobs are shorter). Arrivals are
# spread over 20 s, while the ten jobs of seed 1 need about 6 TFLOP, 100 s of core time, so on 2
# cores they pile up, and 40 % of their summed peaks holds only some of them. Solos (100 s) and
# three regimes (about 60 s each) come to about 5 minutes on a quiet machine.


def draw_jobs(rng, n, spec):
    """n jobs drawn from rng (random.Random(seed)), in arrival order, named j00, j01, ...
    Per job the draws are, in this order: hidden size, layers, sequence length, global batch,
    micro-batch, precision, priority, arrival time (0.1 s steps), work (or steps), seed."""
    drawn = []
    for _ in range(n):
        hidden = rng.choice(spec.hidden_sizes)
        layers = rng.randint(*spec.layers)
        seq = rng.choice(spec.seq_lengths)
        gbs = rng.choice(spec.global_batch_sizes)
        mbs = rng.choice(micro_batch_choices(gbs, spec.micro_batch_min_divisor))
        dtype = rng.choice(spec.dtypes)
        priority = rng.randint(*spec.priorities)
        arrival = round(rng.uniform(0.0, spec.arrival_max_s), 1)
        if spec.work_gflop is not None:
            work = rng.uniform(*spec.work_gflop) * 1e9
            steps = steps_for_work(work, step_flops(hidden, layers, seq, gbs * seq, spec.vocab_size), *spec.steps)
        else:
            steps = rng.randint(*spec.steps)
        seed = rng.randint(1, 99999)
        drawn.append(Job(name="", hidden_size=hidden, num_attention_heads=hidden // spec.head_size,
                         num_hidden_layers=layers, intermediate_size=4 * hidden, seq_length=seq,
                         global_batch_size=gbs, micro_batch_size=mbs, dtype=dtype, priority=priority,
                         arrival_s=arrival, max_steps=steps, seed=seed))
    drawn.sort(key=lambda j: j.arrival_s)  # stable: equal arrivals keep their draw order
    for i, job in enumerate(drawn):
        job.name = f"j{i:02d}"
    return drawn


# ----------------------------------------------------------------------------------------------
# Configs: configs/tiny.yaml is two levels of `key: value  # comment`; read and written as text so
# that every value reaches memtrain exactly as its YAML file spells it.


def read_simple_yaml(text):
    """{section: {key: raw value}} (top-level scalars under section None) of a YAML file of
    sections and scalar keys, comments dropped. Anything deeper or richer is refused."""
    out = {}
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        body = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if not body.strip():
            continue
        indented = body.startswith(" ")
        key, sep, value = body.strip().partition(":")
        if not sep or not key or " " in key:
            raise ValueError(f"line {number}: expected `key: value`, got {line!r}")
        value = value.strip()
        if not indented:
            if value:
                out.setdefault(None, {})[key] = value
                section = None
            else:
                section = key
                out[section] = {}
        else:
            if section is None or not value:
                raise ValueError(f"line {number}: expected a scalar key inside a section, got {line!r}")
            out[section][key] = value
    return out


def dump_simple_yaml(config):
    lines = [f"{k}: {v}" for k, v in config.get(None, {}).items()]
    for section, keys in config.items():
        if section is None:
            continue
        lines.append(f"{section}:")
        lines.extend(f"  {k}: {v}" for k, v in keys.items())
    return "\n".join(lines) + "\n"


def yaml_value(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def job_config(base, job, spec, threads=1):
    """The job's config: base (configs/tiny.yaml, read) at the job's size, mock data, one
    evaluation batch at the start and the end, a metrics line every step, no checkpoints."""
    config = {s: dict(keys) for s, keys in base.items()}
    sets = {
        "model.vocab_size": spec.vocab_size,
        "model.hidden_size": job.hidden_size,
        "model.num_attention_heads": job.num_attention_heads,
        "model.num_hidden_layers": job.num_hidden_layers,
        "model.intermediate_size": job.intermediate_size,
        "model.max_position_embeddings": max(spec.max_position_embeddings, job.seq_length),
        "data.mock": True,
        "data.seq_length": job.seq_length,
        "training.micro_batch_size": job.micro_batch_size,
        "training.global_batch_size": job.global_batch_size,
        "training.max_steps": job.max_steps,
        "training.warmup_steps": max(1, job.max_steps // 10),
        "training.seed": job.seed,
        "training.log_interval": 1,
        "training.eval_interval": job.max_steps,
        "training.eval_steps": 1,
        "training.num_threads": threads,
        "precision.dtype": job.dtype,
        "checkpoint.interval": 0,
    }
    if job.dtype == "bf16":
        sets["precision.bf16_gemm"] = "fp32"  # not `auto`: its timing at start-up moves with load
    for dotted, value in sets.items():
        section, key = dotted.split(".", 1)
        config.setdefault(section, {})[key] = yaml_value(value)
    return config


# ----------------------------------------------------------------------------------------------
# Capacity, regimes and their keys


def choose_capacity(peaks, share=0.4, floor_factor=1.1, round_to=MiB):
    """share x the sum of the jobs' planned peaks, at least floor_factor x the largest, rounded
    up to a multiple of round_to."""
    want = max(Fraction(str(share)) * sum(peaks), Fraction(str(floor_factor)) * max(peaks))  # exact: 1.1 x 100 is 110
    return int(math.ceil(want / round_to)) * round_to


def regime_order(regimes, repeat):
    """The regimes in the given order on even repeats, reversed on odd ones (a b c, c b a, ...)."""
    regimes = list(regimes)
    return regimes if repeat % 2 == 0 else regimes[::-1]


def checkpoint_interval(max_steps):
    """Regime (c)'s checkpoint interval: about 8 checkpoints a run, at least every 5 steps' worth
    (a checkpoint every 5 steps of a 1000-step job would write 200 of them)."""
    return max(5, max_steps // 8)


def regime_sets(regime, job, capacity, ledger, admission_key=True):
    """The --set arguments (key=value) of a job in a regime."""
    sets = [f"memory.capacity={capacity}", f"memory.ledger={ledger}"]
    if regime == "a":
        if admission_key:
            sets.append("memory.admission=fail")
    elif regime == "b":
        # First come, first served: one priority and priority_aging 0 (strict order, no job
        # passes the head of the queue).
        sets += ["memory.admission=wait", "memory.priority=0", "memory.priority_aging=0", "memory.elastic=false",
                 "checkpoint.interval=0"]
    elif regime == "c":
        sets += ["memory.admission=wait", f"memory.priority={job.priority}", "memory.elastic=true",
                 "memory.elastic_min_micro_batch=1", f"checkpoint.interval={checkpoint_interval(job.max_steps)}"]
    else:
        raise ValueError(f"unknown regime {regime!r}")
    return sets


# ----------------------------------------------------------------------------------------------
# Measures


def time_weighted_mean(times, values, end, mask=None):
    """Mean of a step-wise signal: values[i] holds on [times[i], times[i+1]) and the last one on
    [times[-1], end); segments whose mask is False are left out. None when no time is counted."""
    total = weight = 0.0
    for i, (t, v) in enumerate(zip(times, values)):
        if mask is not None and not mask[i]:
            continue
        t_next = times[i + 1] if i + 1 < len(times) else end
        dt = max(0.0, t_next - t)
        total += v * dt
        weight += dt
    return total / weight if weight > 0 else None


def time_where(times, end, mask):
    """Seconds during which mask holds (same step-wise convention)."""
    return sum(max(0.0, (times[i + 1] if i + 1 < len(times) else end) - t)
               for i, t in enumerate(times) if mask[i])


def bits(x):
    return struct.pack("<d", float(x))


def compare_loss(value, reference):
    """("bitwise", 0.0) when equal bit for bit, else ("differs", |value - reference| / |reference|)
    (absolute when the reference is 0); (None, None) when either is missing."""
    if value is None or reference is None:
        return None, None
    if bits(value) == bits(reference):
        return "bitwise", 0.0
    diff = abs(value - reference)
    return "differs", diff / abs(reference) if reference != 0 else diff


def micro_batch_changed(events):
    """Whether any shrink/grow event changed the micro-batch: its "from" and "to" objects differ
    in a key naming the micro-batch (micro_batch_size)."""
    for e in events:
        f, t = e.get("from"), e.get("to")
        if not isinstance(f, dict) or not isinstance(t, dict):
            continue
        for k in set(f) | set(t):
            if "micro_batch" in k and f.get(k) != t.get(k):
                return True
    return False


def loss_verdict(value, reference, events):
    """(match, relative difference, tolerance, on target): bitwise is the target unless the
    micro-batch changed, then the relative difference must be at most LOSS_TOLERANCE."""
    match, rel = compare_loss(value, reference)
    tol = LOSS_TOLERANCE if micro_batch_changed(events) else 0.0
    if match is None:
        return None, None, tol, None
    return match, rel, tol, match == "bitwise" or rel <= tol


def read_metrics(path):
    """Of a metrics.jsonl: the last training line's step and loss (lines with "loss" and no
    "event"), the most steps done, the last evaluation loss, and the event lines. Lines that do
    not parse (a job killed while writing) are skipped."""
    out = {"last_step": 0, "final_loss": None, "final_eval_loss": None, "events": []}
    try:
        text = Path(path).read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        if "event" in d:
            out["events"].append(d)
        elif "loss" in d:
            out["final_loss"] = d["loss"]
            out["last_step"] = max(out["last_step"], int(d.get("step", 0)))
        elif "eval_loss" in d:
            out["final_eval_loss"] = d["eval_loss"]
    return out


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def compact_sample(t, doc, names_by_dir):
    """One ledger sample: time, capacity, committed, and per job (by our name) its state, step,
    in-use (charged) bytes, reservation and committed = max(in use, reservation)."""
    jobs = {}
    for j in (doc or {}).get("jobs", []):
        name = names_by_dir.get(os.path.realpath(j.get("run_dir", "")), j.get("name", "?"))
        charged, reservation = int(j.get("charged_bytes", 0)), int(j.get("reservation_bytes", 0))
        jobs[name] = {"state": j.get("state"), "step": j.get("step"), "in_use": charged,
                      "reservation": reservation, "committed": max(charged, reservation)}
    return {"t": round(t, 3), "capacity": (doc or {}).get("capacity_bytes"),
            "committed": (doc or {}).get("committed_bytes", 0), "jobs": jobs}


def pool_measures(samples, capacity, intervals, end):
    """Time-weighted committed / capacity over the busy period (some job's process alive) and
    over the time some job waits, and how long that was."""
    if not samples:
        return {"util_busy": None, "util_waiting": None, "busy_s": 0.0, "waiting_s": 0.0}
    times = [s["t"] for s in samples]
    util = [s["committed"] / (s["capacity"] or capacity) for s in samples]
    busy = [any(a <= t < b for a, b in intervals) for t in times]
    waiting = [any(j["state"] == "waiting" for j in s["jobs"].values()) for s in samples]
    return {"util_busy": time_weighted_mean(times, util, end, busy),
            "util_waiting": time_weighted_mean(times, util, end, waiting),
            "busy_s": time_where(times, end, busy), "waiting_s": time_where(times, end, waiting)}


# ----------------------------------------------------------------------------------------------
# Running memtrain


class CommandFailed(RuntimeError):
    pass


def unavailable_reason(returncode, stderr):
    """The config error's line when the binary does not know a key yet (exit 2 with "unknown
    key" or "not supported yet"); None otherwise."""
    if returncode != 2:
        return None
    for line in stderr.splitlines():
        if "unknown key" in line or "not supported yet" in line:
            return line.rsplit("config error: ", 1)[-1].strip()
    return None


def run_plan(binary, config_path, target, sets=()):
    argv = [str(binary), "plan", "--config", str(config_path), "--target", target, "--json"]
    for s in sets:
        argv += ["--set", s]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600), argv


def planned_peak(binary, config_path, target):
    done, argv = run_plan(binary, config_path, target)
    if done.returncode not in (0, 3):
        raise CommandFailed(f"{shlex.join(argv)}\nexit {done.returncode}: {done.stderr.strip()}")
    doc = json.loads(done.stdout)
    if isinstance(doc, list):
        doc = doc[0]
    if done.returncode == 3:
        print(f"pool_stress: warning: {config_path.name} does not fit plan's --target {target}", file=sys.stderr)
    return int(doc["peak_reserved_bytes"])


def remove_ledger(name):
    """The shared-memory file of a ledger this script named (its jobs have all ended)."""
    try:
        os.unlink(f"/dev/shm/memtrain-ledger-{name}")
    except FileNotFoundError:
        pass


def probe_regime(binary, config_path, target, regime, job, capacity, ledger):
    """(available, admission key usable, reason): whether this binary knows the regime's keys,
    asked of `memtrain plan` with them (nothing runs)."""
    admission = True
    try:
        while True:
            done, argv = run_plan(binary, config_path, target, regime_sets(regime, job, capacity, ledger, admission))
            reason = unavailable_reason(done.returncode, done.stderr)
            if reason is None:
                if done.returncode not in (0, 3):
                    raise CommandFailed(f"{shlex.join(argv)}\nexit {done.returncode}: {done.stderr.strip()}")
                return True, admission, None
            if regime == "a" and admission and "memory.admission" in reason:
                admission = False  # fail is the default: (a) is the same without the key
                continue
            return False, admission, reason
    finally:
        remove_ledger(ledger)


def kill_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


@dataclass
class Launch:
    job: Job
    argv: list
    dir: Path  # the run directory, named after the job (the ledger and `memtrain top` show that name);
    # its stdout and stderr go beside it, to <job>.stdout.txt and <job>.stderr.txt: memtrain
    # refuses a run directory that holds files but no run.json
    proc: subprocess.Popen = None
    start: float = None
    end: float = None
    returncode: int = None
    timed_out: bool = False
    files: list = field(default_factory=list)


def train_argv(binary, config_path, run_dir, sets):
    argv = [str(binary), "train", "--config", str(config_path), "--run-dir", str(run_dir), "--progress", "lines"]
    for s in sets:
        argv += ["--set", s]
    return argv


def log_path(launch, stream):
    return launch.dir.parent / f"{launch.dir.name}.{stream}.txt"


def start(launch, t0):
    launch.dir.parent.mkdir(parents=True, exist_ok=True)
    out = open(log_path(launch, "stdout"), "w")
    err = open(log_path(launch, "stderr"), "w")
    launch.files = [out, err]
    launch.proc = subprocess.Popen(launch.argv, cwd=ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    launch.start = time.monotonic() - t0


def finish(launch, t0, code):
    launch.end = time.monotonic() - t0
    launch.returncode = code
    for f in launch.files:
        f.close()


def stop_all(launches, t0, grace_s=10.0):
    """SIGTERM (a clean stop after the step) to every job still running, SIGKILL after grace_s."""
    alive = [l for l in launches if l.proc is not None and l.returncode is None]
    for l in alive:
        l.timed_out = True
        kill_group(l.proc, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for l in alive:
        try:
            l.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(l.proc, signal.SIGKILL)
            l.proc.wait()
        finish(l, t0, l.proc.returncode)


class Sampler(threading.Thread):
    """Samples `memtrain top --ledger L --json` every interval seconds; a ledger that does not
    exist yet (exit 1) is an empty sample."""

    def __init__(self, binary, ledger, interval, t0, names_by_dir):
        super().__init__(daemon=True)
        self.argv = [str(binary), "top", "--ledger", ledger, "--once", "--json"]
        self.interval, self.t0, self.names = interval, t0, names_by_dir
        self.samples, self.errors = [], 0
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            called = time.monotonic()
            t = called - self.t0
            doc = None
            try:
                done = subprocess.run(self.argv, capture_output=True, text=True, timeout=10)
                if done.returncode == 0:
                    doc = json.loads(done.stdout)
                elif done.returncode != 1:
                    self.errors += 1
            except (subprocess.TimeoutExpired, ValueError):
                self.errors += 1
            self.samples.append(compact_sample(t, doc, self.names))
            self.halt.wait(max(0.0, called + self.interval - time.monotonic()))


def job_result(launch, solo):
    """What one job did: exit, out-of-memory failure, steps, loss against its solo run, events."""
    m = read_metrics(launch.dir / "metrics.jsonl")
    err = log_path(launch, "stderr")
    stderr = err.read_text(errors="replace") if err.exists() else ""
    oom = launch.returncode == 1 and "out of memory" in stderr.lower()
    completed = launch.returncode == 0 and m["last_step"] >= launch.job.max_steps
    match, rel, tol, on_target = (loss_verdict(m["final_loss"], solo.get("final_loss") if solo else None, m["events"])
                                  if completed else (None, None, None, None))
    return {"returncode": launch.returncode, "timed_out": launch.timed_out, "oom": oom, "completed": completed,
            "start_s": launch.start, "end_s": launch.end, "steps_done": m["last_step"],
            "max_steps": launch.job.max_steps, "final_loss": m["final_loss"], "final_eval_loss": m["final_eval_loss"],
            "solo_final_loss": solo.get("final_loss") if solo else None, "loss_match": match,
            "loss_rel_diff": rel, "loss_tolerance": tol, "loss_on_target": on_target,
            "events": dict(Counter(e.get("event") for e in m["events"])), "event_lines": m["events"],
            "micro_batch_changed": micro_batch_changed(m["events"]),
            "error": next((l for l in reversed(stderr.splitlines()) if l.startswith("memtrain")), None)
            if launch.returncode not in (0, None) else None,
            "command": shlex.join(launch.argv)}


def run_solos(binary, jobs, configs, out, timeout_s):
    solos = {}
    for job in jobs:
        d = out / "solo" / job.name
        shutil.rmtree(d, ignore_errors=True)
        launch = Launch(job, train_argv(binary, configs[job.name], d, []), d)
        t0 = time.monotonic()
        start(launch, t0)
        try:
            code = launch.proc.wait(timeout=timeout_s)
            finish(launch, t0, code)
        except subprocess.TimeoutExpired:
            print(f"  solo {job.name}: stopped after {timeout_s:.0f} s", flush=True)
        finally:
            stop_all([launch], t0)  # after a timeout or an exception (Ctrl-C); a no-op otherwise
        r = job_result(launch, None)
        solos[job.name] = {k: r[k] for k in ("returncode", "completed", "steps_done", "final_loss",
                                             "final_eval_loss", "start_s", "end_s", "command", "error")}
        solos[job.name]["seconds"] = launch.end - launch.start
        state = "ok" if r["completed"] else f"FAILED (exit {launch.returncode}: {r['error']})"
        print(f"  solo {job.name}: {solos[job.name]['seconds']:6.1f} s, {r['steps_done']} steps, "
              f"loss {fmt(r['final_loss'], '.6f')}  {state}", flush=True)
    return solos


def run_regime(binary, regime, repeat, jobs, configs, capacity, out, solos, args, admission_key):
    ledger = f"stress-{os.getpid()}-{regime}-{repeat}"
    rdir = out / f"{regime}-{repeat}"
    shutil.rmtree(rdir, ignore_errors=True)
    remove_ledger(ledger)
    launches = [Launch(j, train_argv(binary, configs[j.name], rdir / j.name,
                                     regime_sets(regime, j, capacity, ledger, admission_key)), rdir / j.name)
                for j in sorted(jobs, key=lambda j: j.arrival_s)]
    names = {os.path.realpath(l.dir): l.job.name for l in launches}
    t0 = time.monotonic()
    sampler = Sampler(binary, ledger, args.sample_interval, t0, names)
    sampler.start()
    pending = list(launches)
    try:
        while True:
            now = time.monotonic() - t0
            while pending and pending[0].job.arrival_s <= now:
                start(pending.pop(0), t0)
            for l in launches:
                if l.proc is not None and l.returncode is None:
                    code = l.proc.poll()
                    if code is not None:
                        finish(l, t0, code)
            if not pending and all(l.returncode is not None for l in launches):
                break
            if now > args.timeout:
                print(f"  regime {regime}: stopped after {args.timeout:.0f} s (--timeout)", flush=True)
                pending.clear()
                stop_all(launches, t0)
                break
            time.sleep(0.05)
    finally:
        stop_all(launches, t0)  # only on an exception (Ctrl-C): everything has ended otherwise
        sampler.halt.set()
        sampler.join()
        remove_ledger(ledger)
    started = [l for l in launches if l.start is not None]
    first = min(l.start for l in started) if started else 0.0
    last = max(l.end for l in started) if started else 0.0
    results = {l.job.name: job_result(l, solos.get(l.job.name)) for l in launches}
    measures = pool_measures(sampler.samples, capacity, [(l.start, l.end) for l in started], last)
    failed = [r for r in results.values() if r["oom"]]
    summary = {
        "oom_failures": len(failed),
        "other_failures": sum(1 for r in results.values() if r["start_s"] is not None and not r["oom"]
                              and not r["completed"]),  # other exits, and jobs --timeout stopped
        "not_started": sum(1 for r in results.values() if r["start_s"] is None),  # --timeout came first
        "completed": sum(1 for r in results.values() if r["completed"]),
        "makespan_s": last - first,
        "lost_steps": sum(r["steps_done"] for r in failed),
        "lost_job_s": sum(r["end_s"] - r["start_s"] for r in failed),
        **measures,
        "loss_bitwise": sum(1 for r in results.values() if r["loss_match"] == "bitwise"),
        "loss_within_tolerance": sum(1 for r in results.values()
                                     if r["loss_match"] == "differs" and r["loss_on_target"]),
        "loss_off_target": sum(1 for r in results.values() if r["loss_on_target"] is False),
        "events": dict(sum((Counter(r["events"]) for r in results.values()), Counter())),
        "top_errors": sampler.errors,
    }
    return {"regime": regime, "repeat": repeat, "ledger": ledger, "available": True, "capacity_bytes": capacity,
            "memory_admission_passed": admission_key if regime == "a" else True,
            "jobs": results, "summary": summary, "samples": sampler.samples}


# ----------------------------------------------------------------------------------------------
# Printing and plotting


def fmt(v, spec=".3f", none="-"):
    return none if v is None else format(v, spec)


def print_table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(r, widths)))


def print_jobs(jobs):
    print_table(["job", "hidden", "heads", "layers", "ffn", "seq", "gbs", "mbs", "dtype", "prio", "arrive_s",
                 "steps", "plan_MiB"],
                [[j.name, j.hidden_size, j.num_attention_heads, j.num_hidden_layers, j.intermediate_size,
                  j.seq_length, j.global_batch_size, j.micro_batch_size, j.dtype, j.priority, f"{j.arrival_s:.1f}",
                  j.max_steps, f"{j.planned_peak_bytes / MiB:.1f}" if j.planned_peak_bytes else "-"] for j in jobs])


def loss_text(r):
    if r["loss_match"] is None:
        return "-"
    return "bitwise" if r["loss_match"] == "bitwise" else f"{r['loss_rel_diff']:.2e}"


def print_regime(run):
    title = f"regime ({run['regime']}) {REGIME_TITLES[run['regime']]}, repeat {run['repeat']}"
    if not run["available"]:
        print(f"\n{title}: not available yet: {run['reason']}")
        return
    print(f"\n{title}, ledger {run['ledger']}")
    rows = []
    for name, r in run["jobs"].items():
        state = ("done" if r["completed"] else "OOM" if r["oom"] else "timeout" if r["timed_out"]
                 else "not started" if r["start_s"] is None else f"exit {r['returncode']}")
        ev = ",".join(f"{k}:{v}" for k, v in sorted(r["events"].items())) or "-"
        target = "-" if r["loss_on_target"] is None else ("yes" if r["loss_on_target"] else "NO")
        rows.append([name, state, f"{r['steps_done']}/{r['max_steps']}", fmt(r["start_s"], ".1f"),
                     fmt(r["end_s"], ".1f"), fmt(r["final_loss"], ".6f"), loss_text(r), target, ev])
    print_table(["job", "result", "steps", "start_s", "end_s", "final_loss", "vs_solo", "on_target", "events"], rows)
    s = run["summary"]
    print(f"  OOM failures {s['oom_failures']} (lost {s['lost_steps']} steps, {s['lost_job_s']:.1f} job-s), "
          f"other failures {s['other_failures']}, not started {s['not_started']}, "
          f"completed {s['completed']}/{len(run['jobs'])}, "
          f"makespan {s['makespan_s']:.1f} s, committed/capacity {fmt(s['util_busy'])} busy, "
          f"{fmt(s['util_waiting'])} while some job waits ({s['waiting_s']:.1f} s)")


SUMMARY_METRICS = [("oom_failures", "OOM failures", ".0f"), ("other_failures", "other failures", ".0f"),
                   ("completed", "jobs completed", ".0f"), ("lost_steps", "steps lost to OOM", ".0f"),
                   ("makespan_s", "makespan s", ".1f"), ("util_busy", "committed/cap, busy", ".3f"),
                   ("util_waiting", "committed/cap, waiting", ".3f"), ("waiting_s", "some job waits, s", ".1f"),
                   ("loss_bitwise", "losses bitwise", ".0f"), ("loss_within_tolerance", "losses within 1e-6", ".0f"),
                   ("loss_off_target", "losses off target", ".0f")]


def summarize(runs, regimes):
    """Per regime, the median over its repeats of each metric (None when not available)."""
    out = {}
    for regime in regimes:
        mine = [r for r in runs if r["regime"] == regime and r["available"]]
        out[regime] = {key: median_or_none([r["summary"][key] for r in mine]) if mine else None
                       for key, _, _ in SUMMARY_METRICS}
        out[regime]["repeats"] = len(mine)
    return out


def print_summary(summary, regimes, repeats):
    print(f"\nsummary (median of {repeats} repeat{'s' if repeats > 1 else ''}; - = not available or no such time)")
    rows = [[label] + [fmt(summary[g][key], spec) for g in regimes] for key, label, spec in SUMMARY_METRICS]
    print_table(["metric"] + [f"({g}) {REGIME_TITLES[g]}" for g in regimes], rows)


def spans(times, mask):
    """The [start, end) intervals where mask holds, step-wise (the last sample ends where it starts)."""
    out = []
    for i, m in enumerate(mask):
        if not m:
            continue
        end = times[i + 1] if i + 1 < len(times) else times[i]
        if out and out[-1][1] == times[i]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((times[i], end))
    return out


def plot(runs, jobs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("pool_stress: no plot: matplotlib is missing (scripts/install_deps.sh --with-plots)", file=sys.stderr)
        return False
    shown = [r for r in runs if r["available"] and r["repeat"] == min(x["repeat"] for x in runs
                                                                      if x["regime"] == r["regime"])]
    shown.sort(key=lambda r: r["regime"])
    if not shown:
        return False
    fig, axes = plt.subplots(len(shown), 1, figsize=(12, 3.2 * len(shown)), sharex=True, squeeze=False)
    names = [j.name for j in jobs]
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    for ax, run in zip(axes[:, 0], shown):
        samples = run["samples"]
        t = [s["t"] for s in samples]
        base = [0.0] * len(t)
        for i, name in enumerate(names):
            top = [b + s["jobs"].get(name, {}).get("committed", 0) / MiB for b, s in zip(base, samples)]
            ax.fill_between(t, base, top, step="post", color=cmap(i % cmap.N), linewidth=0, label=name)
            base = top
        cap_mib = run["capacity_bytes"] / MiB
        for i, name in enumerate(names):  # an out-of-memory failure: x above the capacity line at its time
            r = run["jobs"].get(name)
            if r and r["oom"]:
                ax.plot([r["end_s"]], [cap_mib * 1.07], marker="x", color=cmap(i % cmap.N), markersize=7,
                        linestyle="none")
        waiting = [any(j["state"] == "waiting" for j in s["jobs"].values()) for s in samples]
        for a, b in spans(t, waiting):
            ax.axvspan(a, b, color="0.85", zorder=0, linewidth=0)
        ax.axhline(cap_mib, color="black", linestyle="--", linewidth=1, label="capacity")
        s = run["summary"]
        ax.set_title(f"({run['regime']}) {REGIME_TITLES[run['regime']]}: {s['oom_failures']} OOM, "
                     f"{s['completed']}/{len(run['jobs'])} completed, makespan {s['makespan_s']:.0f} s, "
                     f"committed/capacity {fmt(s['util_busy'], '.2f')} busy, {fmt(s['util_waiting'], '.2f')} "
                     f"while a job waits (grey); x: out of memory", fontsize=9)
        ax.set_ylabel("committed MiB")
        ax.set_ylim(0, cap_mib * 1.15)
    axes[-1, 0].set_xlabel("seconds since the regime started")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=10, help="jobs to draw (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    p.add_argument("--scale", action="store_true", help="BERT-Base/Large sizes and long runs, for a real machine")
    p.add_argument("--repeats", type=int, default=1, help="runs of every regime, order alternated (default 1)")
    p.add_argument("--out", help="output folder (default runs/pool_stress-<timestamp>)")
    p.add_argument("--memtrain", default="build/memtrain", help="the binary (default build/memtrain)")
    p.add_argument("--plot-to", help="also copy the plot here (e.g. docs/figures/pool_stress.png)")
    p.add_argument("--regimes", default="abc", help="which regimes, in order (default abc)")
    p.add_argument("--threads", type=int, default=1, help="training.num_threads of every job (default 1)")
    p.add_argument("--max-steps", type=int, help="override every job's drawn steps (quick plumbing checks)")
    p.add_argument("--timeout", type=float, help="seconds a regime may run before its jobs are stopped "
                   "(default 900; 6 h with --scale)")
    p.add_argument("--sample-interval", type=float, default=0.25, help="seconds between ledger samples")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.repeats < 1 or args.threads < 1:
        p.error("--jobs, --repeats and --threads must be at least 1")
    if not args.regimes or any(r not in REGIMES for r in args.regimes) or len(set(args.regimes)) != len(args.regimes):
        p.error("--regimes: letters among a, b, c, each at most once")
    return args


def main(argv=None):
    args = parse_args(argv)
    spec = SCALE if args.scale else TINY
    if args.timeout is None:
        args.timeout = spec.regime_timeout_s
    binary = Path(args.memtrain)
    binary = binary if binary.is_absolute() else ROOT / binary
    if not binary.exists():
        sys.exit(f"pool_stress: no binary at {binary} (MEMTRAIN_TARGET=memtrain scripts/build.sh builds it)")
    out = Path(args.out) if args.out else ROOT / "runs" / f"pool_stress-{time.strftime('%Y%m%d-%H%M%S')}"
    out = out if out.is_absolute() else ROOT / out
    (out / "configs").mkdir(parents=True, exist_ok=True)
    began = time.monotonic()

    jobs = draw_jobs(random.Random(args.seed), args.jobs, spec)
    if args.max_steps:
        for j in jobs:
            j.max_steps = args.max_steps
    base = read_simple_yaml(BASE_CONFIG.read_text())
    configs = {}
    for j in jobs:
        configs[j.name] = out / "configs" / f"{j.name}.yaml"
        header = f"# pool_stress.py --seed {args.seed} ({spec.name}): job {j.name}, from configs/tiny.yaml\n"
        configs[j.name].write_text(header + dump_simple_yaml(job_config(base, j, spec, args.threads)))
    for j in jobs:
        j.planned_peak_bytes = planned_peak(binary, configs[j.name], spec.plan_target)
    capacity = choose_capacity([j.planned_peak_bytes for j in jobs])
    print(f"pool_stress: {len(jobs)} jobs ({spec.name}), seed {args.seed}, out {out}")
    print_jobs(jobs)
    total_peak = sum(j.planned_peak_bytes for j in jobs)
    print(f"pool capacity {capacity / MiB:.1f} MiB ({capacity} bytes): {capacity / total_peak:.2f} of the summed "
          f"planned peaks ({total_peak / MiB:.1f} MiB), {capacity / max(j.planned_peak_bytes for j in jobs):.2f} "
          f"x the largest")

    report = {"seed": args.seed, "spec": asdict(spec), "args": vars(args), "capacity_bytes": capacity,
              "jobs": [asdict(j) for j in jobs], "binary": str(binary), "regimes_order": []}
    availability = {}
    for g in args.regimes:
        availability[g] = probe_regime(binary, configs[jobs[0].name], spec.plan_target, g, jobs[0], capacity,
                                       f"stress-{os.getpid()}-probe-{g}")
        if not availability[g][0]:
            print(f"regime ({g}): not available yet: {availability[g][2]}")
        elif g == "a" and not availability[g][1]:
            print("regime (a): this binary has no memory.admission: left at its default, fail")

    print("\nsolo runs (each job alone, no ledger keys)", flush=True)
    report["solo"] = solos = run_solos(binary, jobs, configs, out, spec.solo_timeout_s)

    runs = []
    for repeat in range(args.repeats):
        for g in regime_order(args.regimes, repeat):
            report["regimes_order"].append(f"{g}-{repeat}")
            available, admission_key, reason = availability[g]
            if not available:
                run = {"regime": g, "repeat": repeat, "available": False, "reason": reason}
            else:
                print(f"\nregime ({g}) {REGIME_TITLES[g]}, repeat {repeat}: running", flush=True)
                run = run_regime(binary, g, repeat, jobs, configs, capacity, out, solos, args, admission_key)
            runs.append(run)
            print_regime(run)
            report["regimes"] = runs
            (out / "pool_stress.json").write_text(json.dumps(report, indent=1))

    report["summary"] = summary = summarize(runs, args.regimes)
    print_summary(summary, args.regimes, args.repeats)
    report["wall_s"] = time.monotonic() - began
    (out / "pool_stress.json").write_text(json.dumps(report, indent=1))
    png = out / "pool_stress.png"
    if plot(runs, jobs, png):
        print(f"\nplot: {png}")
        if args.plot_to:
            target = Path(args.plot_to)
            target = target if target.is_absolute() else ROOT / target
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, target)
            print(f"plot copied to {target}")
    print(f"report: {out / 'pool_stress.json'} ({report['wall_s']:.0f} s in all)")


if __name__ == "__main__":
    main()
