// device_target_for_gpu: a real GPU's name and memory (as cudaGetDeviceProperties and
// cudaMemGetInfo give them; the names below are those NVIDIA's boards report) pick the plan
// target whose estimate of the memory outside the allocator a GPU run prints beside what it
// measures. The family comes from the name; among a family's boards, the nearest capacity.
#include <gtest/gtest.h>

#include <cstddef>

#include "runtime/config/device_target.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

TEST(DeviceTargetForGpu, NamesAndCapacitiesPickTheBoard) {
  EXPECT_EQ(device_target_for_gpu("NVIDIA H200", 140 * kGiB)->name, "h200-141gb");
  EXPECT_EQ(device_target_for_gpu("NVIDIA H100 80GB HBM3", 79 * kGiB)->name, "h100-80gb");
  EXPECT_EQ(device_target_for_gpu("NVIDIA A100-SXM4-40GB", 39 * kGiB)->name, "a100-40gb");
  EXPECT_EQ(device_target_for_gpu("NVIDIA A100 80GB PCIe", 79 * kGiB)->name, "a100-80gb");
  // The estimate is the target's: context plus cuBLAS workspace, no NCCL for one rank.
  const auto h200 = device_target_for_gpu("NVIDIA H200", 140 * kGiB);
  EXPECT_EQ(h200->non_allocator.total(), parse_device_target("h200-141gb").non_allocator.total());
  EXPECT_EQ(h200->non_allocator.nccl_buffers, 0u);
}

TEST(DeviceTargetForGpu, AGpuOfNoKnownFamilyHasNone) {
  EXPECT_FALSE(device_target_for_gpu("Tesla T4", 15 * kGiB).has_value());
  EXPECT_FALSE(device_target_for_gpu("", 0).has_value());
}

}  // namespace
}  // namespace memtrain::train
