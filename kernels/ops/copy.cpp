#include "kernels/ops/copy.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/fill.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/copy.hpp"
#endif

namespace memtrain::kernels::ops {

void fill_zero(const OpContext& kc, void* dst, std::size_t bytes) {
  if (detail::on_cpu(kc, "fill_zero")) {
    if (bytes > 0) kernels::fill_zero(dst, bytes);
    return;
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::fill_zero(detail::cuda(kc), dst, bytes);
#endif
}

void copy_to_device(const OpContext& kc, void* dst, const void* src, std::size_t bytes) {
  if (detail::on_cpu(kc, "copy_to_device")) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::copy_to_device(detail::cuda(kc), dst, src, bytes);
#endif
}

void copy_on_device(const OpContext& kc, void* dst, const void* src, std::size_t bytes) {
  if (detail::on_cpu(kc, "copy_on_device")) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::copy_on_device(detail::cuda(kc), dst, src, bytes);
#endif
}

void copy_to_host(const OpContext& kc, void* dst, const void* src, std::size_t bytes) {
  if (detail::on_cpu(kc, "copy_to_host")) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::copy_to_host(detail::cuda(kc), dst, src, bytes);
#endif
}

const char* staging_slot_name(StagingSlot slot) {
  switch (slot) {
    case StagingSlot::input_ids:
      return "input_ids";
    case StagingSlot::token_type_ids:
      return "token_type_ids";
    case StagingSlot::attention_mask:
      return "attention_mask";
    case StagingSlot::masked_positions:
      return "masked_positions";
    case StagingSlot::masked_labels:
      return "masked_labels";
    case StagingSlot::owned_rows:
      return "owned_rows";
    case StagingSlot::count:
      break;
  }
  return "unknown";
}

const void* stage(const OpContext& kc, StagingSlot slot, const void* host, std::size_t bytes) {
  if (detail::on_cpu(kc, "stage")) return host;
  if (bytes == 0) return nullptr;
#if MEMTRAIN_HAVE_CUDA
  const gpu::KernelContext& ctx = detail::cuda(kc);
  const std::size_t slot_bytes = ctx.staging_bytes / static_cast<std::size_t>(StagingSlot::count) / 256 * 256;
  if (bytes > slot_bytes) {
    throw std::length_error(std::string("stage: ") + std::to_string(bytes) + " bytes of " + staging_slot_name(slot) +
                            " exceed its staging slot of " + std::to_string(slot_bytes) +
                            " bytes (KernelContext::staging_bytes = " + std::to_string(ctx.staging_bytes) + ")");
  }
  void* dst = static_cast<char*>(ctx.staging) + static_cast<std::size_t>(slot) * slot_bytes;
  gpu::copy_to_device(ctx, dst, host, bytes);
  return dst;
#else
  return nullptr;
#endif
}

}  // namespace memtrain::kernels::ops
