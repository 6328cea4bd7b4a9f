#include "memory/cuda_virtual_memory_resource.hpp"

// <cuda.h> and <cudaTypedefs.h> give only the types and PFN_* signatures; the functions come
// from the driver at run time, so libcuda is never linked.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "memory/byte_size.hpp"
#include "memory/cuda_resource.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

struct CudaVirtualMemoryResource::Driver {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 get_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;

  std::string describe(const char* call, CUresult r) const {
    const char* name = nullptr;
    if (get_error_name == nullptr || get_error_name(r, &name) != CUDA_SUCCESS) name = nullptr;
    return std::string(call) + " failed: " + (name ? name : "CUresult " + std::to_string(r));
  }
  void check(const char* call, CUresult r) const {
    if (r != CUDA_SUCCESS) throw CudaError(describe(call, r));
  }
};

namespace {

constexpr std::size_t kDefaultGranularity = std::size_t{2} << 20;  // 2 MiB

// The driver symbol at the ABI version of its PFN type (the _vNNNNN suffix).
template <class Fn>
void load(Fn& fn, const char* symbol, unsigned int version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    throw CudaError(std::string("cudaGetDriverEntryPointByVersion(") + symbol + ", " + std::to_string(version) +
                    "): " + (err != cudaSuccess ? cudaGetErrorName(err) : "symbol not found in the driver"));
  }
  fn = reinterpret_cast<Fn>(p);
}

CUmemAllocationProp pinned_on(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

CudaVirtualMemoryResource::CudaVirtualMemoryResource(int device, std::size_t capacity_bytes)
    : device_(device), driver_(std::make_unique<Driver>()) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    const std::string reason = cuda_unavailable_reason();
    throw CudaError("cuda-vmm:" + std::to_string(device) + " is not available (" +
                    (reason.empty() ? std::to_string(count) + " device(s) present" : reason) +
                    "); use device: cpu or a simulated device for planning");
  }
  // cuMemCreate needs an initialised primary context on the device; the runtime makes one.
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    throw CudaError(std::string("cudaSetDevice: ") + cudaGetErrorName(err));
  }
  if (cudaError_t err = cudaFree(nullptr); err != cudaSuccess) {
    throw CudaError(std::string("cudaFree(nullptr) (context initialisation): ") + cudaGetErrorName(err));
  }
  Driver& d = *driver_;
  load(d.get_error_name, "cuGetErrorName", 6000);
  load(d.device_attribute, "cuDeviceGetAttribute", 2000);
  int vmm_supported = 0;
  d.check("cuDeviceGetAttribute",
          d.device_attribute(&vmm_supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                             static_cast<CUdevice>(device)));
  if (!vmm_supported) {
    throw CudaError("cuda-vmm:" + std::to_string(device) +
                    ": the device or driver does not support virtual memory management");
  }
  load(d.get_granularity, "cuMemGetAllocationGranularity", 10020);
  load(d.address_reserve, "cuMemAddressReserve", 10020);
  load(d.address_free, "cuMemAddressFree", 10020);
  load(d.create, "cuMemCreate", 10020);
  load(d.release, "cuMemRelease", 10020);
  load(d.map, "cuMemMap", 10020);
  load(d.unmap, "cuMemUnmap", 10020);
  load(d.set_access, "cuMemSetAccess", 10020);

  const CUmemAllocationProp prop = pinned_on(device);
  std::size_t minimum = 0;
  d.check("cuMemGetAllocationGranularity", d.get_granularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  // 2 MiB is the minimum on current GPUs; a multiple of the minimum is always valid.
  granularity_ = minimum == 0 ? kDefaultGranularity : (kDefaultGranularity + minimum - 1) / minimum * minimum;
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  capacity_ = capacity_bytes != 0 ? capacity_bytes : total_bytes;
}

// Note [Unmapping waits for the device]
// The caching allocator is stream-ordered: a block goes back to it when the last kernel that
// uses it has been queued, not when that kernel has finished, and a block unstitched on free,
// a segment released by garbage collection, the out-of-memory retry or empty_cache, or an
// expandable segment shrunk, is unmapped right then. cuMemUnmap and cuMemRelease do not wait
// for queued work (PyTorch's expandable segments synchronize their stream before unmapping for
// this reason), and a kernel that later touches the range faults with an illegal address,
// which ends the context. So every unmap first waits for all work on this resource's device:
// all streams, since a block may have been used on several. That costs a device-wide wait per
// unmap: under vmm_stitch, at every free of a stitched block (not measured yet: no GPU has run
// this code). Deferring the unmap until an event recorded at the free has completed would avoid
// the wait; until that is measured to matter, correctness first. cudaFree, the plain
// resource's release, also waits for the device implicitly.
void CudaVirtualMemoryResource::wait_for_device() const {
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    current = device_;
  }
  if (current != device_ && cudaSetDevice(device_) != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(name() + ": cudaSetDevice(" + std::to_string(device_) + ") before cuMemUnmap failed");
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (current != device_) cudaSetDevice(current);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(name() + ": cudaDeviceSynchronize before cuMemUnmap failed: " + cudaGetErrorName(err));
  }
}

CudaVirtualMemoryResource::~CudaVirtualMemoryResource() {
  // Best effort: whatever the owner left behind goes back to the driver, in dependency order,
  // after the work still queued on it (Note [Unmapping waits for the device]).
  if (!mappings_.empty() && cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
  for (const auto& [address, m] : mappings_) driver_->unmap(address, m.bytes);
  for (const auto& [handle, chunk] : chunks_) driver_->release(handle);
  for (const auto& [address, bytes] : reservations_) driver_->address_free(address, bytes);
}

std::size_t CudaVirtualMemoryResource::physical_bytes() const {
  std::lock_guard lock(mutex_);
  return physical_bytes_;
}

void CudaVirtualMemoryResource::check_aligned(std::size_t value, const char* what) const {
  if (value == 0 || value % granularity_ != 0) {
    throw VirtualMemoryError(name() + ": " + what + " " + std::to_string(value) +
                             " is not a positive multiple of the granularity " + std::to_string(granularity_) +
                             " bytes");
  }
}

VirtualRange CudaVirtualMemoryResource::reserve(std::size_t bytes) {
  check_aligned(bytes, "reservation size");
  std::lock_guard lock(mutex_);
  CUdeviceptr ptr = 0;
  driver_->check("cuMemAddressReserve", driver_->address_reserve(&ptr, bytes, granularity_, 0, 0));
  reservations_[static_cast<std::uintptr_t>(ptr)] = bytes;
  return {static_cast<std::uintptr_t>(ptr), bytes};
}

void CudaVirtualMemoryResource::release(const VirtualRange& range) {
  std::lock_guard lock(mutex_);
  const auto it = reservations_.find(range.address);
  if (it == reservations_.end() || it->second != range.bytes) {
    throw VirtualMemoryError(name() + ": release of a range that was not reserved");
  }
  const auto m = mappings_.lower_bound(range.address);
  if (m != mappings_.end() && m->first < range.address + range.bytes) {
    throw VirtualMemoryError(name() + ": release of a reservation that still has mapped pages");
  }
  driver_->check("cuMemAddressFree", driver_->address_free(range.address, range.bytes));
  reservations_.erase(it);
}

PhysicalHandle CudaVirtualMemoryResource::create_physical(std::size_t bytes) {
  check_aligned(bytes, "chunk size");
  std::lock_guard lock(mutex_);
  if (bytes > capacity_ - std::min(capacity_, physical_bytes_)) {
    throw OutOfMemory("out of memory on " + name() + ": tried to create a chunk of " + format_byte_size(bytes) +
                          "; capacity " + format_byte_size(capacity_) + ", " + format_byte_size(physical_bytes_) +
                          " in chunks",
                      bytes);
  }
  const CUmemAllocationProp prop = pinned_on(device_);
  CUmemGenericAllocationHandle handle = 0;
  const CUresult r = driver_->create(&handle, bytes, &prop, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    throw OutOfMemory("out of memory on " + name() + ": cuMemCreate of " + format_byte_size(bytes) + " failed with " +
                          format_byte_size(physical_bytes_) + " in chunks",
                      bytes);
  }
  driver_->check("cuMemCreate", r);
  chunks_[handle] = {bytes, 0};
  physical_bytes_ += bytes;
  return handle;
}

void CudaVirtualMemoryResource::release_physical(PhysicalHandle handle) {
  std::lock_guard lock(mutex_);
  const auto it = chunks_.find(handle);
  if (it == chunks_.end()) throw VirtualMemoryError(name() + ": release of an unknown chunk");
  if (it->second.mappings > 0) throw VirtualMemoryError(name() + ": release of a chunk that is still mapped");
  driver_->check("cuMemRelease", driver_->release(handle));
  physical_bytes_ -= it->second.bytes;
  chunks_.erase(it);
}

void CudaVirtualMemoryResource::map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle,
                                    std::size_t offset) {
  std::lock_guard lock(mutex_);
  const auto chunk = chunks_.find(handle);
  if (chunk == chunks_.end()) throw VirtualMemoryError(name() + ": map of an unknown chunk");
  if (offset != 0 || bytes != chunk->second.bytes) {
    throw VirtualMemoryError(name() + ": CUDA maps whole chunks only (offset 0, " +
                             std::to_string(chunk->second.bytes) + " bytes)");
  }
  auto r = reservations_.upper_bound(address);
  if (r == reservations_.begin() || (--r, address + bytes > r->first + r->second)) {
    throw VirtualMemoryError(name() + ": map outside every reserved range");
  }
  auto next = mappings_.lower_bound(address);
  const bool overlaps_next = next != mappings_.end() && next->first < address + bytes;
  const bool overlaps_prev =
      next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > address;
  if (overlaps_next || overlaps_prev) throw VirtualMemoryError(name() + ": map over a mapped page");

  driver_->check("cuMemMap", driver_->map(address, bytes, 0, handle, 0));
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (const CUresult a = driver_->set_access(address, bytes, &access, 1); a != CUDA_SUCCESS) {
    driver_->unmap(address, bytes);
    driver_->check("cuMemSetAccess", a);
  }
  ++chunk->second.mappings;
  mappings_[address] = {bytes, handle};
}

void CudaVirtualMemoryResource::unmap(std::uintptr_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  // The range must be a run of whole mappings; check all before unmapping any.
  std::uintptr_t cursor = address;
  auto it = mappings_.find(address);
  auto first = it;
  while (cursor < address + bytes) {
    if (it == mappings_.end() || it->first != cursor) {
      throw VirtualMemoryError(name() + ": unmap of a range that is not a run of mapped chunks");
    }
    cursor += it->second.bytes;
    ++it;
  }
  if (cursor != address + bytes) {
    throw VirtualMemoryError(name() + ": unmap ends inside a mapped chunk");
  }
  wait_for_device();
  for (auto m = first; m != it;) {
    driver_->check("cuMemUnmap", driver_->unmap(m->first, m->second.bytes));
    --chunks_[m->second.handle].mappings;
    m = mappings_.erase(m);
  }
}

}  // namespace memtrain::memory
