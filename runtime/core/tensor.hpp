#pragma once
// A dense, row-major tensor whose storage comes from a Context's allocator (design.md,
// "runtime/core owns Tensor"). A Tensor is a cheap handle: copies share the storage, and the
// block returns to the allocator when the last handle drops (RAII), so the allocator's stats
// show exactly which tensors are alive.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/op_context.hpp"
#include "memory/allocator.hpp"
#include "memory/types.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/dtype.hpp"

namespace memtrain::core {

class Tensor {
 public:
  // An undefined tensor (no storage); defined() is false.
  Tensor() = default;

  // Uninitialised storage of numel * dtype_size bytes from ctx's allocator, on ctx's current
  // stream, accounted under `tag`. Throws memtrain::RuntimeError for a negative dimension and
  // memtrain::OutOfMemory (from the allocator) when the device is full.
  static Tensor empty(Context& ctx, std::vector<std::int64_t> shape, DType dtype, memory::TagId tag);
  // As empty(), filled with zero bytes (skipped in a dry run: the memory may not exist).
  static Tensor zeros(Context& ctx, std::vector<std::int64_t> shape, DType dtype, memory::TagId tag);
  // A tensor of `shape` and `dtype` without memory yet: bind() later gives it (and every copy
  // of the handle made before) a range of another tensor's storage. defined() is true, bound()
  // false, and data() throws memtrain::RuntimeError until then. Parameters' gradients start so:
  // layers copy the handles at construction, and the model packs the gradients into flat
  // buckets once every parameter is known (Note [Gradients live in buckets], models/).
  static Tensor unbound(std::vector<std::int64_t> shape, DType dtype);
  // Makes this unbound tensor a view of elements [element_offset, element_offset + numel()) of
  // `buffer` (same dtype, bound, a plain tensor or a view itself). The view keeps the buffer's
  // storage alive; dry_run() and block() are the buffer's (block() narrowed to the view).
  // Throws memtrain::RuntimeError when this tensor is already bound, the dtypes differ, or the
  // range does not fit in the buffer.
  void bind(const Tensor& buffer, std::int64_t element_offset);
  // False only for an unbound() tensor that bind() has not reached yet.
  bool bound() const;

  bool defined() const { return storage_ != nullptr; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // Size of dimension i; negative i counts from the end (dim(-1) is the last).
  // Throws memtrain::RuntimeError when i is out of range.
  std::int64_t dim(int i) const;
  int ndim() const { return static_cast<int>(shape_.size()); }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  // The allocator block behind this tensor (for record_stream and tracing); null if undefined.
  memory::Block block() const;
  // True when the storage belongs to a dry-run context (its bytes must not be touched).
  bool dry_run() const;
  // The identity of the allocation behind this tensor: equal for views of one buffer (and the
  // buffer itself), different for separate allocations; null when undefined or unbound. For
  // grouping only, never dereferenced.
  const void* allocation_id() const;

  // Typed pointer to the first element. T must match dtype (float for f32, std::int32_t for
  // i32, std::uint16_t for f16/bf16): throws memtrain::RuntimeError otherwise or when undefined.
  template <class T>
  T* data() {
    check_access(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data() const {
    check_access(dtype_of<T>());
    return static_cast<const T*>(raw());
  }

  // The device of the Context that allocated the storage (a view's: its buffer's); cpu when
  // undefined or unbound.
  kernels::Device device() const;

  // Sets every byte to zero on the tensor's device (no-op in a dry run).
  void zero_();
  // nbytes() bytes of host memory at src copied into the tensor, on its device (Note [A
  // tensor's bytes are touched by its device]); a no-op in a dry run. Throws
  // memtrain::RuntimeError when the tensor is undefined or unbound, memory::CudaError when a
  // CUDA copy fails.
  void copy_from_host(const void* src);
  // The tensor's nbytes() bytes into host memory at dst, complete on return (a no-op in a dry
  // run). Throws as copy_from_host.
  void copy_to_host(void* dst) const;
  // Drops this handle's reference; the storage is freed if it was the last one.
  void reset();

  // "[2, 8, 32] F32", for messages.
  std::string describe() const;

 private:
  struct Storage;

  template <class T>
  static constexpr int dtype_of() {
    if constexpr (std::is_same_v<std::remove_cv_t<T>, float>) {
      return static_cast<int>(DType::f32);
    } else if constexpr (std::is_same_v<std::remove_cv_t<T>, std::int32_t>) {
      return static_cast<int>(DType::i32);
    } else if constexpr (std::is_same_v<std::remove_cv_t<T>, std::uint16_t>) {
      return -1;  // f16 or bf16
    } else {
      static_assert(sizeof(T) == 0, "Tensor::data<T>: T must be float, int32_t or uint16_t");
      return -2;
    }
  }
  void check_access(int dtype_code) const;
  void* raw() const;
  static std::string shape_string(const std::vector<std::int64_t>& shape);
  // A tensor of `shape` without storage; throws memtrain::RuntimeError naming `who` for a
  // negative dimension.
  static Tensor shaped(std::vector<std::int64_t> shape, DType dtype, const char* who);

  std::shared_ptr<Storage> storage_;
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::f32;
  std::int64_t numel_ = 0;
};

}  // namespace memtrain::core
