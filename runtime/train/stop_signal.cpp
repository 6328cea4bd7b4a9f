#include "runtime/train/stop_signal.hpp"

#include <atomic>

namespace memtrain::train {
namespace {

// Lock-free atomics are async-signal-safe (C++17 [support.signal]).
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) { g_stop_requested.store(true); }

}  // namespace

StopSignal::StopSignal() {
  g_stop_requested.store(false);
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read() in the data pipeline must not fail with EINTR
  sigaction(SIGINT, &action, &previous_);
}

StopSignal::~StopSignal() { sigaction(SIGINT, &previous_, nullptr); }

bool StopSignal::requested() const { return g_stop_requested.load(); }

}  // namespace memtrain::train
