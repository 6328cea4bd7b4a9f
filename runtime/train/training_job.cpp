#include "runtime/train/training_job.hpp"

#include <string>
#include <utility>

#include "memory/cuda_resource.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/workspace.hpp"
#include "runtime/train/async_checkpointer.hpp"
#include "runtime/train/make_optimizer.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/rank_gpu.hpp"

namespace memtrain::train {

// Note [One order of construction]
// A job's objects depend on each other in one direction: the allocator on the device, the
// context on the allocator, the model's tensors on the context, the synchroniser on the
// model's gradient buckets, the optimizer on both, checkpoint.async's staging on the optimizer's
// state. The order of allocation is also the order of the allocator's trace, which the dry run
// must reproduce event for event, and which `memtrain plan` replays. The trainer and the planner
// used to build the same graph each in its own function, held together by a comment, and they
// drifted. TrainingJob's members are therefore declared in that order and built in its
// constructor's initialiser list, the one place the order is written.

namespace {

// Whether a compute run trains on a GPU; refuses what a GPU run cannot do yet.
// Note [Data parallelism on GPUs]
// One GPU per rank; the gradient buckets are summed by NCCL on the device (an
// NcclCommunicator over the data-parallel group, bootstrapped through MPI, its collectives
// queued after the compute stream's work: order_after), and everything the host sums (token
// counts, losses, evaluation, the overflow vote, digests) still goes through MPI. The
// synchroniser then sums whole buckets at the end of backward, without its communication
// thread; its 16-bit staging is host code, so several GPU ranks train in fp32 only.
bool checked_on_gpu(const Config& config, const comms::ProcessGrid& grid, const JobPlacement& placement) {
  const bool on_gpu = !placement.simulated && config.device != "cpu";
  const int ranks = grid.world().size();
  if (on_gpu && ranks > 1) {
    if (config.device != "cuda") {
      throw ConfigError("device = " + config.device + ": " + std::to_string(ranks) +
                        " ranks cannot share one GPU; expected device: cuda (each rank takes its local GPU)");
    }
    if (config.precision.dtype != "fp32") {
      throw ConfigError("precision.dtype = " + config.precision.dtype + ": data parallelism on GPUs sums fp32 " +
                        "gradients so far (the 16-bit staging is host code); this job has " + std::to_string(ranks) +
                        " ranks; expected fp32, one rank, or device: cpu");
    }
  }
  return on_gpu;
}

#if MEMTRAIN_HAVE_CUDA
// The GPU of device cuda / cuda:N with workspaces for the run's micro-batches and for
// fill-mask prompts up to max_position_embeddings tokens, and precision.allow_tf32.
// One GPU per rank: `cuda` takes the rank's local index on its node (CUDA_VISIBLE_DEVICES
// narrows what that indexes; a rank that sees one GPU takes it, as Slurm's --gpus-per-task=1
// arranges), `cuda:N` device N (one rank only: checked_on_gpu).
std::unique_ptr<core::CudaDevice> make_cuda_device(const Config& config, int local_rank) {
  return std::make_unique<core::CudaDevice>(rank_gpu_index(config, local_rank), cuda_workspace_sizes(config),
                                            config.precision.allow_tf32);
}

// "device cuda:0: <name>, <total> MiB; <w> MiB of fixed workspaces and <c> MiB in use outside
// the allocator at start (CUDA context, cuBLASLt, other processes: cudaMemGetInfo); plan's
// estimate for <target>: <e> MiB", the issue-14 comparison of measured and planned memory
// outside the allocator.
std::string describe_cuda_device(const core::CudaDevice& device) {
  const core::CudaMemoryInfo m = device.memory_info();
  auto mib = [](std::size_t b) { return std::to_string(b >> 20) + " MiB"; };
  const auto target = device_target_for_gpu(m.name, m.total_bytes);
  return "device cuda:" + std::to_string(device.device()) + ": " + m.name + ", " + mib(m.total_bytes) + "; " +
         mib(device.workspace_bytes()) + " of fixed workspaces (cuBLASLt, scratch, staging) and " +
         mib(m.total_bytes - m.free_bytes) +
         " in use outside the allocator at start (CUDA context, libraries, other processes: cudaMemGetInfo); " +
         (target ? "plan's estimate for " + target->name + ": " + mib(target->non_allocator.total())
                 : std::string("no plan target for this GPU"));
}

// NCCL over the data-parallel group, its collectives queued after the compute stream's work.
std::unique_ptr<comms::NcclCommunicator> make_nccl(comms::Communicator& dp, core::CudaDevice& device) {
  auto nccl = comms::NcclCommunicator::create(dp, device.device());
  nccl->order_after(device.kernel_context().stream);
  return nccl;
}
#endif

}  // namespace

LossScaleConfig loss_scale_config(const Config& config) {
  // Note [One rule for steps that cannot be taken]: health.max_consecutive_skips, when set, is
  // the one limit on skipped steps in every precision.
  LossScaleConfig loss_scale = config.precision.loss_scale;
  if (config.health.max_consecutive_skips > 0) {
    loss_scale.max_skipped_steps_at_min = config.health.max_consecutive_skips;
  }
  return loss_scale;
}

namespace {

#if MEMTRAIN_HAVE_CUDA
std::shared_ptr<memory::CachingAllocator> job_allocator(const Config& config, const JobPlacement& placement,
                                                        core::CudaDevice* gpu) {
  if (placement.simulated) {
    return make_dry_run_allocator(config.memory, placement.simulated->capacity_bytes, placement.simulated->name);
  }
  return gpu != nullptr ? make_cuda_model_allocator(*gpu, config.memory, placement.ledger_job)
                        : make_model_allocator(config.memory, placement.ledger_job);
}
#else
std::shared_ptr<memory::CachingAllocator> job_allocator(const Config& config, const JobPlacement& placement) {
  if (placement.simulated) {
    return make_dry_run_allocator(config.memory, placement.simulated->capacity_bytes, placement.simulated->name);
  }
  return make_model_allocator(config.memory, placement.ledger_job);
}
#endif

std::unique_ptr<memory::LedgerAgent> ledger_agent_for(memory::CachingAllocator& allocator) {
  LedgerMembership m = ledger_membership(allocator);
  return m.ledger ? std::make_unique<memory::LedgerAgent>(m.ledger, m.job, allocator) : nullptr;
}

// Note [Buckets overlap backward]: under tensor parallelism only with MPI_THREAD_MULTIPLE; on a
// GPU the synchroniser sums whole buckets after backward (Note [Data parallelism on GPUs]).
bool overlaps_gradient_reduction(const Config& config, const comms::ProcessGrid& grid, bool on_gpu) {
  return !on_gpu && config.parallel.overlap_grad_reduce &&
         (grid.tp_size() == 1 || grid.world().allows_concurrent_calls());
}

}  // namespace

TrainingJob::TrainingJob(const Config& config, comms::ProcessGrid& grid, const JobPlacement& placement,
                         std::ostream& log)
    : dry_run_(placement.simulated.has_value()),
      on_gpu_(checked_on_gpu(config, grid, placement)),
#if MEMTRAIN_HAVE_CUDA
      cuda_device_(on_gpu_ ? make_cuda_device(config, grid.world().local_rank()) : nullptr),
      allocator(job_allocator(config, placement, cuda_device_.get())),
#else
      allocator(job_allocator(config, placement)),
#endif
      ledger_agent(ledger_agent_for(*allocator)),
      ctx(allocator, dry_run_ ? std::string("cpu") : config.device),
      context_ready_(prepare_context(config, placement, log)),
      tp_group(grid.tp()),
      model(config.model, ctx, model_options(config), tensor_parallel(config, &tp_group)),
      compression_(gradient_compression(config)),
#if MEMTRAIN_HAVE_CUDA
      nccl_(on_gpu_ && grid.dp().size() > 1 ? make_nccl(grid.dp(), *cuda_device_) : nullptr),
      gradient_sync(model.gradient_buckets(), nccl_ ? static_cast<comms::Communicator&>(*nccl_) : grid.dp(), ctx,
                    overlaps_gradient_reduction(config, grid, on_gpu_), gradient_reduction(config),
                    compression_ ? &*compression_ : nullptr),
#else
      gradient_sync(model.gradient_buckets(), grid.dp(), ctx, overlaps_gradient_reduction(config, grid, on_gpu_),
                    gradient_reduction(config), compression_ ? &*compression_ : nullptr),
#endif
      optimizer(make_optimizer(config, model, gradient_sync, grid.dp(), ctx, &tp_group)),
      // fp16 only: bf16 and fp32 have float's exponent range (LossScaler's class comment).
      scaler(loss_scale_config(config), config.precision.dtype == "fp16"),
      checkpoint_staging(
          allocate_checkpoint_staging(config, model.parameters(), *optimizer, gradient_sync.compressor(), grid, ctx)) {
  init_parameters(model, *optimizer, config.training.seed);  // a dry run has no values: no-op
}

TrainingJob::~TrainingJob() = default;

bool TrainingJob::prepare_context(const Config& config, const JobPlacement& placement, std::ostream& log) {
  if (placement.trace != nullptr) allocator->set_event_sink(placement.trace->sink());
  ctx.set_dry_run(dry_run_);
  if (!on_gpu_) {
    ctx.set_workspace(std::make_shared<core::Workspace>(core::Workspace::host_memory(config.memory.host_huge_pages)));
  }
#if MEMTRAIN_HAVE_CUDA
  if (cuda_device_) {
    cuda_device_->attach(ctx);
    log << "memtrain: " << describe_cuda_device(*cuda_device_) << "\n";
  }
#else
  (void)log;
#endif
  return true;
}

TrainingJob::DeviceDrain::~DeviceDrain() {
#if MEMTRAIN_HAVE_CUDA
  if (job->cuda_device_ != nullptr) cudaStreamSynchronize(job->cuda_device_->kernel_context().stream);
#endif
}

std::size_t TrainingJob::device_workspace_bytes() const {
#if MEMTRAIN_HAVE_CUDA
  if (cuda_device_ != nullptr) return cuda_device_->workspace_bytes();
#endif
  return 0;
}

std::size_t TrainingJob::release_cached_memory() {
  const std::int64_t before = allocator->stats().reserved_bytes.current;
  allocator->empty_cache();
  const std::int64_t after = allocator->stats().reserved_bytes.current;
  return before > after ? static_cast<std::size_t>(before - after) : 0;
}

}  // namespace memtrain::train
