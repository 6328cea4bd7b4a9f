#include "runtime/train/progress_line.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "memory/byte_size.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, (s % 3600) / 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", s);
  }
  return buf;
}

std::string format_progress(const Progress& p) {
  char speed[48] = "dry run";  // NaN tokens_per_s: nothing was computed (Progress)
  if (!std::isnan(p.tokens_per_s)) std::snprintf(speed, sizeof speed, "%.0f tokens/s", p.tokens_per_s);
  char buf[160];
  std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f | %s | ETA %s | mem %s", static_cast<long long>(p.step),
                static_cast<long long>(p.total_steps), p.loss, speed, format_duration(p.eta_s).c_str(),
                memory::format_byte_size(p.allocated_bytes).c_str());
  return buf;
}

ProgressLine::ProgressLine(std::ostream& out, bool is_terminal) : out_(out), is_terminal_(is_terminal) {}

ProgressLine::~ProgressLine() { break_line(); }

void ProgressLine::update(const Progress& p) {
  if (is_terminal_) {
    out_ << '\r' << format_progress(p) << "\x1b[K" << std::flush;  // ESC[K: clear the rest
    pending_ = true;
  } else {
    out_ << format_progress(p) << '\n' << std::flush;
  }
}

void ProgressLine::break_line() {
  if (pending_) out_ << '\n' << std::flush;
  pending_ = false;
}

bool stdout_is_terminal() { return isatty(STDOUT_FILENO) == 1; }

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::automatic;
  if (text == "live") return ProgressMode::live;
  if (text == "lines") return ProgressMode::lines;
  throw ConfigError("--progress " + text + ": expected auto, live or lines");
}

// Note [Progress under mpirun]
// Open MPI's mpirun hands every rank a pseudo-terminal as its stdout, whether mpirun's own
// output goes to a terminal or to a file, so isatty() says "terminal" in both cases and
// `mpirun ... > train.log` filled the log with '\r' and ESC[K rewrites. A rank cannot see
// where mpirun writes, so under a launcher the automatic mode prints plain lines, as
// Megatron-LM and DeepSpeed logs do; `--progress live` keeps the in-place line for an
// interactive mpirun.
bool progress_is_live(ProgressMode mode, bool is_terminal, bool under_mpi_launcher) {
  switch (mode) {
    case ProgressMode::live:
      return true;
    case ProgressMode::lines:
      return false;
    case ProgressMode::automatic:
      break;
  }
  return is_terminal && !under_mpi_launcher;
}

}  // namespace memtrain::train
