#pragma once
// The kernels' loops over threads (OpenMP), in one place.
#include <cstdint>

#include "kernels/cpu/threads.hpp"

namespace memtrain::kernels::detail {

// Note [No thread team for small or single-threaded loops]
// libgomp allocates a team descriptor for every parallel region that runs on one thread (an
// `if (false)` clause, or num_threads(1)), which would break the kernels' never-allocates
// contract at every call; and waking a team for a few microseconds of work costs more than it
// saves, worse on a loaded machine where a descheduled worker stalls the whole team. Loops
// therefore run inline unless more than one thread is set AND the caller says the loop is
// worth a team (`worth_it`, a work estimate against a threshold at each call site).
//
// Loop bodies capture by value ([=]): pointers captured by reference are reloaded through the
// closure inside the vectorized inner loops (LayerNorm backward ran 2.5x slower that way).
inline bool use_team(bool worth_it) { return worth_it && num_threads() > 1; }

// body(i) for i in [0, n), statically partitioned over num_threads() threads when use_team.
template <class Body>
void parallel_for(std::int64_t n, bool worth_it, Body&& body) {
  if (!use_team(worth_it) || n <= 1) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(num_threads())
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// A double sum and an integer count, reduced over a loop.
struct Sums {
  double value = 0;
  std::int64_t count = 0;
};

// Sums of body(i, Sums&) over i in [0, n). With a team, the order of the additions depends on
// the thread count (the last bits of `value` may differ between thread counts).
template <class Body>
Sums parallel_sums(std::int64_t n, bool worth_it, Body&& body) {
  double value = 0;
  std::int64_t count = 0;
  if (!use_team(worth_it) || n <= 1) {
    for (std::int64_t i = 0; i < n; ++i) {
      Sums s;
      body(i, s);
      value += s.value;
      count += s.count;
    }
    return {value, count};
  }
#pragma omp parallel for schedule(static) num_threads(num_threads()) reduction(+ : value, count)
  for (std::int64_t i = 0; i < n; ++i) {
    Sums s;
    body(i, s);
    value += s.value;
    count += s.count;
  }
  return {value, count};
}

}  // namespace memtrain::kernels::detail
