// DevicePool placement (Note [Placement: priority, then free memory]) on simulated devices,
// checked against a model of the rule kept by the test, and per-device stats against what the
// test placed.
#include "memory/device_pool.hpp"

#include <gtest/gtest.h>

#include <random>

#include "memory/caching_allocator.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/simulated_resource.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

std::shared_ptr<CachingAllocator> simulated(std::size_t capacity, const std::string& policy = "best_fit") {
  AllocatorOptions opt;
  opt.policy = policy;
  return std::make_shared<CachingAllocator>(std::make_shared<SimulatedResource>(capacity, "sim"), opt);
}

TEST(DevicePool, HigherPriorityDeviceIsFilledFirst) {
  DevicePool pool;
  pool.add_device({"big-slow", 0, 1 * GiB}, simulated(1 * GiB));
  pool.add_device({"small-fast", 1, 512 * MiB}, simulated(512 * MiB));
  std::vector<PooledBlock> blocks;
  for (int i = 0; i < 5; ++i) {
    blocks.push_back(pool.allocate(100 * MiB));
    EXPECT_EQ(blocks.back().device, 1u) << "request " << i;
  }
  // 512 - 500 = 12 MiB left on the fast device: the next 100 MiB goes to the slow one.
  blocks.push_back(pool.allocate(100 * MiB));
  EXPECT_EQ(blocks.back().device, 0u);
  // Small requests still fit on the fast device.
  blocks.push_back(pool.allocate(4 * MiB));
  EXPECT_EQ(blocks.back().device, 1u);
  for (const auto& b : blocks) pool.deallocate(b);
}

// Equal priorities: each request goes where the most memory is free. The test keeps its own
// free-bytes model (capacity minus what it placed) and predicts every placement from it.
TEST(DevicePool, EqualPriorityGoesToTheDeviceWithMostFreeMemory) {
  const std::size_t caps[] = {1 * GiB, 2 * GiB, 1536 * MiB};
  DevicePool pool;
  // (string(1, ...) rather than "d" + to_string: GCC 12 reports a false -Wrestrict for the latter.)
  for (int i = 0; i < 3; ++i)
    pool.add_device({std::string(1, 'd') + std::to_string(i), 0, caps[i]}, simulated(caps[i]));
  std::size_t model_free[3] = {caps[0], caps[1], caps[2]};
  std::mt19937 rng(5);
  std::vector<PooledBlock> held;
  for (int i = 0; i < 40; ++i) {
    std::size_t bytes = (1 + rng() % 64) * 2 * MiB;  // multiples of 2 MiB: no rounding
    std::size_t expect = 0;
    for (std::size_t d = 1; d < 3; ++d)
      if (model_free[d] > model_free[expect]) expect = d;
    if (model_free[expect] < bytes) break;
    PooledBlock b = pool.allocate(bytes);
    ASSERT_EQ(b.device, expect) << "request " << i << " of " << bytes << " bytes";
    model_free[expect] -= bytes;
    held.push_back(b);
  }
  auto stats = pool.stats();
  for (std::size_t d = 0; d < 3; ++d) {
    EXPECT_EQ(stats[d].free_bytes, model_free[d]);
    EXPECT_EQ(static_cast<std::size_t>(stats[d].stats.allocated_bytes.current), caps[d] - model_free[d]);
  }
  for (const auto& b : held) pool.deallocate(b);
  for (const auto& s : pool.stats()) EXPECT_EQ(s.stats.allocated_bytes.current, 0);
}

// Issue 3, case 1: 400 MiB free in 20 MiB holes cannot serve 300 MiB under best_fit. The
// preferred device has enough free bytes on paper; its OutOfMemory passes the request on.
TEST(DevicePool, FragmentedDevicePassesTheRequestOn) {
  DevicePool pool;
  auto fragmented = simulated(1 * GiB);
  pool.add_device({"fragmented", 1, 1 * GiB}, fragmented);
  pool.add_device({"spare", 0, 1 * GiB}, simulated(1 * GiB));
  fragmented->deallocate(fragmented->allocate(800 * MiB));
  std::vector<Block> holes;
  for (int i = 0; i < 40; ++i) holes.push_back(fragmented->allocate(20 * MiB));
  for (int i = 0; i < 40; i += 2) fragmented->deallocate(holes[i]);
  ASSERT_GE(pool.stats()[0].free_bytes, 300 * MiB);
  PooledBlock b = pool.allocate(300 * MiB);
  EXPECT_EQ(b.device, 1u);
  pool.deallocate(b);
  for (int i = 1; i < 40; i += 2) fragmented->deallocate(holes[i]);
}

TEST(DevicePool, WhenEveryDeviceIsFullTheErrorNamesEachDevice) {
  DevicePool pool;
  pool.add_device({"gpu-a", 0, 256 * MiB}, simulated(256 * MiB));
  pool.add_device({"gpu-b", 0, 128 * MiB}, simulated(128 * MiB));
  try {
    pool.allocate(300 * MiB);
    FAIL() << "300 MiB fits on neither device";
  } catch (const OutOfMemory& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("gpu-a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gpu-b"), std::string::npos) << msg;
    EXPECT_EQ(e.requested_bytes(), 300 * MiB);
  }
}

TEST(DevicePool, BadDevicesAndBlocksAreRejected) {
  DevicePool pool;
  EXPECT_THROW(pool.allocate(1), std::logic_error);
  EXPECT_THROW(pool.add_device({"x", 0, 0}, simulated(GiB)), std::invalid_argument);
  EXPECT_THROW(pool.add_device({"x", 0, GiB}, nullptr), std::invalid_argument);
  pool.add_device({"x", 0, GiB}, simulated(GiB));
  EXPECT_THROW(pool.add_device({"x", 0, GiB}, simulated(GiB)), std::invalid_argument);
  EXPECT_THROW(pool.deallocate(PooledBlock{7, Block{}}), std::out_of_range);
}

TEST(DevicePool, PlacementOrderIsPriorityThenFreeMemory) {
  DevicePool pool;
  pool.add_device({"a", 0, 1 * GiB}, simulated(1 * GiB));
  pool.add_device({"b", 2, 256 * MiB}, simulated(256 * MiB));
  pool.add_device({"c", 0, 2 * GiB}, simulated(2 * GiB));
  pool.add_device({"d", 2, 512 * MiB}, simulated(512 * MiB));
  EXPECT_EQ(pool.placement_order(), (std::vector<std::size_t>{3, 1, 2, 0}));
}

}  // namespace
}  // namespace memtrain::memory
