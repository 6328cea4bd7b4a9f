// The op profile's bookkeeping (Note [Profiling ops in the step]): calls, FLOPs and bytes are
// summed per (op, shape); an op's seconds are its self time, so nested ops add up to the
// outer scope's wall time once; without a profile nothing is described.
#include "runtime/core/op_profile.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace memtrain::core {
namespace {

TEST(OpProfile, SumsCallsFlopsAndBytesPerOpAndShape) {
  OpProfile p;
  p.add("gemm.forward", "[2, 3] x [4, 3]^T", 0.5, 48, 0);
  p.add("gemm.forward", "[2, 3] x [4, 3]^T", 0.25, 48, 0);
  p.add("gemm.forward", "[5, 3] x [4, 3]^T", 1.0, 120, 0);
  p.add("dropout.forward", "[2, 3]", 0.125, 0, 48);
  ASSERT_EQ(p.stats().size(), 3u);
  const OpStat& g = p.stats().at({"gemm.forward", "[2, 3] x [4, 3]^T"});
  EXPECT_EQ(g.calls, 2);
  EXPECT_EQ(g.seconds, 0.75);
  EXPECT_EQ(g.flops, 96);
  EXPECT_EQ(p.total_seconds(), 1.875);
  // Slowest first.
  const auto j = p.to_json();
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["shape"], "[5, 3] x [4, 3]^T");
  EXPECT_EQ(j[1]["calls"], 2);
  EXPECT_EQ(j[2]["op"], "dropout.forward");
  EXPECT_EQ(j[2]["bytes"], 48);
}

TEST(OpProfile, NestedOpsCountTheirTimeOnce) {
  OpProfile p;
  const auto t0 = std::chrono::steady_clock::now();
  {
    const ScopedOp outer(&p, "outer", [] { return ScopedOp::Description{"a", 0, 0}; });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      const ScopedOp inner(&p, "inner", [] { return ScopedOp::Description{"b", 0, 0}; });
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double outer = p.stats().at({"outer", "a"}).seconds, inner = p.stats().at({"inner", "b"}).seconds;
  // Self times: the inner scope's time is not in the outer one's, and together they are the
  // outer scope's wall time, which the clock reads bracket.
  EXPECT_GE(inner, 0.002);
  EXPECT_GE(outer, 0.002);
  EXPECT_LE(outer + inner, wall);
  EXPECT_DOUBLE_EQ(p.total_seconds(), outer + inner);
}

TEST(OpProfile, WithoutAProfileNothingIsDescribedOrRecorded) {
  bool described = false;
  {
    const ScopedOp op(nullptr, "gemm.forward", [&] {
      described = true;
      return ScopedOp::Description{};
    });
  }
  EXPECT_FALSE(described);
}

TEST(OpProfile, ShapeText) {
  EXPECT_EQ(shape_text({}), "[]");
  EXPECT_EQ(shape_text({1024, 768}), "[1024, 768]");
}

}  // namespace
}  // namespace memtrain::core
