#include "runtime/core/tensor.hpp"

#include <cstring>
#include <utility>

#include "runtime/core/errors.hpp"

namespace memtrain::core {

// Owns one allocator block; returning it is the only thing the destructor does.
struct Tensor::Storage {
  std::shared_ptr<memory::Allocator> allocator;
  memory::Block block;
  bool dry_run = false;

  Storage(std::shared_ptr<memory::Allocator> a, memory::Block b, bool dry)
      : allocator(std::move(a)), block(b), dry_run(dry) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() { allocator->deallocate(block); }
};

namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace

Tensor Tensor::empty(Context& ctx, std::vector<std::int64_t> shape, DType dtype,
                     memory::TagId tag) {
  std::int64_t numel = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw RuntimeError("Tensor::empty: negative dimension in shape " + shape_string(shape));
    }
    numel *= d;
  }
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.numel_ = numel;
  memory::Block block = ctx.allocator().allocate(t.nbytes(), ctx.stream(), tag);
  try {
    t.storage_ = std::make_shared<Storage>(ctx.allocator_ptr(), block, ctx.dry_run());
  } catch (...) {
    ctx.allocator().deallocate(block);
    throw;
  }
  return t;
}

Tensor Tensor::zeros(Context& ctx, std::vector<std::int64_t> shape, DType dtype,
                     memory::TagId tag) {
  Tensor t = empty(ctx, std::move(shape), dtype, tag);
  t.zero_();
  return t;
}

std::int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int j = i < 0 ? i + n : i;
  if (j < 0 || j >= n) {
    throw RuntimeError("Tensor::dim(" + std::to_string(i) + ") out of range for tensor " +
                       describe());
  }
  return shape_[static_cast<std::size_t>(j)];
}

memory::Block Tensor::block() const { return storage_ ? storage_->block : memory::Block{}; }

bool Tensor::dry_run() const { return storage_ && storage_->dry_run; }

void Tensor::zero_() {
  if (storage_ && !storage_->dry_run && nbytes() > 0) {
    std::memset(storage_->block.ptr, 0, nbytes());
  }
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
  const bool ok = dtype_code == -1 ? (dtype_ == DType::f16 || dtype_ == DType::bf16)
                                   : dtype_code == static_cast<int>(dtype_);
  if (!ok) {
    throw RuntimeError("Tensor::data: element type does not match tensor " + describe());
  }
}

void* Tensor::raw() const { return storage_->block.ptr; }

}  // namespace memtrain::core
