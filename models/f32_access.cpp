#include "models/f32_access.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/core/errors.hpp"

namespace memtrain::models {

using core::DType;

namespace {

// A conversion's row of the op profile: by dtype, 2 + 4 bytes moved per element.
core::ScopedOp::Description convert_description(DType half, std::int64_t n) {
  return {core::dtype_name(half), 0.0, 6.0 * static_cast<double>(n)};
}

}  // namespace

bool is_half(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

kernels::HalfFormat half_format(DType dtype) {
  if (dtype == DType::f16) return kernels::HalfFormat::f16;
  if (dtype == DType::bf16) return kernels::HalfFormat::bf16;
  throw RuntimeError("half_format: " + core::dtype_name(dtype) + " is not a 16-bit float dtype");
}

F32View::F32View(core::Context& ctx, const core::Tensor& t, F32Access access) : access_(access) {
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
  half_ = const_cast<std::uint16_t*>(t.data<std::uint16_t>());
  numel_ = t.numel();
  format_ = half_format(t.dtype());
  lease_ = ctx.workspace().lease(std::max<std::size_t>(static_cast<std::size_t>(numel_), 1));
  data_ = lease_.data();
  profile_ = ctx.op_profile();
  if (access_ == F32Access::read || access_ == F32Access::read_write) {
    const core::ScopedOp op(profile_, "convert.to_f32", [&] { return convert_description(t.dtype(), numel_); });
    kernels::convert_half_to_float(data_, half_, numel_, format_);
  }
}

F32View::F32View(F32View&& o) noexcept
    : half_(o.half_),
      numel_(o.numel_),
      format_(o.format_),
      access_(o.access_),
      lease_(std::move(o.lease_)),
      data_(o.data_),
      profile_(o.profile_) {
  o.data_ = nullptr;
  o.half_ = nullptr;
}

F32View& F32View::operator=(F32View&& o) noexcept {
  if (this != &o) {
    commit();
    half_ = o.half_;
    numel_ = o.numel_;
    format_ = o.format_;
    access_ = o.access_;
    lease_ = std::move(o.lease_);
    data_ = o.data_;
    profile_ = o.profile_;
    o.data_ = nullptr;
    o.half_ = nullptr;
  }
  return *this;
}

void F32View::commit() {
  if (half_ != nullptr && (access_ == F32Access::write || access_ == F32Access::read_write)) {
    const core::ScopedOp op(profile_, "convert.from_f32", [&] {
      return convert_description(format_ == kernels::HalfFormat::bf16 ? DType::bf16 : DType::f16, numel_);
    });
    kernels::convert_float_to_half(half_, lease_.data(), numel_, format_);
  }
  lease_.reset();
  data_ = nullptr;
  half_ = nullptr;
}

void store_f32(core::Tensor& dst, const float* src, std::int64_t n) {
  if (dst.numel() != n) {
    throw RuntimeError("store_f32: " + std::to_string(n) + " values for tensor " + dst.describe());
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

void* raw_bytes(const core::Tensor& t) {
  switch (t.dtype()) {
    case DType::f32:
      return const_cast<float*>(t.data<float>());
    case DType::i32:
      return const_cast<std::int32_t*>(t.data<std::int32_t>());
    case DType::f16:
    case DType::bf16:
      break;
  }
  return const_cast<std::uint16_t*>(t.data<std::uint16_t>());
}

}  // namespace memtrain::models
