// TrainingRun: run(), the header, finish and the step boundary (Note [A trainer in phases]).
#include "runtime/train/training_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "comms/broadcast_string.hpp"
#include "comms/launcher_environment.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "memory/byte_size.hpp"
#include "memory/out_of_memory.hpp"
#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"
#include "runtime/train/fill_mask.hpp"
#include "runtime/train/hardware_peak.hpp"
#include "runtime/train/memcpy_bandwidth.hpp"
#include "runtime/train/memory_outputs.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/op_profile_report.hpp"
#include "runtime/train/run_summary.hpp"
#include "runtime/train/sgemm_peak.hpp"

namespace memtrain::train {
namespace {

double seconds_since(TrainingRun::Clock::time_point t0) {
  return std::chrono::duration<double>(TrainingRun::Clock::now() - t0).count();
}

// 65536 rather than 65536.000000 or 6.5536e+04: loss scales are powers of two in practice.
std::string plain_number(double x) {
  std::ostringstream os;
  os << std::setprecision(17) << x;
  return os.str();
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

// " (GEMMs in ...)" of the header's precision, for bf16; empty otherwise. `basis`: why the
// CPU's path is the one it is (Note [bf16_gemm: auto measures the step's GEMMs]).
std::string gemm_path(const Config& config, bool on_gpu, bool native_bf16_gemm, Bf16GemmBasis basis) {
  if (config.precision.dtype != "bf16") return "";
  if (on_gpu) {
    return native_bf16_gemm ? " (GEMMs in bf16 on the GPU's tensor cores: cuBLASLt)"
                            : " (GEMMs in fp32 on operands converted on the GPU)";
  }
  const std::string how = native_bf16_gemm ? " (GEMMs in bf16: "
                          : config.precision.bf16_gemm == "fp32"
                              ? " (GEMMs in fp32 on converted operands, as precision.bf16_gemm: fp32 asks; "
                          : basis == Bf16GemmBasis::no_dot_products
                              ? " (GEMMs in fp32 on converted operands: no bf16 dot products here; "
                              : " (GEMMs in fp32 on converted operands, by precision.bf16_gemm: auto; ";
  return how + kernels::bf16_gemm_description() + ")";
}

}  // namespace

int TrainingRun::run() {
  try {
    set_up();
  } catch (const StoppedWhileWaiting& stopped) {
    return stopped_exit_code(stopped.signal);
  }
  resume();
  choose_bf16_gemm();
  write_pool_start_event();
  // Note [Memory record of an out-of-memory run]
  // An OutOfMemory is the failure the memory outputs exist to explain: the allocator's
  // segments and blocks at that moment show what held the memory (fragmentation, the cache, a
  // tag that grew). So once the run directory exists, an OutOfMemory still writes
  // memory_snapshot.json (and the trace) and prints the memory summary before it propagates
  // (exit 1). A failure to write them is reported but does not hide the OutOfMemory.
  try {
    measure_peaks();
    print_header();
    progress_.emplace(*out_,
                      root_ && progress_is_live(options_.progress, stdout_is_terminal(), comms::launched_by_mpi()));
    start_checkpointing();
    start_watchdog();
    if (root_) {
      const auto& tc = config_.training;
      log_.emplace(*metrics_, *progress_,
                   TrainingLogSettings{tc.max_steps, tc.log_interval, peak_flops_, sgemm_flops_, dry_});
    }
    run_steps();
    return finish();
  } catch (const OutOfMemory&) {
    write_out_of_memory_record();
    throw;
  }
}

// MFU's denominator is the hardware's peak (Note [Which clock the peak uses]); the sgemm
// speed measured here is sgemm_fraction's. Both are sums over the ranks. The sgemm runs
// through an allocator of its own, so its three [1024, 1024] buffers stay out of the run's
// memory statistics (peak_allocated_bytes would otherwise report them).
void TrainingRun::measure_peaks() {
  // Threads beyond this rank's share of the node's cores add no FLOPs: the peak counts cores.
  const int node_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A run whose GEMMs use bf16 dot products is measured against their peak.
  const int peak_cores = std::min(threads_, std::max(1, node_cores / std::max(1, world_->local_size())));
  const HardwarePeak hw =
      job_->model.options().native_bf16_gemm ? hardware_peak_bf16(peak_cores) : hardware_peak(peak_cores);
  peak_description_ = hw.describe();
  peak_flops_ = hw.flops();
  if (!dry_) {
    core::Context probe(make_model_allocator(MemoryConfig{}));
    sgemm_flops_ = measure_sgemm_peak_flops(probe);
  }
  world_->allreduce_sum(&sgemm_flops_, 1);
  // One rank with an unknown peak makes the sum unknown: count the ranks that know none.
  double peak_known = peak_flops_ > 0 ? 0.0 : 1.0;
  world_->allreduce_sum(&peak_known, 1);
  world_->allreduce_sum(&peak_flops_, 1);
  if (peak_known > 0) peak_flops_ = 0.0;
}

void TrainingRun::print_header() {
  const auto& tc = config_.training;
  // A job in a pool may start in a smaller footprint than its config's (pool_seat.hpp).
  const std::string recompute = seat_ ? seat_->footprints()[seat_->current()].recompute : resolved_.memory.recompute;
  const int layers =
      seat_ ? seat_->footprints()[seat_->current()].recompute_num_layers : resolved_.memory.recompute_num_layers;
  const std::string method =
      seat_ ? seat_->footprints()[seat_->current()].recompute_method : resolved_.memory.recompute_method;
  const std::string recompute_text =
      recompute + (layers > 0 ? " (" + std::to_string(layers) + " layers, " + method + ")" : "");
  std::ostream& out = *out_;
  out << "memtrain: training " << config_.name << ": " << job_->model.num_parameters() << " parameters, "
      << tc.max_steps << " steps of " << tc.global_batch_size << " sequences x " << config_.data.seq_length
      << " tokens (micro-batch " << plan_->micro_batch_size << " x " << plan_->accumulation_steps()
      << " accumulation x " << grid_->dp_size() << " data-parallel"
      << (grid_->tp_size() > 1 ? " x " + std::to_string(grid_->tp_size()) + " tensor-parallel" : "") << " ranks), "
      << threads_ << " threads/rank\n"
      << "memtrain: hardware peak " << peak_description_ << (world_->size() > 1 ? " per rank" : "") << "; sgemm "
      << (dry_ ? std::string("not measured (dry run)")
               : "measured " + std::to_string(static_cast<long>(sgemm_flops_ / 1e9)) + " GFLOP/s")
      << "\n"
      << "memtrain: precision " << config_.precision.dtype
      << gemm_path(config_, job_->on_gpu(), job_->model.options().native_bf16_gemm, bf16_gemm_.basis)
      << (job_->scaler.enabled() ? " (dynamic loss scaling from " + plain_number(job_->scaler.scale()) + ")" : "")
      << ", recompute " << recompute_text << ", attention " << config_.memory.attention << "\n"
      << bf16_gemm_header_line(bf16_gemm_) << "memtrain: run directory " << run_path_ << "\n";
  // Note [1-bit gradients under AdamW are not reliable] (README, "Gradient compression"): over
  // three seeds and two batch splits of the main job, 1-bit-compressed gradients fed to AdamW
  // ended up to several percent above uncompressed training, while 1-bit Adam held; DeepSpeed
  // likewise offers 1-bit only inside its 1-bit optimizers.
  if (root_ && config_.compression.method == "onebit" && config_.training.optimizer != "onebit_adam") {
    std::cerr << "memtrain: warning: compression.method: onebit feeds 1-bit gradients to " << config_.training.optimizer
              << ", which is not reliable: over several seeds and batch splits it ended up to several percent "
                 "above uncompressed training (README, \"Gradient compression\"); training.optimizer: "
                 "onebit_adam is the 1-bit method to use\n";
  }
  if (dry_) {
    out << "memtrain: dry run on simulated " << target_.describe() << ": allocator capacity "
        << memory::format_byte_size(target_.allocator_capacity()) << " (non-allocator "
        << memory::format_byte_size(target_.non_allocator.total()) << "); no math runs, losses are not computed\n";
  }
  // Note [ECC counts through NVML, loaded at run time]: GPU builds, at the replica checks. On
  // if any rank sees an ECC-capable GPU, so that every rank joins the check's collective.
#ifdef MEMTRAIN_HAVE_CUDA
  if (config_.health.ecc_check && config_.health.consistency_interval > 0 && !dry_) {
    nvml_.emplace(Nvml::default_library());
    ecc_.emplace(*nvml_);
    std::int64_t ranks = ecc_->monitored_devices() > 0 ? 1 : 0;
    world_->allreduce_sum(&ranks, 1);
    if (ranks == 0) {
      ecc_.reset();
    } else {
      out << "memtrain: health: GPU ECC counts read through NVML every " << config_.health.consistency_interval
          << " steps (" << ranks << " of " << world_->size() << " ranks see ECC-capable GPUs)\n";
    }
  }
#endif
}

void TrainingRun::start_watchdog() {
  if (config_.health.stall_timeout <= 0 || world_->size() <= 1 || dry_) return;
  // Rank 0 named the run directory (a default name carries its clock).
  const std::string run_dir = comms::broadcast_string(*world_, run_path_);
  watchdog_ = std::make_unique<StallWatchdog>((std::filesystem::path(run_dir) / "heartbeats").string(), world_->rank(),
                                              world_->size(), config_.health.stall_timeout);
  watchdog_->progress(step_);
}

int TrainingRun::finish() {
  const StallWatchdog::Busy busy(watchdog_.get(), "finishing");
  if (stopped_while_preempted_) {
    // It holds no memory and no model: its checkpoint of this step is the run's state.
    *out_ << "memtrain: stopped while waiting for memory after a preemption at step " << step_
          << "; a relaunch with the same --run-dir resumes from its checkpoint\n"
          << std::flush;
    if (root_) run_dir_->record("pool", pool_record_json());
    return stopped_exit_code(stop_signal_);
  }
  // Every rank of rank 0's tensor-parallel group takes part (the vocabulary is split).
  if (grid_->dp_rank() == 0 && data_.tokenizer && !dry_ && step_ > 0) {  // untrained: noise
    *out_ << "Fill-mask predictions (top 5):\n";
    *out_ << format_fill_mask_probes(job_->model, *data_.tokenizer, fill_mask_probes(), 5,
                                     config_.model.max_position_embeddings, config_.data.corpus == "kjv");
  }
  if (root_) write_summary();
  return interrupted_ ? stopped_exit_code(stop_signal_) : 0;
}

void TrainingRun::write_summary() {
  const auto mem = job_->allocator->stats();
  RunSummary summary;
  summary.steps_done = step_;
  summary.max_steps = config_.training.max_steps;
  summary.interrupted = interrupted_;
  summary.stop_signal = stop_signal_;
  summary.wall_s = seconds_since(start_);
  summary.train_s = log_->train_s();
  summary.tokens = log_->tokens();
  summary.final_train_loss = last_loss_;
  summary.start_eval_loss = start_eval_.loss;
  summary.end_eval_loss = end_eval_.loss;
  summary.end_eval_accuracy = end_eval_.accuracy;
  summary.peak_allocated_bytes = mem.allocated_bytes.peak;
  summary.peak_reserved_bytes = mem.reserved_bytes.peak;
  summary.run_dir = run_path_;
  summary.precision = config_.precision.dtype;
  summary.gemm_path = bf16_gemm_summary(bf16_gemm_);
  summary.loss_scaling = job_->scaler.enabled();
  summary.final_loss_scale = job_->scaler.scale();
  summary.skipped_steps = job_->scaler.skipped_steps();
  summary.dry_run = dry_;
  summary.health_events = health_events_;
  summary.pool = pool_trajectory();
  if (seat_) run_dir_->record("pool", pool_record_json());
  // Files first: under mpirun after a Ctrl-C, stdout may no longer be read (Note [SIGTERM
  // interrupts a blocked write]), and the snapshot must not wait on it.
  write_memory_outputs(*job_->allocator, config_.memory.trace ? &trace_ : nullptr, *run_dir_);
  const bool profiled = options_.profile_ops && !dry_;
  StepReference reference;
  if (profiled) reference = measure_step_reference(config_, grid_->tp_size(), profiled_flops_);
  const StepReference* ref = profiled ? &reference : nullptr;
  if (options_.profile_ops) {
    core::write_file_atomically(run_dir_->file("op_profile.json"), [&](std::ostream& f) {
      f << core::json_text(op_profile_json(op_profile_, profiled_steps_, profiled_s_, ref), 1) << '\n';
    });
  }
  *out_ << format_summary(summary) << job_->allocator->memory_summary() << std::flush;
  if (options_.profile_ops) {
    *out_ << format_op_profile(op_profile_, profiled_steps_, profiled_s_, ref) << std::flush;
  }
}

void TrainingRun::write_out_of_memory_record() {
  if (!root_ || !run_dir_ || !job_) return;
  *out_ << "\nmemtrain: out of memory; the allocator at the failure:\n"
        << job_->allocator->memory_summary() << std::flush;
  try {
    write_memory_outputs(*job_->allocator, config_.memory.trace ? &trace_ : nullptr, *run_dir_);
  } catch (const std::exception& e) {
    std::cerr << "memtrain: " << e.what() << '\n';
  }
}

void TrainingRun::set_micro_batch_size(int micro_batch_size) {
  if (job_->on_gpu() && micro_batch_size > config_.training.micro_batch_size) {
    throw ConfigError("micro-batch size " + std::to_string(micro_batch_size) +
                      " at a step boundary: the GPU's fixed workspaces are sized for training.micro_batch_size = " +
                      std::to_string(config_.training.micro_batch_size) + "; expected at most that");
  }
  plan_ = BatchPlan::make(config_.training.global_batch_size, micro_batch_size, grid_->dp_size(), grid_->dp_rank());
}

void TrainingRun::set_recompute(models::Recompute recompute, models::RecomputeMethod method, int num_layers) {
  job_->model.set_recompute(recompute, method, num_layers);
}

std::size_t TrainingRun::release_cached_memory() { return job_->release_cached_memory(); }

}  // namespace memtrain::train
