#pragma once
// How an op of kernels/ops picks its implementation; included by the ops' .cpp files only.
#include "kernels/op_context.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/kernel_context.hpp"
#endif

namespace memtrain::kernels::ops::detail {

// Note [One op API over two backends]
// Each op of kernels/ops takes the OpContext first and the kernels' own arguments after it
// (pointers and sizes, no tensors, no allocation), and calls the CPU kernel of kernels/cpu or
// its CUDA twin of kernels/cuda, which share the contract: the same layouts, the same
// accumulate-or-overwrite rule, the same Philox counters. The choice is one branch an op,
// against kernels of microseconds at least. An op whose twin does not exist yet says so when
// asked to run on the GPU, instead of running the CPU code on device pointers; a build without
// CUDA says that instead. Workspace sizes are asked of the op too (on the GPU, the fixed
// workspaces of the KernelContext serve), so the caller never reasons about the backend.

// True on the CPU. On the GPU: false when this build has CUDA and `kc` carries its
// KernelContext; otherwise throws std::runtime_error naming `op`.
bool on_cpu(const OpContext& kc, const char* op);

// For sizing before a KernelContext exists (an op's workspace_bytes): true for the CPU, false
// for a GPU in a build with CUDA; throws std::runtime_error naming `op` for a GPU without CUDA.
bool on_cpu(Device device, const char* op);

// For ops with no CUDA twin yet: returns on the CPU, throws std::runtime_error naming `op`
// on the GPU.
void require_cpu(const OpContext& kc, const char* op);

#if MEMTRAIN_HAVE_CUDA
// The GPU context of `kc` (on_cpu(kc, ...) returned false, so it is set).
inline const gpu::KernelContext& cuda(const OpContext& kc) { return *kc.cuda; }
#endif

}  // namespace memtrain::kernels::ops::detail
