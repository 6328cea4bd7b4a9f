#include "models/f32_access.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/core/errors.hpp"

namespace memtrain::models {

using core::DType;

bool is_half(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

kernels::HalfFormat half_format(DType dtype) {
  if (dtype == DType::f16) return kernels::HalfFormat::f16;
  if (dtype == DType::bf16) return kernels::HalfFormat::bf16;
  throw RuntimeError("half_format: " + core::dtype_name(dtype) + " is not a 16-bit float dtype");
}

F32View::F32View(core::Context& ctx, const core::Tensor& t, F32Access access)
    : tensor_(t), access_(access) {
  if (!t.defined()) return;
  if (t.dtype() == DType::f32) {
    // Own memory: no copy, so the fp32 path is unchanged (Note [fp32 arithmetic on 16-bit
    // storage]). const_cast: the handle is const, the storage it names is ours to write.
    data_ = const_cast<float*>(t.data<float>());
    return;
  }
  if (!is_half(t.dtype())) {
    throw RuntimeError("F32View: tensor " + t.describe() + " is not a floating-point tensor");
  }
  if (ctx.dry_run() || t.dry_run()) return;  // nothing to convert; the view stays null
  const auto n = static_cast<std::size_t>(t.numel());
  lease_ = ctx.workspace().lease(std::max<std::size_t>(n, 1));
  data_ = lease_.data();
  if (access_ == F32Access::read || access_ == F32Access::read_write) {
    kernels::convert_half_to_float(data_, t.data<std::uint16_t>(), t.numel(),
                                   half_format(t.dtype()));
  }
}

F32View::F32View(F32View&& o) noexcept
    : tensor_(std::move(o.tensor_)),
      access_(o.access_),
      lease_(std::move(o.lease_)),
      data_(o.data_) {
  o.data_ = nullptr;
}

F32View& F32View::operator=(F32View&& o) noexcept {
  if (this != &o) {
    commit();
    tensor_ = std::move(o.tensor_);
    access_ = o.access_;
    lease_ = std::move(o.lease_);
    data_ = o.data_;
    o.data_ = nullptr;
  }
  return *this;
}

void F32View::commit() {
  if (lease_.data() != nullptr &&
      (access_ == F32Access::write || access_ == F32Access::read_write)) {
    kernels::convert_float_to_half(tensor_.data<std::uint16_t>(), lease_.data(), tensor_.numel(),
                                   half_format(tensor_.dtype()));
  }
  lease_.reset();
  data_ = nullptr;
  tensor_.reset();
}

void store_f32(core::Tensor& dst, const float* src, std::int64_t n) {
  if (dst.numel() != n) {
    throw RuntimeError("store_f32: " + std::to_string(n) + " values for tensor " +
                       dst.describe());
  }
  if (dst.dry_run()) return;
  if (dst.dtype() == DType::f32) {
    std::copy(src, src + n, dst.data<float>());
  } else {
    kernels::convert_float_to_half(dst.data<std::uint16_t>(), src, n, half_format(dst.dtype()));
  }
}

void load_f32(float* out, const core::Tensor& src) {
  if (src.dry_run()) return;
  if (src.dtype() == DType::f32) {
    const float* p = src.data<float>();
    std::copy(p, p + src.numel(), out);
  } else {
    kernels::convert_half_to_float(out, src.data<std::uint16_t>(), src.numel(),
                                   half_format(src.dtype()));
  }
}

}  // namespace memtrain::models
