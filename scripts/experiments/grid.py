"""The BERT-Large memory grid of issue 4 ("The experiments"): what is measured, cell by cell.

A trace depends on (precision, recompute, sequence length, micro-batch, dynamic lengths, world
size): it is recorded once by a dry run and replayed under every policy and every device size of
the layouts that share it, instead of re-running the model per policy.
"""
from dataclasses import dataclass, field

POLICIES = ["no_cache", "pytorch", "best_fit", "vmm_stitch", "planned"]
PRECISIONS = ["fp32", "fp16", "bf16"]
RECOMPUTES = ["none", "selective", "full"]
# Issue 4: sequence 128 with micro-batches 8..64, sequence 512 with 4..16.
SHAPES = [(128, 8), (128, 16), (128, 32), (128, 64), (512, 4), (512, 8), (512, 16)]
# Tags whose bytes are shown (memory/stats, runtime/core/tags.hpp); others are summed as "other".
TAGS = ["parameter", "master_weight", "gradient", "optimizer_state", "activation", "temporary",
        "communication"]


@dataclass(frozen=True)
class Layout:
    name: str
    label: str
    world_size: int
    target: str                      # memtrain's --target for the device of one rank
    sets: tuple = ()                 # config overrides the layout needs
    missing: str = ""                # non-empty: the layout cannot be expressed at all yet
    # A smaller grid for the layouts whose every trace needs many ranks (None: the whole grid).
    precisions: tuple = None
    recomputes: tuple = None
    shapes: tuple = None

    @property
    def tp(self):
        """parallel.tensor_model_parallel_size of the layout (1 without the key)."""
        for s in self.sets:
            if s.startswith("parallel.tensor_model_parallel_size="):
                return int(s.split("=")[1])
        return 1


# Note [Layouts and the per-rank view]
# Every rank of a data-parallel layout allocates alike, so the trace of rank 0 is the per-rank
# view. It is recorded by the real thing: `mpirun -np 4 memtrain train --dry-run` with global
# batch = 4 x micro-batch (one micro-batch per rank and step). A single process would not do:
# with 16-bit gradients and more than one rank the gradient synchroniser keeps an f32 staging
# buffer (tag communication, comms/gradient_synchronizer.hpp) that one process never
# allocates, and ZeRO-1 shards the optimizer state over the ranks. The memory outside the allocator (CUDA context, cuBLAS workspace, NCCL buffers with
# more than one rank) and the device's capacity come from `memtrain plan --target T
# --world-size N` (runtime/config/device_target.hpp). Under tensor parallelism every rank of
# the grid holds an equal shard (the vocabulary is padded to split evenly), so rank 0 is again
# every rank's view. Under ZeRO-1 (parallel.zero_stage=1) the ranks' optimizer-state blocks
# differ by at most one element per bucket (comms/shard_layout.hpp), so rank 0 is every rank's
# view to a few bytes.
TP2 = "parallel.tensor_model_parallel_size=2"
ZERO1 = "parallel.zero_stage=1"
TP4 = "parallel.tensor_model_parallel_size=4"
SP = "parallel.sequence_parallel=true"
LAYOUTS = [
    Layout("dp4_40gb", "data parallel 4 x 40 GB (per rank)", 4, "a100-40gb"),
    Layout("tp2_dp2_40gb", "tensor parallel 2 x data parallel 2, 40 GB", 4, "a100-40gb", (TP2,)),
    Layout("single_80gb", "one 80 GB device", 1, "a100-80gb"),
    Layout("zero1_dp4_40gb", "ZeRO-1, data parallel 4 x 40 GB", 4, "a100-40gb", (ZERO1,)),
    Layout("sp_tp2_dp2_40gb", "sequence parallel, tensor parallel 2 x data parallel 2, 40 GB", 4,
           "a100-40gb", (TP2, SP)),
    Layout("tp4_40gb", "tensor parallel 4, 40 GB", 4, "a100-40gb", (TP4,)),
    Layout("sp_tp4_40gb", "sequence parallel, tensor parallel 4, 40 GB", 4, "a100-40gb",
           (TP4, SP)),
    Layout("tp2_dp2_80gb", "tensor parallel 2 x data parallel 2, 80 GB", 4, "a100-80gb", (TP2,)),
    Layout("sp_tp2_dp2_80gb", "sequence parallel, tensor parallel 2 x data parallel 2, 80 GB", 4,
           "a100-80gb", (TP2, SP)),
    Layout("tp4_80gb", "tensor parallel 4, 80 GB", 4, "a100-80gb", (TP4,)),
    Layout("sp_tp4_80gb", "sequence parallel, tensor parallel 4, 80 GB", 4, "a100-80gb",
           (TP4, SP)),
    # Note [The larger tensor + data parallel case]: 16 ranks per trace, so a smaller grid.
    Layout("tp4_dp4_80gb", "tensor parallel 4 x data parallel 4, 16 x 80 GB", 16, "a100-80gb",
           (TP4,), precisions=("fp32", "bf16"), recomputes=("none", "full"),
           shapes=((128, 64), (512, 16))),
]


@dataclass(frozen=True)
class Setting:
    """One trace: everything that changes what the model asks the allocator for."""
    precision: str
    recompute: str
    seq_length: int
    micro_batch_size: int
    world_size: int = 1
    dynamic: bool = False
    steps: int = 1
    extra_sets: tuple = ()

    @property
    def tp(self):
        """parallel.tensor_model_parallel_size among extra_sets (1 without it)."""
        for s in self.extra_sets:
            if s.startswith("parallel.tensor_model_parallel_size="):
                return int(s.split("=")[1])
        return 1

    @property
    def name(self):
        d = "-dyn" if self.dynamic else ""
        extra = "".join("-" + s.split("=")[0].split(".")[-1] + "_" + s.split("=")[1]
                        for s in self.extra_sets)
        return (f"{self.precision}-{self.recompute}-s{self.seq_length}-b{self.micro_batch_size}"
                f"-w{self.world_size}{d}{extra}")

    def config_sets(self):
        """--set arguments for this setting (the base config is configs/experiments/...)."""
        return [
            f"precision.dtype={self.precision}",
            f"memory.recompute={self.recompute}",
            f"data.seq_length={self.seq_length}",
            f"data.dynamic_seq_length={'true' if self.dynamic else 'false'}",
            f"training.micro_batch_size={self.micro_batch_size}",
            # One micro-batch per data-parallel rank and step: world / tp of them.
            f"training.global_batch_size={self.micro_batch_size * (self.world_size // self.tp)}",
            f"training.max_steps={self.steps}",
            *self.extra_sets,
        ]


@dataclass
class Cell:
    """One row group of cells.csv: a layout x a setting (the policies are its rows)."""
    layout: Layout
    setting: Setting
    kind: str = "fixed"              # fixed | dynamic
    rows: list = field(default_factory=list)


def fixed_cells(layouts=LAYOUTS, precisions=PRECISIONS, recomputes=RECOMPUTES, shapes=SHAPES):
    """Every layout x setting; a layout with its own smaller grid uses that instead."""
    for layout in layouts:
        for precision in layout.precisions or precisions:
            for recompute in layout.recomputes or recomputes:
                for seq, mb in layout.shapes or shapes:
                    s = Setting(precision, recompute, seq, mb, layout.world_size, extra_sets=layout.sets)
                    yield Cell(layout, s)


# Note [The larger tensor + data parallel case]
# The claim of about 78% utilization with pooling in "a larger case" of tensor and data
# parallelism (issue 10) is approached with 16 ranks of 80 GB as tensor parallel 4 x data
# parallel 4 (the tp groups of 4 fit one 8-GPU node, Megatron-LM's usual placement). Each of
# its traces is rank 0 of `mpirun -np 16` (16 dry-run ranks on 2 cores), so it runs a smaller
# grid: fp32 and bf16, no and full recompute, the largest shape of each sequence length.
BIG_LAYOUTS = [l for l in LAYOUTS if l.world_size > 4]


# Note [The dynamic-length run]
# Dynamic padding is the workload that fragments allocators most (each micro-batch is padded to
# its own longest row, so every step asks for differently sized activations). Mock data with
# data.dynamic_seq_length gives rows of a uniform length in [3, seq_length]; with 4 rows a
# micro-batch the padded length varies widely from step to step. 16 steps at sequence 512 on the
# data-parallel 40 GB layout, fp32, no recompute: the fixed-shape fp32 cells are its comparison.
def dynamic_cell():
    layout = LAYOUTS[0]
    s = Setting("fp32", "none", 512, 4, layout.world_size, dynamic=True, steps=16)
    return Cell(layout, s, kind="dynamic")
