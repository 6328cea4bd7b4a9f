#pragma once
// run_dir/metrics.jsonl: one JSON object per line (issue 2, "The interface other parts rely
// on"). Scripts and later issues read these keys by name; add keys, never rename them.
#include <cstdint>
#include <fstream>
#include <string>

#include "runtime/train/pool_seat.hpp"

namespace memtrain::train {

// One logged training step. Times are seconds summed over the micro-batches of the step
// (averaged over the steps since the previous log line); memory in bytes of the model's allocator.
struct TrainMetrics {
  std::int64_t step = 0;
  double loss = 0;  // mean over the masked tokens of the global batch
  double lr = 0;
  double grad_norm = 0;     // global L2 norm before clipping
  double tokens_per_s = 0;  // global (all ranks) input tokens per second
  // Model FLOPs utilization: model_flops_per_s / peak_flops, the hardware's peak
  // (hardware_peak.hpp); NaN (null) when the peak is unknown.
  double mfu = 0;
  // model_flops_per_s / sgemm_flops, the sgemm speed this run measured at start (sgemm_peak.hpp):
  // how much of the GEMM speed reachable here a step uses. Moves with load.
  double sgemm_fraction = 0;
  // Model FLOPs of the steps (masked-only head) per second, all ranks.
  double model_flops_per_s = 0;
  double peak_flops = 0;   // hardware peak FLOP/s of all ranks (NaN when unknown)
  double sgemm_flops = 0;  // measured sgemm FLOP/s of all ranks
  double time_forward_s = 0;
  double time_backward_s = 0;
  double time_optimizer_s = 0;
  double time_comm_s = 0;
  // Tensor-parallel collectives per step, this rank (0 without tensor parallelism): seconds
  // (part of time_forward_s + time_backward_s) and bytes handed to them.
  double time_tp_comm_s = 0;
  double tp_comm_bytes = 0;
  // Data-parallel gradient synchronisation per step, this rank: payload bytes handed to its
  // collectives, and the seconds of it backward did not hide (comms::GradientSyncStats).
  double comm_bytes = 0;
  double time_comm_exposed_s = 0;
  // The logged step's uncompressed payload over its comm_bytes (1 without compression, and
  // with one data-parallel rank).
  double compression_ratio = 1;
  std::int64_t allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t peak_allocated_bytes = 0;
  double loss_scale = 1;           // fp16 dynamic loss scale the logged step ran with; 1 otherwise
  std::int64_t skipped_steps = 0;  // steps skipped for inf/NaN gradients so far in the run
};

// One evaluation on the fixed validation set.
struct EvalMetrics {
  std::int64_t step = 0;
  double eval_loss = 0;        // mean cross-entropy over masked tokens (nats)
  double eval_accuracy = 0;    // share of masked tokens whose argmax is the label
  double eval_perplexity = 0;  // exp(eval_loss)
};

// Appends lines to `path`, flushing each one so a crash or SIGINT never loses a logged step.
// Throws memtrain::RuntimeError when the file cannot be opened or written.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path);
  void write(const TrainMetrics& m);
  void write(const EvalMetrics& m);
  // {"resumed_from": step, "checkpoint": path, "checkpoint_data_parallel_size": n,
  //  "data_parallel_size": m}: training continues after `step` from that checkpoint. It has no
  // "step" key, so readers of step lines skip it.
  void write_resumed(std::int64_t step, const std::string& checkpoint, int checkpoint_dp, int dp);
  // {"rolled_back_to": step, "checkpoint": path, "reason": why}: a health check rolled the run
  // back (health_check.hpp); no "step" key either.
  void write_rolled_back(std::int64_t step, const std::string& checkpoint, const std::string& reason);
  // {"fault_detected_at": step, "reason": why}: a health check found a fault at `step`
  // (replicas that disagree, a streak of skipped steps, non-finite parameters), written before
  // the rollback or the failure it leads to; no "step" key either.
  void write_fault_detected(std::int64_t step, const std::string& reason);
  // {"step": N, "event": "wait" | "shrink" | "grow" | "preempt" | "resume", "from": {...},
  //  "to": {...}, "why": "..."}: what the memory pool made the job do at step N (pool_seat.hpp).
  // from/to: {"micro_batch_size", "recompute", "need_bytes"}, {} for none (before a start,
  // after a preemption).
  void write_pool_event(std::int64_t step, const std::string& event, const Footprint* from, const Footprint* to,
                        const std::string& why);
  // Opens the file again (after truncate_metrics_after replaced it).
  void reopen();
  const std::string& path() const { return path_; }

 private:
  void write_line(const std::string& line);
  std::string path_;
  std::ofstream out_;
};

// What truncate_metrics_after kept.
struct MetricsTruncation {
  std::int64_t dropped_lines = 0;
  bool eval_at_step = false;  // an eval line of the step kept through survived
};

// Rewrites `path` (atomically) without its lines of steps after `step`, and without a torn
// last line (a process killed while writing it), so that after a resume from the checkpoint of
// `step` no step appears twice. Lines without "step" (resumed_from) are kept. A missing file
// is left missing. Throws RuntimeError when it cannot be read or rewritten.
MetricsTruncation truncate_metrics_after(const std::string& path, std::int64_t step);

}  // namespace memtrain::train
