#include "runtime/train/run_summary.hpp"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <sstream>

#include "memory/byte_size.hpp"
#include "runtime/train/progress_line.hpp"

namespace memtrain::train {

std::string format_summary(const RunSummary& s) {
  char buf[256];
  std::ostringstream os;
  os << "Summary\n";
  std::snprintf(buf, sizeof buf, "  steps            %lld/%lld%s\n", static_cast<long long>(s.steps_done),
                static_cast<long long>(s.max_steps),
                !s.interrupted             ? ""
                : s.stop_signal == SIGTERM ? " (stopped by SIGTERM)"
                : s.stop_signal == SIGUSR1 ? " (stopped by SIGUSR1)"
                                           : " (stopped by SIGINT)");
  os << buf;
  std::snprintf(buf, sizeof buf, "  time             %.1f s (%.1f s in training steps, %s)\n", s.wall_s, s.train_s,
                format_duration(s.wall_s).c_str());
  os << buf;
  if (s.dry_run) {
    // A dry run's steps only infer shapes: tokens per second of that would be a bogus speed.
    std::snprintf(buf, sizeof buf, "  tokens/s         dry run (%lld tokens)\n", static_cast<long long>(s.tokens));
  } else {
    std::snprintf(buf, sizeof buf, "  tokens/s         %.0f (%lld tokens)\n",
                  s.train_s > 0 ? static_cast<double>(s.tokens) / s.train_s : 0.0, static_cast<long long>(s.tokens));
  }
  os << buf;
  if (s.steps_done == 0 || std::isnan(s.final_train_loss)) {
    std::snprintf(buf, sizeof buf, "  train loss       none (%s)\n",
                  s.dry_run ? "a dry run computes none" : "no step ran in this process");
  } else {
    std::snprintf(buf, sizeof buf, "  train loss       %.4f (last step)\n", s.final_train_loss);
  }
  os << buf;
  std::snprintf(buf, sizeof buf, "  eval loss        %.4f -> %.4f\n", s.start_eval_loss, s.end_eval_loss);
  os << buf;
  std::snprintf(buf, sizeof buf, "  masked accuracy  %.2f %%\n", 100.0 * s.end_eval_accuracy);
  os << buf;
  if (s.loss_scaling) {
    std::snprintf(buf, sizeof buf, "  precision        %s (loss scale %.17g at the end, %lld steps skipped)\n",
                  s.precision.c_str(), s.final_loss_scale, static_cast<long long>(s.skipped_steps));
    os << buf;
  } else {
    os << "  precision        " << s.precision << (s.gemm_path.empty() ? "" : ", " + s.gemm_path) << '\n';
  }
  os << "  peak memory      " << memory::format_byte_size(s.peak_allocated_bytes) << " allocated, "
     << memory::format_byte_size(s.peak_reserved_bytes) << " reserved\n";
  for (const auto& e : s.health_events) os << "  health           " << e << '\n';
  if (!s.pool.empty()) os << "  memory pool      " << s.pool << '\n';
  if (!s.run_dir.empty()) os << "  run directory    " << s.run_dir << '\n';
  return os.str();
}

}  // namespace memtrain::train
