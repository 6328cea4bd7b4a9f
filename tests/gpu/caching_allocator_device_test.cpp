// The caching allocator on real device memory (issue 14): every policy over CudaResource
// (cudaMalloc) and CudaVirtualMemoryResource (cuMemCreate / cuMemMap), including vmm_stitch and
// expandable segments, keeps every block's bytes through churn; and a block used on another
// CUDA stream is not handed out again until an event recorded on that stream has completed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/cuda_resource.hpp"
#include "memory/cuda_stream_registry.hpp"
#include "memory/cuda_virtual_memory_resource.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/trace_event.hpp"
#include "tests/gpu/stream_gate.hpp"
#include "tests/memory/allocator_cases.hpp"

namespace memtrain::memory {
namespace {

using testing::MiB;

struct DeviceCase {
  std::string policy;
  bool vmm;  // CudaVirtualMemoryResource, else CudaResource
  bool expandable;
};
std::string device_case_name(const ::testing::TestParamInfo<DeviceCase>& info) {
  const DeviceCase& c = info.param;
  return c.policy + (c.vmm ? "_over_cuda_vmm" : "_over_cuda") + (c.expandable ? "_expandable" : "");
}
std::vector<DeviceCase> every_device_case() {
  std::vector<DeviceCase> out;
  for (const char* policy : {"no_cache", "pytorch", "best_fit", "vmm_stitch"}) {
    for (bool vmm : {false, true}) {
      const std::string p = policy;
      if (p != "vmm_stitch" || vmm) {
        out.push_back({p, vmm, false});
      }
      if (p != "no_cache" && vmm) {
        out.push_back({p, vmm, true});
      }
    }
  }
  return out;
}

std::unique_ptr<CachingAllocator> make_allocator(const DeviceCase& c, std::size_t capacity) {
  std::shared_ptr<MemoryResource> upstream;
  if (c.vmm) {
    upstream = std::make_shared<CudaVirtualMemoryResource>(0);
  } else {
    upstream = std::make_shared<CudaResource>(0);
  }
  AllocatorOptions options;
  options.policy = c.policy;
  options.expandable_segments = c.expandable;
  options.capacity = capacity;
  return std::make_unique<CachingAllocator>(upstream, options);
}

// Block contents written and read through cudaMemcpy.
void fill(const Block& b, std::uint64_t id) {
  std::vector<unsigned char> host(b.size);
  testing::fill_pattern(host.data(), b.size, id);
  ASSERT_EQ(cudaMemcpy(b.ptr, host.data(), b.size, cudaMemcpyHostToDevice), cudaSuccess);
}
long long mismatch(const Block& b, std::uint64_t id) {
  std::vector<unsigned char> host(b.size);
  EXPECT_EQ(cudaMemcpy(host.data(), b.ptr, b.size, cudaMemcpyDeviceToHost), cudaSuccess);
  return testing::first_pattern_mismatch(host.data(), b.size, id);
}

class EveryPolicyOnDevice : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
};

// tests/memory's EveryBlockKeepsItsBytesThroughChurn on real device memory: random sizes, frees,
// empty_cache, and out-of-memory on a 48 MiB budget (which stitches free pages under
// vmm_stitch); every block is checked byte for byte when it is freed.
TEST_P(EveryPolicyOnDevice, EveryBlockKeepsItsBytesThroughChurn) {
  auto allocator = make_allocator(GetParam(), 48 * MiB);
  struct Held {
    Block block;
    std::uint64_t id;
  };
  std::vector<Held> held;
  std::uint64_t next_id = 1;
  std::size_t ooms = 0, stitched = 0;
  std::mt19937_64 rng(11);
  auto release = [&](std::size_t i) {
    const Held x = held[i];
    held[i] = held.back();
    held.pop_back();
    ASSERT_EQ(mismatch(x.block, x.id), -1) << "block " << x.id << " of " << x.block.size << " bytes";
    allocator->deallocate(x.block);
  };
  for (int op = 0; op < 300; ++op) {
    const std::uint64_t r = rng() % 100;
    if (r < 3) {
      allocator->empty_cache();
    } else if (!held.empty() && r < 45) {
      release(rng() % held.size());
    } else {
      const std::size_t bytes = rng() % 3 == 0 ? 1 + rng() % MiB : (1 + rng() % 4) * MiB + rng() % MiB;
      try {
        const Block b = allocator->allocate(bytes);
        ASSERT_NE(b.ptr, nullptr);
        fill(b, next_id);
        held.push_back({b, next_id++});
        for (const SegmentSnapshot& seg : allocator->snapshot()) {
          stitched += seg.is_stitched && seg.address == reinterpret_cast<std::uintptr_t>(b.ptr);
        }
      } catch (const OutOfMemory&) {
        ++ooms;
        if (!held.empty()) release(rng() % held.size());
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  while (!held.empty()) {
    release(held.size() - 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
  allocator->empty_cache();
  EXPECT_EQ(allocator->stats().reserved_bytes.current, 0);
  EXPECT_GT(ooms, 0u) << "the 48 MiB budget never filled up";
  if (GetParam().policy == "vmm_stitch") {
    EXPECT_GT(stitched, 0u) << "nothing was stitched";
  }
}

// Note [Cross-stream reuse on real streams]: a block freed after record_stream(side) must not
// be handed out while `side` is still busy (the gate holds it for certain, not for as long as a
// sleep happens to last), and must be reused once the side stream's event has completed.
TEST_P(EveryPolicyOnDevice, ABlockUsedOnAnotherStreamWaitsForThatStream) {
  if (GetParam().policy == "no_cache") GTEST_SKIP() << "no_cache keeps no blocks to reuse";
  auto allocator = make_allocator(GetParam(), 256 * MiB);
  CudaStreamRegistry streams;
  allocator->set_stream_registry(&streams);
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  const StreamId side_id = streams.add(side);
  {
    gpu_testing::StreamGate gate;
    const Block x = allocator->allocate(3 * MiB);
    gate.close_on(side);
    // The side stream reads x (queued behind the gate).
    ASSERT_EQ(cudaMemsetAsync(x.ptr, 7, x.size, side), cudaSuccess);
    allocator->record_stream(x, side_id);
    allocator->deallocate(x);
    EXPECT_EQ(streams.outstanding_events(), 1u);
    const Block y = allocator->allocate(3 * MiB);
    EXPECT_NE(y.ptr, x.ptr) << "reused while the side stream still uses it";
    gate.open();
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    const Block z = allocator->allocate(3 * MiB);
    EXPECT_EQ(z.ptr, x.ptr) << "not reused after the side stream finished";
    EXPECT_EQ(streams.outstanding_events(), 0u);
    allocator->deallocate(y);
    allocator->deallocate(z);
  }
  allocator->empty_cache();
  cudaStreamDestroy(side);
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryPolicyOnDevice, ::testing::ValuesIn(every_device_case()), device_case_name);

}  // namespace
}  // namespace memtrain::memory
