#include "runtime/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "comms/broadcast_string.hpp"
#include "comms/communicator.hpp"
#include "comms/counting_communicator.hpp"
#include "comms/nccl_communicator.hpp"
#include "comms/process_grid.hpp"
#include "kernels/cpu/lr_schedule.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/cpu/threads.hpp"
#include "memory/byte_size.hpp"
#include "memory/cuda_resource.hpp"
#include "memory/out_of_memory.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/config/config_hash.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/config/device_target.hpp"
#include "runtime/train/rank_agreement.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/config/resume_compatibility.hpp"
#include "runtime/core/cuda_device.hpp"
#include "runtime/core/context.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/checkpoint/fault_injection.hpp"
#include "runtime/train/batch_plan.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/async_checkpointer.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/train/ecc_monitor.hpp"
#include "runtime/train/evaluator.hpp"
#include "runtime/train/fill_mask.hpp"
#include "runtime/train/health_check.hpp"
#include "runtime/train/hardware_peak.hpp"
#include "runtime/train/make_optimizer.hpp"
#include "runtime/train/memory_outputs.hpp"
#include "runtime/train/metrics_writer.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/progress_line.hpp"
#include "runtime/train/resume.hpp"
#include "runtime/train/root_only.hpp"
#include "runtime/train/run_directory.hpp"
#include "runtime/train/run_summary.hpp"
#include "runtime/core/atomic_file.hpp"
#include "runtime/train/op_profile_report.hpp"
#include "runtime/train/memcpy_bandwidth.hpp"
#include "runtime/train/sgemm_peak.hpp"
#include "runtime/train/stop_signal.hpp"
#include "runtime/train/train_step.hpp"
#include "runtime/train/training_data.hpp"
#include "runtime/train/training_log.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// training.num_threads, or 0 = this node's cores shared evenly by its ranks.
int compute_threads(int configured, const comms::Communicator& comm) {
  if (configured > 0) return configured;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, comm.local_size()));
}

// 65536 rather than 65536.000000 or 6.5536e+04: loss scales are powers of two in practice.
std::string plain_number(double x) {
  std::ostringstream os;
  os << std::setprecision(17) << x;
  return os.str();
}

// Rank 0's string on every rank of `comm`.
EvalMetrics to_metrics(std::int64_t step, const EvalResult& e) {
  return EvalMetrics{step, e.loss, e.accuracy, e.perplexity};
}

// `train --profile-ops`'s reference speeds (StepReference), measured on the shape of this rank's
// FFN up-projection of one micro-batch: [micro_batch_size * seq_length, hidden_size] x
// [hidden_size, intermediate_size / tensor_model_parallel_size], the weight stored [N, K] as a
// Linear's is. The sgemm's buffers come from an allocator of its own, as at startup.
StepReference measure_step_reference(const Config& config, int tp_size, double model_flops) {
  const int m = config.training.micro_batch_size * config.data.seq_length;
  const int k = config.model.hidden_size;
  const int n = config.model.intermediate_size / std::max(1, tp_size);
  StepReference r;
  char shape[96];
  std::snprintf(shape, sizeof shape, "[%d, %d] x [%d, %d]", m, k, k, n);
  r.sgemm_shape = shape;
  core::Context probe(make_model_allocator(MemoryConfig{}));
  r.sgemm_flops = measure_sgemm_flops(probe, m, n, k, true, /*repeats=*/10);
  r.memcpy_bytes_per_s = measure_memcpy_bandwidth();
  r.model_flops = model_flops;
  return r;
}

#if MEMTRAIN_HAVE_CUDA
// The GPU of device cuda / cuda:N with workspaces for the run's micro-batches and for
// fill-mask prompts up to max_position_embeddings tokens, and precision.allow_tf32.
// One GPU per rank: `cuda` takes the rank's local index on its node (CUDA_VISIBLE_DEVICES
// narrows what that indexes; a rank that sees one GPU takes it), `cuda:N` device N (one rank
// only: validated by the caller).
std::unique_ptr<core::CudaDevice> make_cuda_device(const Config& config, int local_rank) {
  const int count = memory::cuda_device_count();
  // A rank that sees one GPU (CUDA_VISIBLE_DEVICES set per rank, Slurm's --gpus-per-task=1)
  // takes it whatever its local rank.
  const int index = config.device != "cuda" ? std::stoi(config.device.substr(5)) : count == 1 ? 0 : local_rank;
  if (index >= count) {
    throw ConfigError("device = " + config.device + ": this rank is local rank " + std::to_string(local_rank) +
                      " of its node and needs GPU " + std::to_string(index) + ", but " + std::to_string(count) +
                      " are visible; expected at most one rank per visible GPU on each node");
  }
  const auto sizes = core::CudaWorkspaceSizes::for_batch(
      config.training.micro_batch_size, config.data.seq_length, config.model.num_attention_heads,
      config.model.attention_probs_dropout_prob, config.memory.attention == "flash",
      /*max_tokens=*/config.model.max_position_embeddings);
  return std::make_unique<core::CudaDevice>(index, sizes, config.precision.allow_tf32);
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
#endif

int train(const Config& config, const RunOptions& options);

}  // namespace

int run_training(const Config& config, const RunOptions& options) {
  try {
    return train(config, options);
  } catch (const OutOfMemory& e) {
    const std::string limit = memory_limit_context(config.memory);
    if (limit.empty()) throw;
    throw OutOfMemory(e.what() + limit, e.requested_bytes());
  }
}

namespace {

int train(const Config& config, const RunOptions& options) {
  const auto start = Clock::now();
  StopSignal stop;  // first: a SIGINT during setup must not kill the process uncleanly
  // World = tp x dp (Note [Rank order of the grid]); what was "the world" before tensor
  // parallelism (batch split, counts, losses, evaluation, the gradient sum) is the dp group.
  auto world_group = comms::make_world_communicator();
  check_ranks_agree(*world_group, config, options);  // Note [Ranks agree before they start]
  check_tensor_parallel_world(config, world_group->size());
  comms::ProcessGrid grid(std::move(world_group), config.parallel.tensor_model_parallel_size);
  comms::Communicator* const comm = &grid.dp();
  comms::Communicator& world = grid.world();
  const bool root = world.rank() == 0;
  std::ostringstream discard;
  std::ostream& out = root ? std::cout : discard;

  check_data_parallel_size(config, grid.dp_size());
  const auto& tc = config.training;
  const auto plan = BatchPlan::make(tc.global_batch_size, tc.micro_batch_size, grid.dp_size(), grid.dp_rank());
  const int threads = compute_threads(tc.num_threads, world);
  kernels::set_num_threads(threads);

  TrainingData data = load_training_data(config, world, out);

  // memory.recompute: auto becomes the least recomputation that fits memory.budget.
  if (config.memory.recompute == "auto" && !options.resolve_recompute) {
    throw ConfigError("memory.recompute: auto needs a planner (RunOptions::resolve_recompute)");
  }
  const Config resolved =
      config.memory.recompute == "auto" ? options.resolve_recompute(config, world.size(), out) : config;
  memory::TraceRecorder trace;  // declared before the allocator: it must outlive the sink
  const bool dry = options.dry_run.has_value();
  const checkpoint::FaultPlan faults = checkpoint::fault_plan_from_environment();
  checkpoint::check_fault_ranks(faults, world.size());
  const DeviceTarget target = dry ? options.dry_run->for_world_size(world.size()) : DeviceTarget{};
  // A GPU run (device cuda / cuda:N, not a dry run): the device, its stream and workspaces come
  // first, so they outlive the allocator and every tensor (Note [What a GPU run trains so far]).
  const bool on_gpu = !dry && config.device != "cpu";
  // Note [Data parallelism on GPUs]
  // One GPU per rank; the gradient buckets are summed by NCCL on the device (an
  // NcclCommunicator over the data-parallel group, bootstrapped through MPI, its collectives
  // queued after the compute stream's work: order_after), and everything the host sums (token
  // counts, losses, evaluation, the overflow vote, digests) still goes through MPI. The
  // synchroniser then sums whole buckets at the end of backward, without its communication
  // thread; its 16-bit staging is host code, so several GPU ranks train in fp32 only.
  if (on_gpu && world.size() > 1) {
    if (config.device != "cuda") {
      throw ConfigError("device = " + config.device + ": " + std::to_string(world.size()) +
                        " ranks cannot share one GPU; expected device: cuda (each rank takes its local GPU)");
    }
    if (config.precision.dtype != "fp32") {
      throw ConfigError("precision.dtype = " + config.precision.dtype + ": data parallelism on GPUs sums fp32 " +
                        "gradients so far (the 16-bit staging is host code); this job has " +
                        std::to_string(world.size()) + " ranks; expected fp32, one rank, or device: cpu");
    }
  }
#if MEMTRAIN_HAVE_CUDA
  std::unique_ptr<core::CudaDevice> cuda_device;
  if (on_gpu) cuda_device = make_cuda_device(config, world.local_rank());
  auto allocator =
      dry      ? make_dry_run_allocator(config.memory, target.allocator_capacity(), "simulated " + target.describe())
      : on_gpu ? make_cuda_model_allocator(*cuda_device, config.memory)
               : make_model_allocator(config.memory);
#else
  auto allocator =
      dry ? make_dry_run_allocator(config.memory, target.allocator_capacity(), "simulated " + target.describe())
          : make_model_allocator(config.memory);
#endif
  if (config.memory.trace) allocator->set_event_sink(trace.sink());
  core::OpProfile op_profile;  // `train --profile-ops`: ctx points to it during a profiled step
  core::Context ctx(allocator, dry ? std::string("cpu") : config.device);
  ctx.set_dry_run(dry);
  if (!on_gpu) {
    ctx.set_workspace(std::make_shared<core::Workspace>(core::Workspace::host_memory(config.memory.host_huge_pages)));
  }
#if MEMTRAIN_HAVE_CUDA
  if (cuda_device) {
    cuda_device->attach(ctx);
    out << "memtrain: " << describe_cuda_device(*cuda_device) << "\n";
  }
  // However the run ends (an exception included), the GPU finishes its queued kernels before the
  // allocator releases or unmaps the memory they use: this guard is destroyed before the context
  // and the allocator (declared after them); the model's tensors, destroyed before it, only
  // return their blocks to the allocator's cache.
  struct DeviceDrain {
    core::CudaDevice* device;
    ~DeviceDrain() {
      if (device != nullptr) cudaStreamSynchronize(device->kernel_context().stream);
    }
  } drain{cuda_device.get()};
#endif
  // The tensor-parallel group, counted: metrics.jsonl reports its bytes and time per step.
  comms::CountingCommunicator tp_group(grid.tp());
  const models::ModelOptions model_opts = model_options(resolved);
  models::BertForMaskedLM model(config.model, ctx, model_opts, tensor_parallel(config, &tp_group));
  // Note [Buckets overlap backward]: under tensor parallelism only with MPI_THREAD_MULTIPLE.
  const auto compression = gradient_compression(config);
  // Note [Data parallelism on GPUs]
#if MEMTRAIN_HAVE_CUDA
  std::unique_ptr<comms::NcclCommunicator> nccl;
  if (on_gpu && comm->size() > 1) {
    nccl = comms::NcclCommunicator::create(*comm, cuda_device->device());
    nccl->order_after(cuda_device->kernel_context().stream);
  }
  comms::Communicator& gradient_group = nccl ? *nccl : *comm;
#else
  comms::Communicator& gradient_group = *comm;
#endif
  comms::GradientSynchronizer gradient_sync(
      model.gradient_buckets(), gradient_group, ctx,
      !on_gpu && config.parallel.overlap_grad_reduce && (grid.tp_size() == 1 || world.allows_concurrent_calls()),
      gradient_reduction(config), compression ? &*compression : nullptr);
  const std::unique_ptr<Optimizer> optimizer = make_optimizer(config, model, gradient_sync, *comm, ctx, &tp_group);
  init_parameters(model, *optimizer, tc.seed);
  // fp16 only: bf16 and fp32 have float's exponent range (LossScaler's class comment).
  // Note [One rule for steps that cannot be taken]: health.max_consecutive_skips, when set, is
  // the one limit on skipped steps in every precision.
  LossScaleConfig loss_scale = config.precision.loss_scale;
  if (config.health.max_consecutive_skips > 0)
    loss_scale.max_skipped_steps_at_min = config.health.max_consecutive_skips;
  LossScaler scaler(loss_scale, config.precision.dtype == "fp16");
  // checkpoint.async: allocated up front, as `memtrain plan` counts it (plan_step.cpp).
  core::Tensor checkpoint_staging =
      allocate_checkpoint_staging(config, model.parameters(), *optimizer, gradient_sync.compressor(), grid, ctx);

  // Note [No half-written run directory]
  // A run directory is the record of a run; one holding only config.yaml because the corpus
  // had a bad byte or the allocator refused memory.policy would look like a run that died.
  // It is therefore created only here, after everything that can reject the config for this
  // world (batch split, data preparation, allocator options, model shapes) has passed.
  // The default name has a one-second resolution: a second run started in the same second
  // gets "-2" (and so on) rather than appending to, or being refused by, the first one's.
  std::string run_path = options.run_dir;
  if (run_path.empty() && options.resume == ResumeMode::required && !dry) {
    throw ConfigError(
        "--resume required needs --run-dir DIR, the run directory to resume (without one, "
        "every run gets a new timestamped directory, which has no checkpoints)");
  }
  if (run_path.empty()) {
    const std::string base = RunDirectory::default_path(config.name, std::chrono::system_clock::now());
    run_path = base;
    for (int n = 2; std::filesystem::exists(run_path); ++n) run_path = base + "-" + std::to_string(n);
  }
  std::optional<RunDirectory> run_dir;
  std::optional<MetricsWriter> metrics;
  ResumePoint resume;
  MetricsTruncation truncation;
  run_on_root(world, "creating the run directory", [&] {
    // Note [One job per run directory]: an existing run directory is locked before its
    // checkpoints are read; a new one when RunDirectory::open creates it.
    std::optional<RunDirectoryLock> lock;
    std::error_code ec;
    const bool seen_new = !std::filesystem::exists(run_path, ec);
    if (RunDirectory::is_lockable(run_path)) lock = RunDirectoryLock::acquire(run_path);
    // Before the run directory is opened: a refused resume names the keys that differ, which
    // says more than the run directory's hash mismatch would.
    if (!dry) resume = find_resume_point(run_path, options.resume, config, std::cerr);
    // A dry run logs null losses and its own snapshot: into a directory that holds a run it
    // doubled every logged step and replaced the real memory snapshot.
    if (dry && std::filesystem::exists(std::filesystem::path(run_path) / "run.json")) {
      throw ConfigError("--dry-run: run directory " + run_path +
                        " already holds a run (run.json); expected a new directory, or no --run-dir");
    }
    if (resume.resume) {
      check_checkpoint_layout(resume.checkpoint, config, grid.tp_size(), grid.dp_size(), data.data_key);
    }
    // Note [What a resume may change]: the directory belongs to a trajectory.
    run_dir = RunDirectory::open(run_path, trajectory_hash(config), canonical_yaml(config), config.name, config.path,
                                 world.size(), std::move(lock), seen_new);
    // A resume drops the logged steps after its checkpoint; starting over in a directory that
    // has logged steps (no checkpoint, none valid, a supervisor's relaunch before the first
    // one) drops them all: the run logs them again, and no step may appear twice. A compute
    // run is deterministic, so what is dropped is what the new run writes.
    if (!dry && (resume.resume || run_dir->reused())) {
      truncation = truncate_metrics_after(run_dir->file("metrics.jsonl"), resume.resume ? resume.step : -1);
      if (!resume.resume && truncation.dropped_lines > 0) {
        std::cerr << "memtrain: run directory " << run_path << ": starting from step 0; the "
                  << truncation.dropped_lines << " lines of an earlier start in metrics.jsonl are replaced\n";
      }
    }
    metrics.emplace(run_dir->file("metrics.jsonl"));
    if (resume.resume) {
      metrics->write_resumed(resume.step, resume.checkpoint, resume.data_parallel_size, grid.dp_size());
    }
  });
  // Every rank loads its tensor-parallel rank's files (Note [A checkpoint needs no RNG state
  // and no data cursor]: nothing else is needed to continue the trajectory).
  {
    std::int64_t header[2] = {resume.resume ? 1 : 0, resume.step};
    world.broadcast(header, sizeof header, 0);
    resume.resume = header[0] != 0;
    resume.step = header[1];
    resume.checkpoint = comms::broadcast_string(world, resume.checkpoint);
  }
  if (resume.resume) {
    const auto t0 = Clock::now();
    run_where(world, true, "loading checkpoint " + resume.checkpoint, "another rank", [&] {
      load_checkpoint(resume.checkpoint, grid, model.parameters(), *optimizer, scaler, gradient_sync.compressor());
    });
    char line[64];
    std::snprintf(line, sizeof line, " in %.2f s\n", seconds_since(t0));
    out << "memtrain: resumed from checkpoint " << resume.checkpoint << " (step " << resume.step << ")" << line
        << std::flush;
    if (resume.step >= config.training.max_steps) {
      out << "memtrain: the checkpoint's step " << resume.step
          << " is at or past training.max_steps = " << config.training.max_steps
          << ": no steps to train (raise training.max_steps to continue)\n"
          << std::flush;
    }
  }

  // Note [Memory record of an out-of-memory run]
  // An OutOfMemory is the failure the memory outputs exist to explain: the allocator's
  // segments and blocks at that moment show what held the memory (fragmentation, the cache, a
  // tag that grew). So once the run directory exists, an OutOfMemory still writes
  // memory_snapshot.json (and the trace) and prints the memory summary before it propagates
  // (exit 1). A failure to write them is reported but does not hide the OutOfMemory.
  try {
    // MFU's denominator is the hardware's peak (Note [Which clock the peak uses]); the sgemm
    // speed measured here is sgemm_fraction's. Both are sums over the ranks. The sgemm runs
    // through an allocator of its own, so its three [1024, 1024] buffers stay out of the run's
    // memory statistics (peak_allocated_bytes would otherwise report them).
    double sgemm_flops = 0.0;
    // Threads beyond this rank's share of the node's cores add no FLOPs: the peak counts cores.
    const int node_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // A run whose GEMMs use bf16 dot products is measured against their peak.
    const int peak_cores = std::min(threads, std::max(1, node_cores / std::max(1, world.local_size())));
    const HardwarePeak hw = model_opts.native_bf16_gemm ? hardware_peak_bf16(peak_cores) : hardware_peak(peak_cores);
    double peak_flops = hw.flops();
    if (!dry) {
      core::Context probe(make_model_allocator(MemoryConfig{}));
      sgemm_flops = measure_sgemm_peak_flops(probe);
    }
    world.allreduce_sum(&sgemm_flops, 1);
    // One rank with an unknown peak makes the sum unknown: count the ranks that know none.
    double peak_known = peak_flops > 0 ? 0.0 : 1.0;
    world.allreduce_sum(&peak_known, 1);
    world.allreduce_sum(&peak_flops, 1);
    if (peak_known > 0) peak_flops = 0.0;

    out << "memtrain: training " << config.name << ": " << model.num_parameters() << " parameters, " << tc.max_steps
        << " steps of " << tc.global_batch_size << " sequences x " << config.data.seq_length << " tokens (micro-batch "
        << tc.micro_batch_size << " x " << plan.accumulation_steps() << " accumulation x " << grid.dp_size()
        << " data-parallel" << (grid.tp_size() > 1 ? " x " + std::to_string(grid.tp_size()) + " tensor-parallel" : "")
        << " ranks), " << threads << " threads/rank\n"
        << "memtrain: hardware peak " << hw.describe() << (world.size() > 1 ? " per rank" : "") << "; sgemm "
        << (dry ? std::string("not measured (dry run)")
                : "measured " + std::to_string(static_cast<long>(sgemm_flops / 1e9)) + " GFLOP/s")
        << "\n"
        << "memtrain: precision " << config.precision.dtype
        << (config.precision.dtype == "bf16" && on_gpu
                ? std::string(model_opts.native_bf16_gemm ? " (GEMMs in bf16 on the GPU's tensor cores: cuBLASLt)"
                                                          : " (GEMMs in fp32 on operands converted on the GPU)")
            : config.precision.dtype == "bf16"
                ? std::string(model_opts.native_bf16_gemm ? " (GEMMs in bf16: "
                              : config.precision.bf16_gemm == "fp32"
                                  ? " (GEMMs in fp32 on converted operands, as precision.bf16_gemm: fp32 asks; "
                                  : " (GEMMs in fp32 on converted operands: no bf16 dot products here; ") +
                      kernels::bf16_gemm_description() + ")"
                : "")
        << (scaler.enabled() ? " (dynamic loss scaling from " + plain_number(scaler.scale()) + ")" : "")
        << ", recompute " << resolved.memory.recompute
        << (resolved.memory.recompute_num_layers > 0 ? " (" + std::to_string(resolved.memory.recompute_num_layers) +
                                                           " layers, " + resolved.memory.recompute_method + ")"
                                                     : "")
        << ", attention " << config.memory.attention << "\n"
        << "memtrain: run directory " << run_path << "\n";
    if (dry) {
      out << "memtrain: dry run on simulated " << target.describe() << ": allocator capacity "
          << memory::format_byte_size(target.allocator_capacity()) << " (non-allocator "
          << memory::format_byte_size(target.non_allocator.total()) << "); no math runs, losses are not computed\n";
    }

    // Note [ECC counts through NVML, loaded at run time]: GPU builds, at the replica checks. On
    // if any rank sees an ECC-capable GPU, so that every rank joins the check's collective.
    std::optional<Nvml> nvml;
    std::optional<EccMonitor> ecc;
#ifdef MEMTRAIN_HAVE_CUDA
    if (config.health.ecc_check && config.health.consistency_interval > 0 && !dry) {
      nvml.emplace(Nvml::default_library());
      ecc.emplace(*nvml);
      std::int64_t ranks = ecc->monitored_devices() > 0 ? 1 : 0;
      world.allreduce_sum(&ranks, 1);
      if (ranks == 0) {
        ecc.reset();
      } else {
        out << "memtrain: health: GPU ECC counts read through NVML every " << config.health.consistency_interval
            << " steps (" << ranks << " of " << world.size() << " ranks see ECC-capable GPUs)\n";
      }
    }
#endif

    ProgressLine progress(out,
                          root && progress_is_live(options.progress, stdout_is_terminal(), comms::launched_by_mpi()));

    // `write`: false for the evaluation at a resumed step that metrics.jsonl already has.
    auto evaluate_and_log = [&](std::int64_t step, bool write = true) {
      auto e = evaluate_model(model, *data.validation, *comm, tc.micro_batch_size, tc.eval_steps);
      if (dry) e.loss = e.accuracy = e.perplexity = std::nan("");
      if (root) {
        if (write) metrics->write(to_metrics(step, e));
        progress.break_line();
        char line[160];
        std::snprintf(line, sizeof line, "eval step %lld | loss %.4f | accuracy %.2f %% | perplexity %.1f\n",
                      static_cast<long long>(step), e.loss, 100.0 * e.accuracy, e.perplexity);
        out << line << std::flush;
      }
      return e;
    };

    // Checkpoints (checkpoint_saver.hpp): every checkpoint.interval steps, at the end, and when
    // SIGTERM or SIGUSR1 (SIGINT with checkpoint.on_interrupt) stops the run. A dry run has no
    // values to save.
    const bool checkpointing = config.checkpoint.interval > 0 && !dry;
    std::string checkpoints_root;
    if (checkpointing) {
      // Rank 0 named the run directory; the other writers need the same path.
      checkpoints_root = comms::broadcast_string(world, root ? run_dir->file("checkpoints") : std::string());
    }
    const std::string canonical = canonical_yaml(config);
    const std::string hash = config_hash(config);
    // MEMTRAIN_FAULT=kill_in_checkpoint counts over all of this process's checkpoints, so a
    // test can die inside the second one with the first one complete.
    checkpoint::WriteBudget budget =
        faults.kill_in_checkpoint ? checkpoint::WriteBudget(*faults.kill_in_checkpoint) : checkpoint::WriteBudget();
    auto saved_line = [&](std::int64_t at, const std::string& path, double seconds, const char* how) {
      progress.break_line();
      char line[96];
      std::snprintf(line, sizeof line, " (%.2f s%s)\n", seconds, how);
      out << "memtrain: checkpoint of step " << at << " saved to " << path << line << std::flush;
    };
    // checkpoint.async: Note [An asynchronous checkpoint is committed by a vote].
    std::optional<AsyncCheckpointer> async_checkpoints;
    if (checkpointing && config.checkpoint.async) {
      async_checkpoints.emplace(checkpoint_staging, grid, checkpoints_root, &budget,
                                [&](std::int64_t at, const std::string& path, double seconds) {
                                  saved_line(at, path, seconds, ", written in the background");
                                });
    }
    // `final`: the run stops after it, so an asynchronous one is waited for.
    auto save = [&](std::int64_t at, bool final) {
      const CheckpointSource source{config, model.parameters(),         *optimizer,   scaler, canonical,
                                    hash,   gradient_sync.compressor(), data.data_key};
      if (async_checkpoints) {
        async_checkpoints->start(source, at);
        if (final) async_checkpoints->wait();
        return;
      }
      const auto t0 = Clock::now();
      const std::string path = save_checkpoint(source, grid, checkpoints_root, at, &budget);
      if (root) saved_line(at, path, seconds_since(t0), "");
    };

    // A resumed run logs the evaluations an uninterrupted one would: none at the resumed step
    // (its line, if that step had one, was kept).
    const EvalResult start_eval = evaluate_and_log(resume.step, !resume.resume);
    EvalResult end_eval = start_eval;
    std::int64_t last_eval_step = resume.step;

    // All ranks must agree to stop, or the others would wait in the next all-reduce forever.
    // Every rank stops at the same step: the ranks vote on the stop signals after every step.
    // Mixed signals (mpirun sent SIGTERM to one rank while a user sent another SIGUSR1) resolve
    // to the most final: SIGTERM, then SIGUSR1, then SIGINT.
    int stop_signal = 0;
    auto stop_requested = [&] {
      const int local = stop.signal();
      std::int64_t votes[3] = {local == SIGTERM ? 1 : 0, local == SIGUSR1 ? 1 : 0, local == SIGINT ? 1 : 0};
      if (world.size() > 1) world.allreduce_sum(votes, 3);
      stop_signal = votes[0] > 0 ? SIGTERM : votes[1] > 0 ? SIGUSR1 : votes[2] > 0 ? SIGINT : 0;
      return stop_signal != 0;
    };
    std::optional<TrainingLog> log;
    if (root) {
      log.emplace(*metrics, progress, TrainingLogSettings{tc.max_steps, tc.log_interval, peak_flops, sgemm_flops, dry});
    }
    double last_loss = std::nan("");
    std::int64_t step = resume.step;

    // Health checks (health_check.hpp). A rollback loads the newest valid checkpoint no later
    // than `max_step` on every rank and continues from it; metrics.jsonl loses the steps after
    // it, as on resume.
    int rollbacks = 0;
    std::int64_t last_consistent_step = resume.step;  // a loaded checkpoint is presumed healthy
    auto rollback = [&](const std::string& reason, std::int64_t max_step) {
      if (!checkpointing) {
        throw RuntimeError(reason + "; no checkpoint to roll back to (checkpoint.interval is 0)");
      }
      if (async_checkpoints) async_checkpoints->wait();  // the newest one may be the target
      if (++rollbacks > config.health.max_rollbacks) {
        throw RuntimeError(reason + "; stopping after " + std::to_string(config.health.max_rollbacks) +
                           " rollbacks (health.max_rollbacks)");
      }
      std::string target;
      std::int64_t at = -1;
      run_on_root(world, "choosing a checkpoint to roll back to", [&] {
        std::error_code ec;
        if (!std::filesystem::is_directory(checkpoints_root, ec)) return;
        for (const auto& c : checkpoint::list_checkpoints(checkpoints_root)) {
          if (c.step > max_step) continue;
          const auto report = checkpoint::verify_checkpoint(c.path);
          if (report.ok()) {
            target = c.path;
            at = c.step;
            break;
          }
          std::cerr << "memtrain: warning: skipping checkpoint " << c.path << ": " << report.problems.front() << "\n";
        }
      });
      world.broadcast(&at, sizeof at, 0);
      target = comms::broadcast_string(world, target);
      if (at < 0) {
        throw RuntimeError(reason + "; no valid checkpoint at or before step " + std::to_string(max_step) +
                           " to roll back to");
      }
      run_where(world, true, "loading checkpoint " + target, "another rank", [&] {
        load_checkpoint(target, grid, model.parameters(), *optimizer, scaler, gradient_sync.compressor());
      });
      step = at;
      last_consistent_step = at;
      if (root) {
        truncate_metrics_after(metrics->path(), at);
        metrics->reopen();
        metrics->write_rolled_back(at, target, reason);
        progress.break_line();
        out << "memtrain: health: " << reason << "; rolled back to checkpoint " << target << " (step " << at
            << ", rollback " << rollbacks << " of at most " << config.health.max_rollbacks << ")\n"
            << std::flush;
        std::cerr << "memtrain: health: " << reason << "; rolled back to " << target << "\n";
      }
    };
    // MEMTRAIN_FAULT nan_grad / flip_param: each step's fault once per process.
    std::int64_t nan_injected_through = -1, flip_done = -1;
    std::int64_t profiled_steps = 0;  // `--profile-ops`: steps timed and their wall time
    double profiled_s = 0;
    double profiled_flops = 0;  // this rank's share of the profiled steps' model FLOPs
    // A SIGINT during setup (data preparation can take a minute) stops before the first step.
    bool interrupted = stop_requested();
    while (!interrupted && step < tc.max_steps) {
      ++step;
      StepSettings settings{kernels::learning_rate(static_cast<int>(step), effective_lr_decay_steps(tc),
                                                   tc.warmup_steps, tc.lr, tc.min_lr, tc.lr_schedule),
                            tc.grad_clip, tc.seed};
      if (faults.nan_grad && faults.nan_grad->covers(step, world.rank()) && step > nan_injected_through) {
        nan_injected_through = step;
        settings.after_gradients = [](models::BertForMaskedLM& m) { inject_nan_gradient(m); };
      }
      const auto t0 = Clock::now();
      const comms::CollectiveCounts tp_before = tp_group.counts();
      StepResult r;
      // Only the training step is profiled: evaluations and checkpoints run outside it.
      const bool profiled = options.profile_ops && (step > 1 || tc.max_steps == 1);
      if (profiled) ctx.set_op_profile(&op_profile);
      try {
        r = train_step(model, *data.train, plan, *comm, *optimizer, step - 1, settings, &scaler, &gradient_sync,
                       &world);
        ctx.set_op_profile(nullptr);
      } catch (const NonFiniteStreak& e) {
        ctx.set_op_profile(nullptr);
        // Every rank threw: the flag was reduced over the world before the scaler saw it.
        rollback(std::string("step ") + std::to_string(step) + ": " + e.what(), step);
        continue;
      }
      if (grid.tp_size() > 1) {
        r.time_tp_comm_s = tp_group.counts().seconds - tp_before.seconds;
        r.tp_comm_bytes = tp_group.counts().bytes - tp_before.bytes;
      }
      if (r.skipped && root) {
        progress.break_line();
        out << "memtrain: step " << step << ": inf/NaN gradients at loss scale " << r.loss_scale << "; step skipped ("
            << r.skipped_steps << " so far), loss scale now " << scaler.scale() << "\n"
            << std::flush;
      }
      if (dry) r.loss = r.grad_norm = std::nan("");
      const double wall = seconds_since(t0);
      if (profiled) {
        ++profiled_steps;
        profiled_s += wall;
        profiled_flops += r.model_flops / static_cast<double>(world.size());
      }
      last_loss = r.loss;
      // The step's line is written before the vote on a stop signal, so a signal that lands
      // during step k stops the run after step k with step k - 1 already on disk.
      if (log) log->record(step, r, settings.lr, wall, allocator->stats(), step == tc.max_steps);
      interrupted = stop_requested();
      if (interrupted && log) log->flush(step, r, settings.lr, allocator->stats());
      const bool last = step == tc.max_steps || interrupted;
      if (step % tc.eval_interval == 0 || last) {
        end_eval = evaluate_and_log(step);
        last_eval_step = step;
      }
      if (faults.flip_param && faults.flip_param->covers(step, world.rank()) && step > flip_done) {
        flip_done = step;
        flip_parameter_bit(model);
      }
      // Note [Replicas are compared before their state spreads]: before this step's checkpoint.
      if (config.health.consistency_interval > 0 && step % config.health.consistency_interval == 0 && !dry) {
        std::string diverged = check_replicas(model.parameters(), grid, step);
        if (ecc) {
          const std::string rose = ecc->check(world, step, last_consistent_step);
          if (!rose.empty()) diverged = diverged.empty() ? rose : diverged + "; " + rose;
        }
        if (!diverged.empty()) {
          rollback(diverged, last_consistent_step);
          continue;
        }
        last_consistent_step = step;
      }
      const bool saving_stop =
          interrupted && (stop_signal == SIGTERM || stop_signal == SIGUSR1 || config.checkpoint.on_interrupt);
      if (async_checkpoints) async_checkpoints->poll();
      if (checkpointing && (step % config.checkpoint.interval == 0 || step == tc.max_steps || saving_stop)) {
        save(step, step == tc.max_steps || interrupted);
      }
      if (faults.kills_after(step, world.rank())) checkpoint::kill_self();
    }
    if (async_checkpoints) async_checkpoints->wait();  // an interrupt without a saving stop
    if (last_eval_step != step) end_eval = evaluate_and_log(step);
    progress.break_line();

    // Every rank of rank 0's tensor-parallel group takes part (the vocabulary is split).
    if (grid.dp_rank() == 0 && data.tokenizer && !dry && step > 0) {  // untrained: noise
      out << "Fill-mask predictions (top 5):\n";
      out << format_fill_mask_probes(model, *data.tokenizer, fill_mask_probes(), 5,
                                     config.model.max_position_embeddings);
    }

    const auto mem = allocator->stats();
    if (root) {
      RunSummary summary;
      summary.steps_done = step;
      summary.max_steps = tc.max_steps;
      summary.interrupted = interrupted;
      summary.stop_signal = stop_signal;
      summary.wall_s = seconds_since(start);
      summary.train_s = log->train_s();
      summary.tokens = log->tokens();
      summary.final_train_loss = last_loss;
      summary.start_eval_loss = start_eval.loss;
      summary.end_eval_loss = end_eval.loss;
      summary.end_eval_accuracy = end_eval.accuracy;
      summary.peak_allocated_bytes = mem.allocated_bytes.peak;
      summary.peak_reserved_bytes = mem.reserved_bytes.peak;
      summary.run_dir = run_path;
      summary.precision = config.precision.dtype;
      summary.loss_scaling = scaler.enabled();
      summary.final_loss_scale = scaler.scale();
      summary.skipped_steps = scaler.skipped_steps();
      summary.dry_run = dry;
      // Files first: under mpirun after a Ctrl-C, stdout may no longer be read (Note [SIGTERM
      // interrupts a blocked write]), and the snapshot must not wait on it.
      write_memory_outputs(*allocator, config.memory.trace ? &trace : nullptr, *run_dir);
      StepReference reference;
      if (options.profile_ops && !dry) reference = measure_step_reference(config, grid.tp_size(), profiled_flops);
      const StepReference* ref = options.profile_ops && !dry ? &reference : nullptr;
      if (options.profile_ops) {
        core::write_file_atomically(run_dir->file("op_profile.json"), [&](std::ostream& f) {
          f << core::json_text(op_profile_json(op_profile, profiled_steps, profiled_s, ref), 1) << '\n';
        });
      }
      out << format_summary(summary) << allocator->memory_summary() << std::flush;
      if (options.profile_ops) out << format_op_profile(op_profile, profiled_steps, profiled_s, ref) << std::flush;
    }
    return interrupted ? stopped_exit_code(stop_signal) : 0;
  } catch (const OutOfMemory&) {
    if (root && run_dir) {
      out << "\nmemtrain: out of memory; the allocator at the failure:\n" << allocator->memory_summary() << std::flush;
      try {
        write_memory_outputs(*allocator, config.memory.trace ? &trace : nullptr, *run_dir);
      } catch (const std::exception& e) {
        std::cerr << "memtrain: " << e.what() << '\n';
      }
    }
    throw;
  }
}

}  // namespace
}  // namespace memtrain::train
