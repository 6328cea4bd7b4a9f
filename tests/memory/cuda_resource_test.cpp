// CUDA resources: on a machine without a driver they must refuse to start with a clear error;
// where a GPU exists they allocate, map and hold real memory. Built only when nvcc was found.
#include "memory/cuda_resource.hpp"
#include "memory/cuda_virtual_memory_resource.hpp"

#include <gtest/gtest.h>

#if MEMTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "memory/out_of_memory.hpp"
#include "tests/memory/fault_injecting_vmm.hpp"

namespace memtrain::memory {
namespace {

// The message CudaError must carry when there is no usable device.
void expect_clear_unavailable_error(const std::string& what, const std::string& resource) {
  EXPECT_NE(what.find(resource + " is not available"), std::string::npos) << what;
  EXPECT_NE(what.find("cudaGetDeviceCount"), std::string::npos) << what;
}

TEST(CudaResourceWithoutDriver, ConstructionThrowsCudaErrorNamingTheCause) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(cuda_unavailable_reason().empty());
  try {
    CudaResource mr(0);
    FAIL() << "constructed without a device";
  } catch (const CudaError& e) {
    expect_clear_unavailable_error(e.what(), "cuda:0");
  }
  try {
    CudaVirtualMemoryResource vmm(0);
    FAIL() << "constructed without a device";
  } catch (const CudaError& e) {
    expect_clear_unavailable_error(e.what(), "cuda-vmm:0");
  }
}

TEST(CudaResource, ADeviceThatDoesNotExistIsRefused) {
  EXPECT_THROW(CudaResource(cuda_device_count() + 3), CudaError);
  EXPECT_THROW(CudaResource(-1), CudaError);
  EXPECT_THROW(CudaVirtualMemoryResource(cuda_device_count() + 3), CudaError);
}

class WithCudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
};

// Round trip through device memory: host pattern -> device -> host.
std::vector<unsigned char> round_trip(void* device_ptr, std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> in(bytes), out(bytes, 0);
  for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>(i * seed + 1);
  EXPECT_EQ(cudaMemcpy(device_ptr, in.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.data(), device_ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(in, out);
  return in;
}

TEST_F(WithCudaDevice, CudaMallocHoldsDataAndReportsOutOfMemory) {
  CudaResource mr(0);
  EXPECT_GT(mr.capacity_bytes(), 0u);
  void* p = mr.allocate(1 << 20, 256);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  round_trip(p, 1 << 20, 13);
  mr.deallocate(p, 1 << 20, 256);
  EXPECT_THROW(mr.allocate(mr.capacity_bytes() * 2, 256), memtrain::OutOfMemory);
  void* q = mr.allocate(4096, 256);  // still usable after the failure
  mr.deallocate(q, 4096, 256);
}

TEST_F(WithCudaDevice, VmmChunkKeepsItsBytesWhenMappedElsewhere) {
  CudaVirtualMemoryResource vmm(0);
  const std::size_t g = vmm.granularity();
  EXPECT_EQ(g % (2u << 20), 0u);
  const VirtualRange a = vmm.reserve(g), b = vmm.reserve(2 * g);
  const PhysicalHandle chunk = vmm.create_physical(g);
  vmm.map(a.address, g, chunk, 0);
  const auto written = round_trip(reinterpret_cast<void*>(a.address), g, 29);
  vmm.unmap(a.address, g);
  vmm.map(b.address + g, g, chunk, 0);
  std::vector<unsigned char> read(g);
  ASSERT_EQ(cudaMemcpy(read.data(), reinterpret_cast<void*>(b.address + g), g, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(read, written);
  EXPECT_THROW(vmm.release_physical(chunk), VirtualMemoryError);
  EXPECT_THROW(vmm.release(b), VirtualMemoryError);
  vmm.unmap(b.address + g, g);
  vmm.release_physical(chunk);
  vmm.release(a);
  vmm.release(b);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
}

TEST_F(WithCudaDevice, VmmCapacityAndFaultCleanup) {
  CudaVirtualMemoryResource capped(0, 2 * (2u << 20));
  const std::size_t g = capped.granularity();
  if (g != (2u << 20)) GTEST_SKIP() << "granularity " << g;
  const PhysicalHandle x = capped.create_physical(g);
  capped.create_physical(g);
  EXPECT_THROW(capped.create_physical(g), memtrain::OutOfMemory);
  capped.release_physical(x);

  // Issue 3, case 5 on real CUDA VMM.
  CudaVirtualMemoryResource real(0);
  testing::FaultInjectingVmm vmm(real, 3);
  const VirtualRange range = vmm.reserve(5 * g);
  PhysicalHandle pages[5];
  EXPECT_THROW(map_fresh_pages(vmm, range, pages), VirtualMemoryError);
  std::vector<std::uintptr_t> unmapped = vmm.unmapped;
  std::sort(unmapped.begin(), unmapped.end());
  EXPECT_EQ(unmapped, (std::vector<std::uintptr_t>{range.address, range.address + g}));
  EXPECT_EQ(std::multiset<PhysicalHandle>(vmm.released.begin(), vmm.released.end()),
            std::multiset<PhysicalHandle>(vmm.created.begin(), vmm.created.end()));
  EXPECT_EQ(real.physical_bytes(), 0u);
  vmm.release(range);
}

TEST_F(WithCudaDevice, VmmPlainAllocationIsUsableDeviceMemory) {
  CudaVirtualMemoryResource vmm(0);
  void* p = vmm.allocate(3 << 20, 256);
  round_trip(p, 3 << 20, 7);
  EXPECT_EQ(vmm.physical_bytes(), 2 * vmm.granularity());
  vmm.deallocate(p, 3 << 20, 256);
  EXPECT_EQ(vmm.physical_bytes(), 0u);
}

}  // namespace
}  // namespace memtrain::memory
#endif  // MEMTRAIN_HAVE_CUDA
