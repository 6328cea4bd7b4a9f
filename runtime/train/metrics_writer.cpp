#include "runtime/train/metrics_writer.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::train {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  out_.open(path, std::ios::out | std::ios::app);
  if (!out_) {
    throw RuntimeError("cannot open " + path + " for writing: " + (errno != 0 ? std::strerror(errno) : "I/O error"));
  }
}

void MetricsWriter::write(const TrainMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["tokens_per_s"] = m.tokens_per_s;
  j["mfu"] = m.mfu;
  j["sgemm_fraction"] = m.sgemm_fraction;
  j["model_flops_per_s"] = m.model_flops_per_s;
  j["peak_flops"] = m.peak_flops;
  j["sgemm_flops"] = m.sgemm_flops;
  j["time_forward_s"] = m.time_forward_s;
  j["time_backward_s"] = m.time_backward_s;
  j["time_optimizer_s"] = m.time_optimizer_s;
  j["time_comm_s"] = m.time_comm_s;
  j["time_tp_comm_s"] = m.time_tp_comm_s;
  j["tp_comm_bytes"] = m.tp_comm_bytes;
  j["comm_bytes"] = m.comm_bytes;
  j["time_comm_exposed_s"] = m.time_comm_exposed_s;
  j["compression_ratio"] = m.compression_ratio;
  j["allocated_bytes"] = m.allocated_bytes;
  j["reserved_bytes"] = m.reserved_bytes;
  j["peak_allocated_bytes"] = m.peak_allocated_bytes;
  j["loss_scale"] = m.loss_scale;
  j["skipped_steps"] = m.skipped_steps;
  write_line(core::json_text(j));
}

void MetricsWriter::write(const EvalMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["eval_loss"] = m.eval_loss;
  j["eval_accuracy"] = m.eval_accuracy;
  j["eval_perplexity"] = m.eval_perplexity;
  write_line(core::json_text(j));
}

void MetricsWriter::write_resumed(std::int64_t step, const std::string& checkpoint, int checkpoint_dp, int dp) {
  nlohmann::ordered_json j;
  j["resumed_from"] = step;
  j["checkpoint"] = checkpoint;
  j["checkpoint_data_parallel_size"] = checkpoint_dp;
  j["data_parallel_size"] = dp;
  write_line(core::json_text(j));
}

void MetricsWriter::write_rolled_back(std::int64_t step, const std::string& checkpoint, const std::string& reason) {
  nlohmann::ordered_json j;
  j["rolled_back_to"] = step;
  j["checkpoint"] = checkpoint;
  j["reason"] = reason;
  write_line(core::json_text(j));
}

void MetricsWriter::write_fault_detected(std::int64_t step, const std::string& reason) {
  nlohmann::ordered_json j;
  j["fault_detected_at"] = step;
  j["reason"] = reason;
  write_line(core::json_text(j));
}

void MetricsWriter::write_pool_event(std::int64_t step, const std::string& event, const Footprint* from,
                                     const Footprint* to, const std::string& why) {
  const auto fields = [](const Footprint* f) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (!f) return j;
    j["micro_batch_size"] = f->micro_batch_size;
    j["recompute"] = f->recompute_num_layers > 0 ? f->recompute + " (" + std::to_string(f->recompute_num_layers) +
                                                       " layers, " + f->recompute_method + ")"
                                                 : f->recompute;
    j["need_bytes"] = f->need_bytes;
    return j;
  };
  nlohmann::ordered_json j;
  j["step"] = step;
  j["event"] = event;
  j["from"] = fields(from);
  j["to"] = fields(to);
  j["why"] = why;
  write_line(core::json_text(j));
}

void MetricsWriter::reopen() {
  out_.close();
  out_.clear();
  out_.open(path_, std::ios::out | std::ios::app);
  if (!out_) {
    throw RuntimeError("cannot open " + path_ + " for writing: " + (errno != 0 ? std::strerror(errno) : "I/O error"));
  }
}

void MetricsWriter::write_line(const std::string& line) {
  errno = 0;
  out_ << line << '\n';
  out_.flush();
  // The stream keeps no reason; errno after the failed write does (ENOSPC: a full disk).
  if (!out_) throw RuntimeError("cannot write to " + path_ + ": " + (errno != 0 ? std::strerror(errno) : "I/O error"));
}

MetricsTruncation truncate_metrics_after(const std::string& path, std::int64_t step) {
  MetricsTruncation result;
  if (!std::filesystem::exists(path)) return result;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("cannot read " + path);
  std::vector<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      ++result.dropped_lines;  // torn by a kill mid-write
      continue;
    }
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) {
      const auto s = j["step"].get<std::int64_t>();
      if (s > step) {
        ++result.dropped_lines;
        continue;
      }
      if (s == step && j.contains("eval_loss")) result.eval_at_step = true;
    }
    kept.push_back(line);
  }
  if (in.bad()) throw RuntimeError("cannot read " + path);
  core::write_file_atomically(path, [&](std::ostream& out) {
    for (const auto& l : kept) out << l << '\n';
  });
  return result;
}

}  // namespace memtrain::train
