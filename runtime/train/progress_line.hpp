#pragma once
// The live progress line of a run: step/total, loss, tokens/s, ETA, memory in use.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace memtrain::train {

struct Progress {
  std::int64_t step = 0;
  std::int64_t total_steps = 0;
  double loss = 0;
  double tokens_per_s = 0;          // NaN in a dry run: printed as "dry run"
  double eta_s = 0;                 // seconds left at the current rate
  std::size_t allocated_bytes = 0;  // memory in use by the model's allocator
};

// "step 120/1000 | loss 5.4321 | 2,345 tokens/s | ETA 3m12s | mem 45.20 MiB".
std::string format_progress(const Progress& p);

// "1h02m03s", "3m12s", "45s".
std::string format_duration(double seconds);

// On a terminal the line is rewritten in place ('\r', cleared to the end of the line) every
// update; otherwise (a log file, a pipe) each update is one plain line, so logs stay readable.
class ProgressLine {
 public:
  ProgressLine(std::ostream& out, bool is_terminal);
  ~ProgressLine();
  void update(const Progress& p);
  // Ends a pending in-place line so that the next output starts on a fresh line.
  void break_line();
  // True when updates rewrite the line in place (worth calling every step).
  bool live() const { return is_terminal_; }

 private:
  std::ostream& out_;
  bool is_terminal_;
  bool pending_ = false;
};

// True when stdout is a terminal (isatty).
bool stdout_is_terminal();

// `train --progress`: how the progress line is written.
//   automatic: in place on a terminal, unless an MPI launcher started the process
//              (Note [Progress under mpirun]); plain lines otherwise.
//   live:      always in place ('\r' and ESC[K), e.g. for an interactive mpirun.
//   lines:     always one plain line per update, as in a log file.
enum class ProgressMode { automatic, live, lines };

// "auto", "live", "lines"; throws ConfigError "--progress X: expected auto, live or lines".
ProgressMode parse_progress_mode(const std::string& text);

// Whether the progress line is rewritten in place, for `mode`, whether stdout is a terminal,
// and whether an MPI launcher started the process.
bool progress_is_live(ProgressMode mode, bool is_terminal, bool under_mpi_launcher);

}  // namespace memtrain::train
