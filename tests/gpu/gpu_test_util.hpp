#pragma once
// Shared helpers of the GPU tests (tests/gpu): a fixture that skips with the reason where no
// CUDA device exists, device buffers that are poisoned before each launch (so an element a
// kernel failed to write reads NaN and fails the comparison), 16-bit host conversions and the
// error measure of issue 14.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/half_convert.hpp"
#include "kernels/cuda/cublaslt_handle.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_context.hpp"
#include "memory/cuda_resource.hpp"

namespace memtrain::gpu_testing {

// Device memory of n elements of T (cudaMalloc: the tests may allocate; kernels may not).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    MEMTRAIN_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)));
    ptr_ = static_cast<T*>(p);
  }
  template <class U>
  explicit DeviceBuffer(const std::vector<U>& host) : DeviceBuffer(host.size()) {
    upload(host);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() { return ptr_; }
  const T* get() const { return ptr_; }
  std::size_t size() const { return n_; }

  template <class U>
  void upload(const std::vector<U>& host) {
    static_assert(sizeof(U) == sizeof(T));
    MEMTRAIN_CUDA_CHECK(
        cudaMemcpy(ptr_, static_cast<const void*>(host.data()), n_ * sizeof(T), cudaMemcpyHostToDevice));
    // Note [Uploads finish before the kernels' stream reads them]: a cudaMemcpy from pageable
    // memory may return before its DMA lands, and the kernels run on a non-blocking stream that
    // does not wait for the legacy default stream (the first GPU run read stale tails).
    MEMTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // All bits set: NaN in fp32, bf16 and fp16 alike.
  void poison() {
    MEMTRAIN_CUDA_CHECK(cudaMemset(ptr_, 0xff, n_ * sizeof(T)));
    MEMTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    MEMTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    MEMTRAIN_CUDA_CHECK(cudaMemcpy(static_cast<void*>(host.data()), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  std::size_t n_;
};

// The storage types and their host representation.
template <class T>
float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    std::uint16_t bits;
    std::memcpy(&bits, static_cast<const void*>(&x), 2);
    return kernels::bf16_to_float(bits);
  } else {
    std::uint16_t bits;
    std::memcpy(&bits, static_cast<const void*>(&x), 2);
    return kernels::f16_to_float(bits);
  }
}
template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    const std::uint16_t bits = std::is_same_v<T, __nv_bfloat16> ? kernels::float_to_bf16(x) : kernels::float_to_f16(x);
    T out;
    std::memcpy(static_cast<void*>(&out), &bits, 2);
    return out;
  }
}
template <class T>
std::vector<T> to_storage(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = from_float<T>(v[i]);
  return out;
}
template <class T>
std::vector<float> to_floats(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_float(v[i]);
  return out;
}
inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// v rounded to T and back: the values a 16-bit kernel actually sees, for its fp32 CPU twin.
template <class T>
std::vector<float> rounded(const std::vector<float>& v) {
  return to_floats(to_storage<T>(v));
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "fp32";
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
  return "fp16";
}

// Issue 14's bounds: fp32 1e-5, TF32 1e-3, bf16 1e-2. fp16 keeps 3 more mantissa bits than bf16.
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1e-2;
  return 2e-3;
}

// max_i |gpu_i - ref_i| / max_i |ref_i| (the error relative to the reference's scale, as
// tests/kernels/test_util.hpp's max_relative_error); a NaN or inf anywhere in gpu fails.
// The references are the CPU twins run in double precision (every CPU kernel is instantiated
// for double): a float CPU run rounds differently on every instruction set (its partial sums
// follow the vector width), and the bound is about the GPU's error, not the difference of two
// float roundings.
template <class Ref>
::testing::AssertionResult close(const std::vector<float>& gpu, const std::vector<Ref>& ref, double tol) {
  if (gpu.size() != ref.size()) return ::testing::AssertionFailure() << "sizes differ";
  double diff = 0, scale = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    if (!std::isfinite(gpu[i])) {
      return ::testing::AssertionFailure()
             << "element " << i << " is " << gpu[i] << " (reference " << ref[i] << "): unwritten or overflowed";
    }
    const double d = std::abs(static_cast<double>(gpu[i]) - ref[i]);
    if (d > diff) {
      diff = d;
      worst = i;
    }
    scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
  }
  const double err = scale > 0 ? diff / scale : diff;
  if (err < tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << err << " >= " << tol << " (worst element " << worst
                                       << ": " << gpu[worst] << " vs " << ref[worst] << ")";
}

// A stream, a cuBLASLt handle and fixed workspaces; skips the test where no device exists.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (memory::cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device: " << memory::cuda_unavailable_reason();
    }
    MEMTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    handle_ = std::make_unique<kernels::gpu::CublasLtHandle>();
    MEMTRAIN_CUDA_CHECK(cudaMalloc(&blas_workspace_, kernels::gpu::kBlasWorkspaceBytes));
    MEMTRAIN_CUDA_CHECK(cudaMalloc(&scratch_, kScratchBytes));
    ctx.stream = stream_;
    ctx.blas = handle_->get();
    ctx.blas_workspace = blas_workspace_;
    ctx.blas_workspace_bytes = kernels::gpu::kBlasWorkspaceBytes;
    ctx.scratch = scratch_;
    ctx.scratch_bytes = kScratchBytes;
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      cudaStreamDestroy(stream_);
    }
    handle_.reset();
    cudaFree(blas_workspace_);
    cudaFree(scratch_);
  }
  void sync() { MEMTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  static constexpr std::size_t kScratchBytes = std::size_t{16} << 20;
  kernels::gpu::KernelContext ctx;

 private:
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kernels::gpu::CublasLtHandle> handle_;
  void* blas_workspace_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace memtrain::gpu_testing
