// training_non_allocator_bytes: what a training process holds on a GPU outside its allocator,
// which a job admitted by plan adds to its need (Note [What a GPU job needs outside the
// allocator]). The expected figures are the data-sheet estimates of Note [Target capacities and
// what is not the allocator's], written out here in MiB, not read back from the table.
#include <gtest/gtest.h>

#include <cstddef>

#include "runtime/config/device_target.hpp"

namespace memtrain::train {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

TEST(TrainingNonAllocatorBytes, OneRankHoldsTheContextAndMemtrainsOwnWorkspaces) {
  // memtrain's workspaces (cuBLASLt + scratch + staging) replace the board's cuBLAS estimate.
  const std::size_t workspaces = 32 * kMiB + 9 * kMiB + 96 * 1024;
  const NonAllocatorBytes h100 = training_non_allocator_bytes("NVIDIA H100 80GB HBM3", 79 * kGiB, 1, workspaces);
  EXPECT_EQ(h100.total(), 640 * kMiB + workspaces);
  EXPECT_EQ(h100.nccl_buffers, 0u);
  const NonAllocatorBytes a100 = training_non_allocator_bytes("NVIDIA A100-SXM4-40GB", 39 * kGiB, 1, workspaces);
  EXPECT_EQ(a100.total(), 512 * kMiB + workspaces);
}

TEST(TrainingNonAllocatorBytes, SeveralRanksAddNcclsBuffers) {
  const NonAllocatorBytes h200 = training_non_allocator_bytes("NVIDIA H200", 140 * kGiB, 2, 40 * kMiB);
  EXPECT_EQ(h200.total(), 640 * kMiB + 40 * kMiB + 256 * kMiB);
  const NonAllocatorBytes a100 = training_non_allocator_bytes("NVIDIA A100 80GB PCIe", 79 * kGiB, 4, 40 * kMiB);
  EXPECT_EQ(a100.total(), 512 * kMiB + 40 * kMiB + 128 * kMiB);
}

TEST(TrainingNonAllocatorBytes, AGpuOfNoKnownFamilyIsChargedTheLargestEstimate) {
  // An unknown board is never under-reserved: the largest context (H100/H200) and, with several
  // ranks, the largest NCCL figure.
  EXPECT_EQ(training_non_allocator_bytes("Tesla T4", 15 * kGiB, 1, 8 * kMiB).total(), 640 * kMiB + 8 * kMiB);
  EXPECT_EQ(training_non_allocator_bytes("Tesla T4", 15 * kGiB, 2, 8 * kMiB).total(),
            640 * kMiB + 8 * kMiB + 256 * kMiB);
}

}  // namespace
}  // namespace memtrain::train
