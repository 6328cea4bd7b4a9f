#include "kernels/cpu/threads.hpp"

#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>

extern "C" void openblas_set_num_threads(int num_threads);

namespace memtrain::kernels {
namespace {
std::atomic<int> g_num_threads{0};   // 0: not fixed yet (see num_threads())
std::atomic<int> g_serial_depth{0};  // open SerialBlasScopes (kernels nest them)
}  // namespace

void set_num_threads(int n) {
  if (n < 1) {
    throw std::invalid_argument("set_num_threads: n = " + std::to_string(n) + "; expected a thread count >= 1");
  }
  g_num_threads.store(n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() {
  int n = g_num_threads.load();
  if (n == 0) {
    // Fixed at the first call: the OpenMP build of OpenBLAS changes OpenMP's default inside
    // SerialBlasScope, which must not leak into later loops.
    int unset = 0;
    g_num_threads.compare_exchange_strong(unset, omp_get_max_threads());
    n = g_num_threads.load();
  }
  return n;
}

// openblas_set_num_threads only stores a count while the count goes down, and reuses its
// sleeping threads when it goes back up, so a scope per attention call is cheap.
SerialBlasScope::SerialBlasScope() : saved_(num_threads()) {
  if (g_serial_depth.fetch_add(1) == 0) openblas_set_num_threads(1);
}

SerialBlasScope::~SerialBlasScope() {
  if (g_serial_depth.fetch_sub(1) != 1) return;  // an outer scope is still open
  openblas_set_num_threads(saved_);
  // The OpenMP build of OpenBLAS also calls omp_set_num_threads; put ours back either way.
  omp_set_num_threads(saved_);
}

}  // namespace memtrain::kernels
