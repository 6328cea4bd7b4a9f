#pragma once
// The keys of metrics.jsonl lines (README, "Outputs of a run"), written out independently of
// runtime/train/metrics_writer.cpp: issue 2 ("The interface other parts rely on"), issue 5
// (loss_scale, skipped_steps) and issue 9 (sgemm_fraction and the figures mfu is computed from), issue 10 (tensor-parallel
// collectives) and issue 11 (comm_bytes, time_comm_exposed_s) and issue 12 (compression_ratio).
#include <string>
#include <vector>

namespace memtrain::train::testing {

inline const std::vector<std::string> kTrainKeys = {"step",
                                                    "loss",
                                                    "lr",
                                                    "grad_norm",
                                                    "tokens_per_s",
                                                    "mfu",
                                                    "sgemm_fraction",
                                                    "model_flops_per_s",
                                                    "peak_flops",
                                                    "sgemm_flops",
                                                    "time_forward_s",
                                                    "time_backward_s",
                                                    "time_optimizer_s",
                                                    "time_comm_s",
                                                    "time_tp_comm_s",
                                                    "tp_comm_bytes",
                                                    "comm_bytes",
                                                    "time_comm_exposed_s",
                                                    "compression_ratio",
                                                    "allocated_bytes",
                                                    "reserved_bytes",
                                                    "peak_allocated_bytes",
                                                    "loss_scale",
                                                    "skipped_steps"};
inline const std::vector<std::string> kEvalKeys = {"step", "eval_loss", "eval_accuracy", "eval_perplexity"};

}  // namespace memtrain::train::testing
