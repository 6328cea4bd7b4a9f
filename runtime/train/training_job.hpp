#pragma once
// The state of one training job, built in one order by one builder for both the trainer and
// the planner (design.md, "Many jobs on one pool": the need a job reserves is computed by the
// same code that allocates it).
#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "comms/counting_communicator.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "comms/process_grid.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/ledger_agent.hpp"
#include "memory/trace_recorder.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "models/model_options.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/cuda_device.hpp"
#include "runtime/core/tensor.hpp"
#include "runtime/train/loss_scaler.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/optimizer.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "comms/nccl_communicator.hpp"
#endif

namespace memtrain::train {

// A device that hands out addresses only (design.md, "Execution modes": dry run): what
// `train --dry-run` and `memtrain plan` allocate from.
struct SimulatedDevice {
  std::size_t capacity_bytes = 0;  // what the allocator may reserve, bytes
  std::string name;                // in out-of-memory messages, e.g. "simulated a100-40gb"
};

// Where a job runs: a simulated device (a dry run: no math, no values), or the config's
// device (cpu, or cuda / cuda:N in CUDA builds).
struct JobPlacement {
  std::optional<SimulatedDevice> simulated;
  // Receives every allocator event (memory.trace, the planner's replay) when set; it must
  // outlive the job, whose destruction frees are events too.
  memory::TraceRecorder* trace = nullptr;
  // Who this process is on the memory.ledger it joins (memory.capacity, limit or reservation
  // set): its job's run directory, the same on every rank of the job (model_memory.hpp).
  LedgerJob ledger_job;
};

// The objects a training step needs, in the order they are built and the reverse of the order
// they are destroyed: the GPU (its stream and workspaces outlive every tensor), the allocator, the execution context, the
// model, the gradient synchroniser, the optimizer, the loss scaler and checkpoint.async's
// staging buffer. `memtrain train` and `memtrain plan` both build a job with
// build_training_job, so the planner's dry run allocates what the trainer allocates, event for
// event, and neither can drift from the other (a loss scaler without health.max_consecutive_skips
// once did).
class TrainingJob {
 public:
  // config: the run's config, with memory.recompute resolved (not auto). grid: the process
  // grid (real ranks, or ProcessGrid::simulated for a plan); it must outlive the job.
  // log: rank 0's output (the GPU's description line); other ranks pass a discarding stream.
  // Parameters are initialised (training.seed) in a compute run; a dry run has no values.
  // Throws ConfigError for an allocator option, model shape or device the config cannot have
  // here, memtrain::OutOfMemory when the model's state does not fit, RuntimeError for device
  // failures.
  TrainingJob(const Config& config, comms::ProcessGrid& grid, const JobPlacement& placement, std::ostream& log);
  ~TrainingJob();
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  bool dry_run() const { return dry_run_; }
  bool on_gpu() const { return on_gpu_; }

  // Returns the allocator's cached, unused segments to its upstream (Allocator::empty_cache);
  // the bytes released (reserved_bytes before minus after). Between steps only.
  std::size_t release_cached_memory();

  // Bytes of device memory the job holds outside its allocator in memtrain's own workspaces
  // (CudaDevice::workspace_bytes: the fixed ones and the float views' scratch so far); 0 on the
  // host and in a dry run.
  std::size_t device_workspace_bytes() const;

  // Declaration order is construction order (Note [One order of construction]).
 private:
  // Set before any member below is built.
  bool dry_run_;
  bool on_gpu_;
#if MEMTRAIN_HAVE_CUDA
  std::unique_ptr<core::CudaDevice> cuda_device_;
#endif

 public:
  std::shared_ptr<memory::CachingAllocator> allocator;
  // Publishes the allocator's figures and answers other jobs' release requests while the job
  // lives (memory/ledger_agent.hpp); null off a ledger and in a dry run.
  std::unique_ptr<memory::LedgerAgent> ledger_agent;
  core::Context ctx;

 private:
  // However the job ends, a GPU finishes its queued kernels before the allocator releases the
  // memory they use: destroyed before the context and the allocator, after every tensor.
  struct DeviceDrain {
    TrainingJob* job;
    ~DeviceDrain();
  } drain_{this};
  // The context's dry-run flag, workspace and device, and the trace sink, set before the model
  // allocates (prepare_context).
  bool context_ready_;
  bool prepare_context(const Config& config, const JobPlacement& placement, std::ostream& log);

 public:
  // The tensor-parallel group, counted: metrics.jsonl reports its bytes and time per step.
  comms::CountingCommunicator tp_group;
  models::BertForMaskedLM model;

 private:
  std::optional<comms::GradientSynchronizer::Compression> compression_;
#if MEMTRAIN_HAVE_CUDA
  std::unique_ptr<comms::NcclCommunicator> nccl_;
#endif

 public:
  comms::GradientSynchronizer gradient_sync;
  std::unique_ptr<Optimizer> optimizer;
  LossScaler scaler;
  // checkpoint.async's staging copy, allocated up front (undefined when unused).
  core::Tensor checkpoint_staging;

#if MEMTRAIN_HAVE_CUDA
  core::CudaDevice* cuda_device() const { return cuda_device_.get(); }
#endif
};

// The loss scaler's settings for `config`: precision.loss_scale, with
// health.max_consecutive_skips (when set) as the one limit on skipped steps in every precision
// (Note [One rule for steps that cannot be taken]).
LossScaleConfig loss_scale_config(const Config& config);

}  // namespace memtrain::train
