#pragma once
// torch.nn.Linear's forward and backward through the op API (Note [One op API over two
// backends]): kernels/cpu/linear (Eigen over OpenBLAS) or kernels/cuda/linear (cuBLASLt).
#include <cstddef>
#include <cstdint>

#include "kernels/half_format.hpp"
#include "kernels/op_context.hpp"

namespace memtrain::kernels::ops {

// out [N, OC] = inp [N, C] weight [OC, C]^T + bias [OC] (bias may be null; out is overwritten).
void linear_forward(const OpContext& kc, float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);

// From dout [N, OC]: dinp [N, C] += dout weight, dweight [OC, C] += dout^T inp, dbias [OC] += the
// column sums of dout; each skipped when null.
void linear_backward(const OpContext& kc, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC);

// The bf16-operand forms of kernels/cpu/linear_bf16 (oneDNN, fp32 accumulation), with its
// contract, or of kernels/cuda/linear_bf16 (cuBLASLt on tensor cores).
void linear_forward_bf16(const OpContext& kc, float* out, const std::uint16_t* inp, const std::uint16_t* weight,
                         const float* bias, int N, int C, int OC);
void linear_backward_bf16(const OpContext& kc, float* dinp, void* dweight, bool dweight_bf16, bool dweight_accumulate,
                          float* dbias, const std::uint16_t* dout, const std::uint16_t* inp,
                          const std::uint16_t* weight, int N, int C, int OC);

// Bytes of the GPU's fixed scratch (the KernelContext's) that linear_backward_bf16 is best
// served with on `device`: a bf16 weight gradient is accumulated through it a block of rows at
// a time (kernels/cuda/linear_bf16's kLinearBf16ScratchBytes, 8 MiB); 0 on the CPU (oneDNN keeps
// its own). Throws std::runtime_error for a GPU in a build without CUDA.
std::size_t linear_bf16_workspace_bytes(Device device);

// True when linear_forward_bf16 and linear_backward_bf16 run bf16 products natively on
// `device`: always on a GPU (cuBLASLt on tensor cores); on the CPU when oneDNN has bf16 dot
// products (Note [bf16 GEMMs through oneDNN]), where without them the fp32 path is faster.
bool bf16_gemm_native(Device device);

// Floats of host scratch linear_forward_half_weight and linear_backward_half_weight take for an
// [OC, C] weight (0 on the GPU).
std::size_t linear_half_weight_scratch_elements(const OpContext& kc, int OC, int C);

// The 16-bit-weight forms of kernels/cpu/linear_half_weight (fp32 activations, the weight and
// its gradient converted and rounded a block of rows at a time: Note [16-bit weights a block at
// a time]), with its contract; CPU only (a GPU's 16-bit linears will take their weights as
// stored, through typed forms of linear_forward; not dispatched yet).
void linear_forward_half_weight(const OpContext& kc, float* out, const float* inp, const std::uint16_t* weight,
                                const float* bias, int N, int C, int OC, HalfFormat format, float* scratch);
void linear_backward_half_weight(const OpContext& kc, float* dinp, std::uint16_t* dweight, bool dweight_accumulate,
                                 float* dbias, const float* dout, const float* inp, const std::uint16_t* weight, int N,
                                 int C, int OC, HalfFormat format, float* scratch);

}  // namespace memtrain::kernels::ops
