#pragma once
// Zeroing and host <-> device copies through the op API: memset and memcpy on the CPU,
// kernels/cuda/copy on the GPU. Tensors use them (runtime/core/tensor.cpp), so that a tensor's
// memory is touched only by its own device.
#include <cstddef>
#include <cstdint>

#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// bytes at dst (memory of kc's device) set to 0.
void fill_zero(const OpContext& kc, void* dst, std::size_t bytes);

// Host memory src -> dst in kc's device memory (a plain copy on the CPU; src and dst must not
// overlap). src may be reused when this returns.
void copy_to_device(const OpContext& kc, void* dst, const void* src, std::size_t bytes);

// src -> dst, both in kc's device memory (a memcpy on the CPU); they must not overlap.
void copy_on_device(const OpContext& kc, void* dst, const void* src, std::size_t bytes);

// src in kc's device memory -> host memory dst, complete when this returns (on the GPU it
// waits for the stream).
void copy_to_host(const OpContext& kc, void* dst, const void* src, std::size_t bytes);

// Note [Index arrays travel through fixed slots]
// The layers read the batch's small host arrays in their kernels: token ids and types, the
// attention mask, the masked positions and their labels. On the CPU a kernel reads them where
// they are. On a GPU they are copied, at the point of use, into a slot of the KernelContext's
// staging memory: device memory allocated up front, outside the caching allocator, as the
// cuBLASLt workspace is. So no op allocates for them, the allocation trace is the same on both
// devices, and a dry run still predicts a GPU run. A slot is overwritten by the next copy into
// it, queued on the same stream after the kernels that read the old contents; a pass reads its
// arrays between its forward and its backward, before the next pass stages its own.
enum class StagingSlot : int {
  input_ids,
  token_type_ids,
  attention_mask,
  masked_positions,
  masked_labels,
  owned_rows,
  count
};

// A device-readable copy of host[0, bytes) in `slot`: host itself on the CPU; on the GPU the
// slot's device memory after an asynchronous copy on the stream. Throws std::length_error when
// bytes exceed a slot (KernelContext::staging_bytes / StagingSlot::count, rounded down to 256),
// naming the slot and both sizes. host may be null when bytes is 0 (returns null then).
const void* stage(const OpContext& kc, StagingSlot slot, const void* host, std::size_t bytes);

template <class T>
const T* stage(const OpContext& kc, StagingSlot slot, const T* host, std::int64_t n) {
  return static_cast<const T*>(
      stage(kc, slot, static_cast<const void*>(host), sizeof(T) * static_cast<std::size_t>(n)));
}

// The slot's name in messages ("input_ids", ...).
const char* staging_slot_name(StagingSlot slot);

}  // namespace memtrain::kernels::ops
