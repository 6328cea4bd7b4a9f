#include "models/f32_access.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/copy.hpp"
#include "kernels/ops/half_convert.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::models {

using core::DType;

namespace {

// A conversion's row of the op profile: by dtype, 2 + 4 bytes moved per element.
core::ScopedOp::Description convert_description(DType half, std::int64_t n) {
  return {core::dtype_name(half), 0.0, 6.0 * static_cast<double>(n)};
}

// Note [Float views convert on the tensor's device]
// A view of a 16-bit tensor converts it into the context's workspace with the context's
// conversions: on the CPU host scratch and the CPU's kernels; on a GPU (a context attached to a
// core::CudaDevice) the device's scratch and the CUDA twins, which give the same bits. So every
// fp32 kernel serves 16-bit storage on either device, and a 16-bit GPU step runs, with the
// conversions a native 16-bit kernel would fuse away (issue 14: native operands replace the
// views op by op, GEMMs first). A view of an f32 tensor is its own pointer on either device;
// zeroing goes through the op API (a memset on the CPU). A row view on a GPU is a whole view:
// converting the whole table is one launch there, where a launch a row would cost more, and it
// gives the same bits (Note [Row views of embedding tables]).
bool on_host(const core::Context& ctx) { return ctx.op_context().device == kernels::Device::cpu; }

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
    if (access_ == F32Access::zeroed && !t.dry_run() && !ctx.dry_run()) {
      core::Tensor handle = t;  // zeroed on the tensor's own device (a memset on the CPU)
      handle.zero_();
    }
    return;
  }
  if (!is_half(t.dtype())) {
    throw RuntimeError("F32View: tensor " + t.describe() + " is not a floating-point tensor");
  }
  if (ctx.dry_run() || t.dry_run()) return;  // nothing to convert; the view stays null
  half_ = const_cast<std::uint16_t*>(t.data<std::uint16_t>());
  numel_ = t.numel();
  format_ = half_format(t.dtype());
  kc_ = ctx.op_context();
  lease_ = ctx.workspace().lease(std::max<std::size_t>(static_cast<std::size_t>(numel_), 1));
  data_ = lease_.data();
  profile_ = ctx.op_profile();
  if (access_ == F32Access::read || access_ == F32Access::read_write) convert(/*to_f32=*/true);
  if (access_ == F32Access::zeroed) {
    kernels::ops::fill_zero(kc_, data_, sizeof(float) * static_cast<std::size_t>(numel_));
  }
}

F32View::F32View(core::Context& ctx, const core::Tensor& t, F32Access access, std::span<const std::int32_t> rows)
    : F32View() {
  if (access == F32Access::zeroed) {
    throw RuntimeError("F32View: a row view of " + t.describe() + " cannot be zeroed (its other rows are kept)");
  }
  access_ = access;
  if (!t.defined()) return;
  // Note [Float views convert on the tensor's device]: a GPU converts the whole table.
  if (t.dtype() == DType::f32 || !is_half(t.dtype()) || ctx.dry_run() || t.dry_run() || !on_host(ctx)) {
    *this = F32View(ctx, t, access);
    return;
  }
  if (t.shape().empty()) throw RuntimeError("F32View: a row view of the scalar tensor " + t.describe());
  half_ = const_cast<std::uint16_t*>(t.data<std::uint16_t>());
  numel_ = t.numel();
  format_ = half_format(t.dtype());
  row_view_ = true;
  rows_ = rows;
  row_length_ = t.shape()[0] > 0 ? numel_ / t.shape()[0] : 0;
  kc_ = ctx.op_context();
  lease_ = ctx.workspace().lease(std::max<std::size_t>(static_cast<std::size_t>(numel_), 1));
  data_ = lease_.data();
  profile_ = ctx.op_profile();
  if (access_ == F32Access::read || access_ == F32Access::read_write) convert(/*to_f32=*/true);
}

void F32View::convert(bool to_f32) {
  const DType dtype = format_ == kernels::HalfFormat::bf16 ? DType::bf16 : DType::f16;
  if (!row_view_) {
    const core::ScopedOp op(profile_, to_f32 ? "convert.to_f32" : "convert.from_f32",
                            [&] { return convert_description(dtype, numel_); });
    if (to_f32) {
      kernels::ops::convert_half_to_float(kc_, data_, half_, numel_, format_);
    } else {
      kernels::ops::convert_float_to_half(kc_, half_, data_, numel_, format_);
    }
    return;
  }
  const std::int64_t n_rows = row_length_ > 0 ? numel_ / row_length_ : 0;
  const core::ScopedOp op(profile_, to_f32 ? "convert.to_f32" : "convert.from_f32", [&] {
    return convert_description(dtype, static_cast<std::int64_t>(rows_.size()) * row_length_);
  });
  for (const std::int32_t r : rows_) {
    if (r < 0 || r >= n_rows) continue;
    const std::int64_t at = std::int64_t{r} * row_length_;
    if (to_f32) {
      kernels::ops::convert_half_to_float(kc_, data_ + at, half_ + at, row_length_, format_);
    } else {
      kernels::ops::convert_float_to_half(kc_, half_ + at, data_ + at, row_length_, format_);
    }
  }
}

F32View::F32View(F32View&& o) noexcept
    : half_(o.half_),
      numel_(o.numel_),
      rows_(o.rows_),
      row_length_(o.row_length_),
      row_view_(o.row_view_),
      format_(o.format_),
      access_(o.access_),
      lease_(std::move(o.lease_)),
      data_(o.data_),
      profile_(o.profile_),
      kc_(o.kc_) {
  o.data_ = nullptr;
  o.half_ = nullptr;
}

F32View::~F32View() {
  try {
    commit();
  } catch (...) {
    // See the declaration: a CPU conversion never throws; a GPU's error is reported later.
  }
}

F32View& F32View::operator=(F32View&& o) noexcept {
  if (this != &o) {
    try {
      commit();
    } catch (...) {
      // As in the destructor.
    }
    half_ = o.half_;
    numel_ = o.numel_;
    rows_ = o.rows_;
    row_length_ = o.row_length_;
    row_view_ = o.row_view_;
    format_ = o.format_;
    access_ = o.access_;
    lease_ = std::move(o.lease_);
    data_ = o.data_;
    profile_ = o.profile_;
    kc_ = o.kc_;
    o.data_ = nullptr;
    o.half_ = nullptr;
  }
  return *this;
}

void F32View::commit() {
  if (half_ != nullptr &&
      (access_ == F32Access::write || access_ == F32Access::read_write || access_ == F32Access::zeroed)) {
    convert(/*to_f32=*/false);
  }
  lease_.reset();
  data_ = nullptr;
  half_ = nullptr;
}

void F32View::round_in_place(F32Access then) {
  if (then != F32Access::read && then != F32Access::write) {
    throw std::invalid_argument("F32View::round_in_place: a view can go on as read or write only");
  }
  if (half_ == nullptr ||
      !(access_ == F32Access::write || access_ == F32Access::read_write || access_ == F32Access::zeroed)) {
    return;
  }
  if (row_view_) throw RuntimeError("F32View: a row view cannot be rounded in place (its other rows are unspecified)");
  const DType dtype = format_ == kernels::HalfFormat::bf16 ? DType::bf16 : DType::f16;
  {
    // 4 bytes read and 2 + 4 stored per element.
    const core::ScopedOp op(profile_, "convert.round_in_place", [&] {
      return core::ScopedOp::Description{core::dtype_name(dtype), 0.0, 10.0 * static_cast<double>(numel_)};
    });
    kernels::ops::round_float_to_half(kc_, half_, data_, numel_, format_);
  }
  access_ = then;
}

void store_f32(core::Tensor& dst, const float* src, std::int64_t n) {
  if (dst.numel() != n) {
    throw RuntimeError("store_f32: " + std::to_string(n) + " values for tensor " + dst.describe());
  }
  if (dst.dry_run()) return;
  if (dst.dtype() == DType::f32) {
    dst.copy_from_host(src);  // a memcpy on the CPU (Note [A tensor's bytes are touched by its device])
  } else if (dst.device() == kernels::Device::cpu) {
    kernels::ops::convert_float_to_half(kernels::OpContext{}, dst.data<std::uint16_t>(), src, n,
                                        half_format(dst.dtype()));
  } else {
    // Rounded on the host, with the CPU's conversion, then copied to the device.
    std::vector<std::uint16_t> rounded(static_cast<std::size_t>(n));
    kernels::ops::convert_float_to_half(kernels::OpContext{}, rounded.data(), src, n, half_format(dst.dtype()));
    dst.copy_from_host(rounded.data());
  }
}

void load_f32(float* out, const core::Tensor& src) {
  if (src.dry_run()) return;
  if (src.dtype() == DType::f32) {
    src.copy_to_host(out);
  } else if (src.device() == kernels::Device::cpu) {
    kernels::ops::convert_half_to_float(kernels::OpContext{}, out, src.data<std::uint16_t>(), src.numel(),
                                        half_format(src.dtype()));
  } else {
    std::vector<std::uint16_t> stored(static_cast<std::size_t>(src.numel()));
    src.copy_to_host(stored.data());
    kernels::ops::convert_half_to_float(kernels::OpContext{}, out, stored.data(), src.numel(),
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
