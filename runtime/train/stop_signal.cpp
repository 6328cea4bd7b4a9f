#include "runtime/train/stop_signal.hpp"

#include <atomic>

namespace memtrain::train {
namespace {

// Lock-free atomics are async-signal-safe (C++17 [support.signal]).
// The first stop signal's number; 0 = none yet.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, sig);
}

}  // namespace

StopSignal::StopSignal() {
  g_stop_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read() in the data pipeline must not fail with EINTR
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGUSR1, &action, &previous_usr1_);
  // Note [SIGTERM interrupts a blocked write]
  // After a Ctrl-C, mpirun sends the ranks SIGTERM and stops reading their output. Rank 0's
  // next progress line then blocks in write(2) on a full pseudo-terminal, never reaches the
  // stop vote, and the other ranks wait for it in the all-reduce until mpirun kills the job:
  // the last steps' metrics and the final evaluation are lost. Without SA_RESTART the blocked
  // write returns EINTR instead, std::cout goes bad and stays silent, and the rank stops after
  // the step like the others. The price: a SIGTERM during data preparation can fail a read
  // with EINTR (exit 1 with the I/O error) instead of stopping after it.
  action.sa_flags = 0;
  sigaction(SIGTERM, &action, &previous_term_);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGUSR1, &previous_usr1_, nullptr);
}

bool StopSignal::requested() const { return g_stop_signal.load() != 0; }

int StopSignal::signal() const { return g_stop_signal.load(); }

}  // namespace memtrain::train
