#pragma once
// design.md, "Execution modes": a dry run's allocation trace equals the compute run's, event
// for event (kind, bytes, tag, allocation id). Shared by the multi-rank tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memory/trace_event.hpp"

namespace memtrain::train::testing {

inline void expect_same_trace(const std::vector<memory::TraceEvent>& real, const std::vector<memory::TraceEvent>& dry,
                              const std::string& name, std::size_t at_least) {
  ASSERT_GT(real.size(), at_least) << name;
  ASSERT_EQ(real.size(), dry.size()) << name;
  for (std::size_t i = 0; i < real.size(); ++i) {
    const auto& a = real[i];
    const auto& b = dry[i];
    ASSERT_TRUE(a.kind == b.kind && a.bytes == b.bytes && a.tag == b.tag && a.allocation_id == b.allocation_id)
        << name << " event " << i << ": " << memory::to_string(a.kind) << " " << a.bytes << " B vs "
        << memory::to_string(b.kind) << " " << b.bytes << " B";
  }
}

}  // namespace memtrain::train::testing
