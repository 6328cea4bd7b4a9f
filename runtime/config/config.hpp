#pragma once
// The whole experiment configuration: one YAML file (configs/*.yaml), loaded and validated by
// load_config (config_loader.hpp). Every key is documented in docs/config.md.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "models/bert_config.hpp"
#include "runtime/data/data_config.hpp"

namespace memtrain::train {

struct TrainingConfig {
  int micro_batch_size = 8;
  int global_batch_size = 8;  // = micro_batch_size * accumulation steps * data-parallel size
  int max_steps = 100;
  // Steps the learning-rate schedule decays over (Megatron-LM --lr-decay-iters); 0 = max_steps.
  // Set it to lengthen a run on resume without changing its schedule (effective_lr_decay_steps).
  int lr_decay_steps = 0;
  double lr = 1e-4;
  double min_lr = 0.0;
  int warmup_steps = 0;
  std::string lr_schedule = "linear";  // cosine | linear | constant
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;  // max global norm; 0 disables
  std::uint64_t seed = 1234;
  int log_interval = 10;
  int eval_interval = 50;
  int eval_steps = 10;
  // Rows per evaluation micro-batch (Hugging Face's per_device_eval_batch_size); 0 = training's
  // micro_batch_size. An evaluation covers eval_steps of them.
  int eval_micro_batch_size = 0;
  int num_threads = 0;  // 0 = cores on this node / ranks on this node
  std::string optimizer = "adamw";
};

// Dynamic loss scaling for fp16 (PyTorch torch.cuda.amp.GradScaler semantics; hysteresis as
// Megatron-LM's DynamicGradScaler). Unused for fp32 and bf16.
struct LossScaleConfig {
  double initial_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;  // clean steps before the scale grows
  int hysteresis = 1;          // overflowing steps tolerated before backing off (1 = PyTorch)
  double min_loss_scale = 1.0;
  // Consecutive skipped steps at min_loss_scale after which the run stops with an error.
  int max_skipped_steps_at_min = 10;
};

struct PrecisionConfig {
  std::string dtype = "fp32";  // fp32 | fp16 | bf16
  bool fp32_grad_accumulation = false;
  // How bf16 GEMMs run on the CPU: auto | native (oneDNN's bf16 dot products; refused on a CPU
  // without them) | fp32 (operands converted to float for sgemm): Note [bf16 GEMMs through oneDNN].
  std::string bf16_gemm = "auto";
  // fp32 GEMMs on a GPU may use TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation),
  // as torch.backends.cuda.matmul.allow_tf32; no effect on the CPU.
  bool allow_tf32 = false;
  LossScaleConfig loss_scale;
};

struct MemoryConfig {
  std::string policy = "best_fit";  // a registered policy (memory/allocation_policy_registry.hpp)
  bool trace = false;               // record the allocation trace (run_dir/memory_trace.csv)
  // Allocator options (memory::AllocatorOptions; PYTORCH_CUDA_ALLOC_CONF meanings).
  std::size_t max_split_size = SIZE_MAX;      // bytes; SIZE_MAX = unset (blocks of any size split)
  double garbage_collection_threshold = 0.0;  // fraction of the limit; 0 = off
  bool expandable_segments = false;
  // Host allocations of 2 MiB or more in transparent huge pages (Note [Transparent huge pages
  // for host memory], memory/huge_pages.cpp). CPU runs only; no effect on a GPU's memory.
  // Off by default: no speed-up measurable on bench-bert here, and more resident memory.
  bool host_huge_pages = false;
  std::size_t capacity = 0;  // bytes the allocator may reserve; 0 = the device's capacity
  // Per-job share of the device in the host's shared ledger (memory::SharedLedger, device
  // "cpu"), so that memtrain processes on one host share it (issue 3, "Quotas, isolation and
  // a device pool"). Bytes; 0 = unset. limit: this job is never charged past it; reservation:
  // guaranteed to this job, no other job can take it (needs capacity). See docs/config.md.
  std::size_t limit = 0;
  std::size_t reservation = 0;
  // Which shared ledger limit and reservation go through: /dev/shm/memtrain-ledger-<ledger>.
  // Jobs that divide one host's memory give the same name; a test gives its own, so it never
  // meets a real job's ledger or a stale one a crashed job left behind.
  std::string ledger = "cpu";
  // Seconds a charge refused for lack of capacity waits for the other jobs on the ledger to
  // release their cached memory (Note [Cross-job release], memory/shared_ledger.hpp); 0 = it
  // never asks them.
  int release_timeout = 10;
  // Admission by plan and elastic jobs (Note [Admission by plan], memory/shared_ledger.hpp;
  // Note [An elastic job's footprints], runtime/train/pool_seat.hpp). Need memory.capacity.
  std::string admission = "fail";   // fail: start at once | wait: reserve the planned need, or queue
  int priority = 0;                 // higher is admitted first, and may shrink or preempt lower
  int priority_aging = 60;          // seconds of waiting per priority level gained; 0 = strict order
  bool elastic = false;             // shrink at step boundaries when a higher-priority job waits
  int elastic_min_micro_batch = 1;  // the smallest micro-batch an elastic job shrinks to
  // Activation checkpointing (Megatron-LM's recompute_granularity/method/num_layers).
  std::string recompute = "none";            // none | selective | full | auto
  std::string recompute_method = "uniform";  // uniform (every k-th layer) | block (first k)
  int recompute_num_layers = 0;              // k; 0 = every layer
  std::size_t budget = 0;                    // bytes; recompute: auto picks to fit it
  std::string attention = "standard";        // standard | flash
};

struct ParallelConfig {
  int tensor_model_parallel_size = 1;      // ranks that split each layer (Megatron-LM)
  int make_vocab_size_divisible_by = 128;  // vocabulary padding when tensor-parallel
  bool sequence_parallel = false;          // Korthikanti et al. 2022; needs tp > 1
  // Largest data-parallel gradient bucket, MiB (PyTorch DDP's bucket_cap_mb, default 25).
  double bucket_size_mb = 25.0;
  // Start each bucket's all-reduce during backward (Megatron-LM's --overlap-grad-reduce; PyTorch
  // DDP always does); false sums every bucket after backward, to the same bits.
  bool overlap_grad_reduce = true;
  // ZeRO stage (Rajbhandari et al. 2020): 0 replicates the optimizer state on every
  // data-parallel rank, 1 shards it over them. 2 and 3 are not supported.
  int zero_stage = 0;
};

// Gradient compression of the data-parallel sync (comms/powersgd_compressor.hpp,
// comms/onebit_compressor.hpp). The keys other than method are accepted with method none and do
// nothing there; a key of another method is refused (rank with onebit).
struct CompressionConfig {
  std::string method = "none";        // none | powersgd | onebit
  int rank = 4;                       // PowerSGD's r (PyTorch's matrix_approximation_rank)
  int start_iter = 10;                // plain all-reduce before this optimizer step
  double min_compression_rate = 2.0;  // compress a matrix only if (n + m) r < n m / rate
  bool warm_start = true;             // reuse last step's Q
  // 1-bit (method onebit, and onebit_adam's momentum): elements per scale (0: one per chunk)
  // and the scale, mean_abs or rms (Note [1-bit scales per block, by the mean magnitude]).
  int block_size = 256;
  std::string scale = "mean_abs";
  // training.optimizer onebit_adam: steps of plain Adam before the variance freezes and the
  // momentum goes 1-bit (runtime/train/onebit_adam.hpp).
  int freeze_step = 400;
};

// Checkpoints (runtime/checkpoint/): run_dir/checkpoints/step-NNNNNNNN/.
struct CheckpointConfig {
  // Steps between checkpoints; one is also written at the end of the run and when SIGTERM or
  // SIGUSR1 stops it. 0 = checkpointing off (Megatron-LM without --save): nothing is written.
  int interval = 0;
  int keep_last = 2;          // complete checkpoints kept; older ones are removed after a new one
  bool on_interrupt = false;  // SIGINT also saves one (SIGTERM and SIGUSR1 always do)
  // Copy the state into a staging buffer (tag checkpoint) and write it on a background thread
  // while training continues; the same files (async_checkpointer.hpp).
  bool async = false;
};

// Health checks (docs/config.md, "health"; Note [One rule for steps that cannot be taken],
// loss_scaler.hpp).
struct HealthConfig {
  // Consecutive steps skipped for inf/NaN gradients with nothing left to adjust (fp32, bf16:
  // every such step; fp16: at min_loss_scale) before the run rolls back to its last checkpoint
  // (or stops, without one). 0 = precision.loss_scale.max_skipped_steps_at_min.
  int max_consecutive_skips = 0;
  // Every N steps the replicas compare an XXH64 of their parameters; 0 = never.
  int consistency_interval = 0;
  // At each of those checks, GPU builds read NVML's uncorrected ECC counts (when NVML loads);
  // a rise rolls back as a replica disagreement does (Note [ECC counts through NVML, loaded at
  // run time], ecc_monitor.hpp).
  bool ecc_check = true;
  int max_rollbacks = 2;  // rollbacks of one process before it stops (exit 1)
  // Seconds a rank of a multi-rank job may make no progress before the job ends (exit 1), the
  // stalled rank named (Note [A hung rank ends the job], stall_watchdog.hpp); 0 = off. 600 as
  // PyTorch's NCCL watchdog.
  int stall_timeout = 600;
};

// training.lr_decay_steps, or training.max_steps when it is 0.
inline int effective_lr_decay_steps(const TrainingConfig& t) {
  return t.lr_decay_steps > 0 ? t.lr_decay_steps : t.max_steps;
}

// Whether loading a config looks at its corpus (load_config, validate_config).
enum class CorpusCheck { required, skipped };

struct Config {
  std::string path;  // the YAML file it was loaded from
  std::string name;  // file stem, e.g. "tiny"
  std::string device = "cpu";
  models::BertConfig model;
  data::DataConfig data;
  TrainingConfig training;
  PrecisionConfig precision;
  MemoryConfig memory;
  ParallelConfig parallel;
  CompressionConfig compression;
  CheckpointConfig checkpoint;
  HealthConfig health;
  // Where each key was last set: "configs/x.yaml:12", "--set model.hidden_size=256" or
  // "MEMTRAIN_ALLOC_CONF=...". Keys left at their default are absent. Used by validation
  // messages (also the ones raised after loading); not part of config_hash.
  std::map<std::string, std::string> origin;
};

}  // namespace memtrain::train
