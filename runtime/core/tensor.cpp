#include "runtime/core/tensor.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <utility>

#include "kernels/ops/copy.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::core {

namespace {

// One line on stderr for the first block written off (Note [Returning a block never throws out of
// a destructor]); later ones are not reported: the first says what went wrong.
void report_lost_block(std::size_t bytes, const char* why) noexcept {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  std::fprintf(stderr, "memtrain: warning: a tensor's %zu bytes could not be returned to the allocator (%s)\n", bytes,
               why);
}

}  // namespace

// Owns one allocator block (returning it is the only thing the destructor does), or is a view
// of a byte range of another storage, which it keeps alive (`parent`). An unbound storage has
// neither until Tensor::bind.
struct Tensor::Storage {
  std::shared_ptr<memory::Allocator> allocator;
  memory::Block block;
  bool dry_run = false;
  std::shared_ptr<Storage> parent;  // set for a view
  std::size_t byte_offset = 0;      // of the view in parent's block
  bool bound = true;
  // The device the block lives on, and how its bytes are reached (Note [A tensor's bytes are
  // touched by its device]); a view's is its parent's.
  kernels::OpContext kc;

  Storage() : bound(false) {}
  Storage(std::shared_ptr<memory::Allocator> a, memory::Block b, bool dry, const kernels::OpContext& k)
      : allocator(std::move(a)), block(b), dry_run(dry), kc(k) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  // Note [Returning a block never throws out of a destructor]
  // The caching allocator's deallocate can throw: its bookkeeping allocates (free-list nodes,
  // trace events), so with the host out of memory it throws std::bad_alloc, and a CUDA error
  // surfaces from an unmap. A destructor that lets it out ends the process in std::terminate,
  // and that happened exactly when a run was unwinding from an out-of-memory error, before it
  // could report one (a tester's `ulimit -v` run: exit 134 instead of 1). So the block is
  // written off instead: it stays counted as allocated, this run's error (which is why it is
  // unwinding) is the one reported, and a single line says a block was lost.
  ~Storage() {
    if (!allocator) return;
    try {
      allocator->deallocate(block);
    } catch (const std::exception& e) {
      report_lost_block(block.size, e.what());
    } catch (...) {
      report_lost_block(block.size, "an unknown exception");
    }
  }
  void* ptr() const { return parent ? static_cast<char*>(parent->ptr()) + byte_offset : block.ptr; }
};

std::string Tensor::shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::shaped(std::vector<std::int64_t> shape, DType dtype, const char* who) {
  std::int64_t numel = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw RuntimeError(std::string(who) + ": negative dimension in shape " + shape_string(shape));
    }
    numel *= d;
  }
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.numel_ = numel;
  return t;
}

Tensor Tensor::empty(Context& ctx, std::vector<std::int64_t> shape, DType dtype, memory::TagId tag) {
  Tensor t = shaped(std::move(shape), dtype, "Tensor::empty");
  memory::Block block = ctx.allocator().allocate(t.nbytes(), ctx.stream(), tag);
  try {
    t.storage_ = std::make_shared<Storage>(ctx.allocator_ptr(), block, ctx.dry_run(), ctx.op_context());
  } catch (...) {
    ctx.allocator().deallocate(block);
    throw;
  }
  return t;
}

Tensor Tensor::unbound(std::vector<std::int64_t> shape, DType dtype) {
  Tensor t = shaped(std::move(shape), dtype, "Tensor::unbound");
  t.storage_ = std::make_shared<Storage>();
  return t;
}

void Tensor::bind(const Tensor& buffer, std::int64_t element_offset) {
  if (!storage_ || storage_->bound) {
    throw RuntimeError("Tensor::bind: " + describe() + " is not an unbound tensor");
  }
  if (!buffer.bound() || buffer.dtype_ != dtype_) {
    throw RuntimeError("Tensor::bind: buffer " + buffer.describe() + " is unbound or not of " + dtype_name(dtype_));
  }
  if (element_offset < 0 || element_offset + numel_ > buffer.numel_) {
    throw RuntimeError("Tensor::bind: elements [" + std::to_string(element_offset) + ", " +
                       std::to_string(element_offset + numel_) + ") do not fit in buffer " + buffer.describe());
  }
  Storage& s = *storage_;
  s.parent = buffer.storage_;
  // A view of a view points at the owner, so that ptr() is one hop.
  std::size_t offset = static_cast<std::size_t>(element_offset) * dtype_size(dtype_);
  while (s.parent->parent) {
    offset += s.parent->byte_offset;
    s.parent = s.parent->parent;
  }
  s.byte_offset = offset;
  s.dry_run = s.parent->dry_run;
  s.kc = s.parent->kc;
  s.block = s.parent->block;
  s.block.ptr = static_cast<char*>(s.block.ptr) + offset;
  s.block.size = nbytes();
  s.bound = true;
}

bool Tensor::bound() const { return storage_ && storage_->bound; }

Tensor Tensor::zeros(Context& ctx, std::vector<std::int64_t> shape, DType dtype, memory::TagId tag) {
  Tensor t = empty(ctx, std::move(shape), dtype, tag);
  t.zero_();
  return t;
}

std::int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int j = i < 0 ? i + n : i;
  if (j < 0 || j >= n) {
    throw RuntimeError("Tensor::dim(" + std::to_string(i) + ") out of range for tensor " + describe());
  }
  return shape_[static_cast<std::size_t>(j)];
}

memory::Block Tensor::block() const { return storage_ ? storage_->block : memory::Block{}; }

bool Tensor::dry_run() const { return storage_ && storage_->dry_run; }

const void* Tensor::allocation_id() const {
  if (!bound()) return nullptr;
  return storage_->parent ? storage_->parent.get() : storage_.get();
}

kernels::Device Tensor::device() const { return storage_ ? storage_->kc.device : kernels::Device::cpu; }

// Note [A tensor's bytes are touched by its device]
// A tensor remembers the op context of the Context that allocated it, and zeroes and copies its
// bytes through the op API with it: memset and memcpy for host memory, the CUDA stream's
// memset and copies for device memory. Code above runtime/core that fills a tensor from the
// host (parameter initialisation, checkpoints) goes through copy_from_host / copy_to_host and
// so never dereferences a device pointer; data<T>() still hands out the raw pointer, for the
// op API's calls.
void Tensor::zero_() {
  if (bound() && !storage_->dry_run && nbytes() > 0) kernels::ops::fill_zero(storage_->kc, storage_->ptr(), nbytes());
}

void Tensor::copy_from_host(const void* src) {
  if (!bound()) throw RuntimeError("Tensor::copy_from_host: tensor " + describe() + " is undefined or unbound");
  if (!storage_->dry_run) kernels::ops::copy_to_device(storage_->kc, storage_->ptr(), src, nbytes());
}

void Tensor::copy_to_host(void* dst) const {
  if (!bound()) throw RuntimeError("Tensor::copy_to_host: tensor " + describe() + " is undefined or unbound");
  if (!storage_->dry_run) kernels::ops::copy_to_host(storage_->kc, dst, storage_->ptr(), nbytes());
}

void Tensor::reset() {
  storage_.reset();
  shape_.clear();
  numel_ = 0;
}

std::string Tensor::describe() const {
  if (!defined()) return "(undefined)";
  return shape_string(shape_) + " " + dtype_name(dtype_);
}

void Tensor::check_access(int dtype_code) const {
  if (!storage_) throw RuntimeError("Tensor::data: tensor is undefined");
  if (!storage_->bound) throw RuntimeError("Tensor::data: tensor " + describe() + " is not bound yet");
  const bool ok =
      dtype_code == -1 ? (dtype_ == DType::f16 || dtype_ == DType::bf16) : dtype_code == static_cast<int>(dtype_);
  if (!ok) {
    throw RuntimeError("Tensor::data: element type does not match tensor " + describe());
  }
}

void* Tensor::raw() const { return storage_->ptr(); }

}  // namespace memtrain::core
