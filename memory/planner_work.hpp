#pragma once
// Counts the activation planner's work (ArenaPlan::work): a comparator that counts its calls,
// for the planner's sorts, binary searches and ordered sets, so a test can check how the work
// grows with the input without timing it.
#include <cstddef>
#include <functional>

namespace memtrain::memory::detail {

// Wraps `Less` (a strict weak order); every comparison adds one to *count. Copies share the
// counter, as std::sort and std::set copy their comparator.
template <class Less = std::less<>>
struct CountingLess {
  std::size_t* count;
  Less less{};
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    ++*count;
    return less(a, b);
  }
};

template <class Less>
CountingLess<Less> counting(std::size_t& count, Less less) {
  return CountingLess<Less>{&count, less};
}

}  // namespace memtrain::memory::detail
