#pragma once
// Which config changes a resume from a checkpoint accepts (docs/config.md, "Resuming").
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/config.hpp"

namespace memtrain::train {

// Note [What a resume may change]
// A resume must continue the trajectory the checkpoint was on (Note [A checkpoint needs no RNG
// state and no data cursor]). A key may differ from the checkpoint's config.yaml only when the
// values it drives never reach the parameters: how often to log, evaluate or checkpoint, how
// many threads (a property of the machine, as in PyTorch and Megatron-LM), the health checks, the memory
// trace, where the data cache lives, and how the allocator pools memory (the same bytes end up
// in the same tensors whatever the policy). training.max_steps may grow or shrink as long as
// the learning-rate schedule keeps its length: effective_lr_decay_steps, recorded in the
// checkpoint, must be equal (Megatron-LM's --lr-decay-iters), so lr_decay_steps itself may be
// spelled differently (0 with max_steps N, or N). The tensor-parallel layout
// (tensor_model_parallel_size, sequence_parallel) may change as the data-parallel size may:
// the state is resharded on load and the sums happen in another order, so the run continues
// within float rounding (Note [Resharding onto another tensor-parallel size]; ZeRO-1 and
// compression state refuse it when loading). So may training.micro_batch_size (the global
// batch is the same samples cut into other micro-batches: gradient accumulation sums them in
// another order), and precision.bf16_gemm (the same bf16 products summed by oneDNN or sgemm,
// Note [bf16 GEMMs through oneDNN]: an explicit path continues within rounding, while auto
// keeps the path the checkpoint records and so continues bitwise, Note [bf16_gemm: auto
// measures the step's GEMMs]). Everything else (the model, data, global batch,
// optimizer, precision, recomputation, ZeRO stage) is part of the trajectory and a change is
// refused, naming every key that differs.
//
// A run directory belongs to a trajectory, not to a config text: run.json records
// trajectory_hash, so a resume that lengthens a run or logs more often opens the same run
// directory (Note [A run directory belongs to one config]).

// True for a key a resume may change: training.max_steps, training.lr_decay_steps (both
// subject to the schedule-length rule), training.log_interval, training.eval_interval,
// training.eval_steps, training.num_threads, data.cache_dir, checkpoint.*, health.*,
// memory.trace and the allocator's keys (memory.policy, max_split_size,
// garbage_collection_threshold, expandable_segments, capacity, limit, reservation, ledger,
// host_huge_pages), parallel.tensor_model_parallel_size, parallel.sequence_parallel,
// training.micro_batch_size and precision.bf16_gemm.
bool resume_may_change(std::string_view key);

// XXH64 (16 hex digits) of the trajectory: every key resume_may_change refuses, with its
// canonical value, plus effective_lr_decay_steps. Equal for two configs a resume accepts.
std::string trajectory_hash(const Config& config);

// The differences between the config a checkpoint was written with (its config.yaml text,
// canonical_yaml's format) and `config` that a resume refuses, one line each:
// "training.lr: checkpoint 0.001, now 0.002". `saved_lr_decay_steps` is the checkpoint's
// effective schedule length (meta.json). Empty when the resume is allowed. Throws ConfigError
// when `saved_yaml` is not YAML.
std::vector<std::string> resume_conflicts(const std::string& saved_yaml, int saved_lr_decay_steps,
                                          const Config& config);

}  // namespace memtrain::train
