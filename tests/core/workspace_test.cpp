#include "runtime/core/workspace.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <new>

#include "runtime/core/errors.hpp"

namespace memtrain::core {
namespace {

TEST(Workspace, SlotsGrowOnlyAndReservedBytesIsTheHighWaterMark) {
  Workspace ws;
  EXPECT_EQ(ws.reserved_bytes(), 0u);
  float* a = ws.floats(0, 100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  const std::size_t after_first = ws.reserved_bytes();
  EXPECT_GE(after_first, 100 * sizeof(float));
  // A smaller request reuses the buffer: same pointer, no growth.
  EXPECT_EQ(ws.floats(0, 10), a);
  EXPECT_EQ(ws.reserved_bytes(), after_first);
  // Another slot adds its own bytes.
  ws.floats(1, 1000);
  EXPECT_GE(ws.reserved_bytes(), after_first + 1000 * sizeof(float));
  // Growing slot 0 replaces its buffer; the total counts the new size only.
  ws.floats(0, 5000);
  EXPECT_GE(ws.reserved_bytes(), (5000 + 1000) * sizeof(float));
  EXPECT_LT(ws.reserved_bytes(), (5000 + 1000 + 100) * sizeof(float));
}

TEST(Workspace, LeasesTakeDistinctSlotsAndReturnThem) {
  Workspace ws;
  {
    auto a = ws.lease(16);
    auto b = ws.lease(16);
    EXPECT_NE(a.data(), b.data());
    EXPECT_EQ(ws.slots_in_use(), 2);
    a.data()[15] = 1.0f;  // both usable at once
    b.data()[15] = 2.0f;
    EXPECT_EQ(a.data()[15], 1.0f);
  }
  EXPECT_EQ(ws.slots_in_use(), 0);
  const int s = ws.acquire();
  EXPECT_EQ(s, 0);  // the lowest free slot is reused
  ws.release(s);
}

TEST(Workspace, AFailedGrowthThrowsBadAllocAndReturnsTheSlot) {
  Workspace ws;
  EXPECT_THROW(ws.lease(std::size_t{1} << 60), std::bad_alloc);  // 4 EiB
  EXPECT_THROW(ws.lease(~std::size_t{0}), std::bad_alloc);       // bytes overflow size_t
  EXPECT_EQ(ws.slots_in_use(), 0);
  EXPECT_EQ(ws.reserved_bytes(), 0u);
}

TEST(Workspace, BadSlotsAreRuntimeErrors) {
  Workspace ws;
  EXPECT_THROW(ws.floats(-1, 4), RuntimeError);
  EXPECT_THROW(ws.release(0), RuntimeError);
  const int s = ws.acquire();
  ws.release(s);
  EXPECT_THROW(ws.release(s), RuntimeError);  // double release
}

}  // namespace
}  // namespace memtrain::core
