#pragma once
#include <cstdint>

#include "kernels/cpu/scalar.hpp"
#include "kernels/philox.hpp"

namespace memtrain::kernels {

// The keep rule's threshold: element e is kept iff its Philox word w has (w >> 8) * 2^-24 >= p,
// i.e. (w & 0xffffff00) >= dropout_keep_threshold(p) = ceil(p 2^24) << 8, compared as integers
// with no float conversion per element. Every dropout of memtrain, CPU and CUDA, uses this rule
// (the GPU draws the CPU's masks). Requires 0 <= p < 1.
std::uint32_t dropout_keep_threshold(float p);

// Inverted dropout (Srivastava et al. 2014, scaled at training time as torch.nn.Dropout):
// out = inp * keep / (1 - p), keep = philox_uniform(key, sample, e) >= p,
// where the tensor is [rows, per_sample] and row r belongs to global sample first_sample + r.
// No mask is stored: the backward pass rebuilds it from the same key. p == 0 copies; p >= 1
// zeroes. out may alias inp. Shapes: out, inp [rows, per_sample]. Throws std::invalid_argument
// for p < 0 or NaN.
// first_element: the index of each row's first element within its sample, when the rows are a
// slice of the samples (a sequence-parallel shard of tokens [t0, t1) has t0 * C): the slice
// then draws the unsliced tensor's mask.
template <class T>
void dropout_forward(NoDeduce<T>* out, const T* inp, int rows, long per_sample, float p, const RngKey& key,
                     std::uint64_t first_sample, std::uint64_t first_element = 0);

// dinp = dout * keep / (1 - p) (overwrites; may alias dout).
template <class T>
void dropout_backward(NoDeduce<T>* dinp, const T* dout, int rows, long per_sample, float p, const RngKey& key,
                      std::uint64_t first_sample, std::uint64_t first_element = 0);

// out = dropout(inp) + residual, the residual connection after a projection's dropout (BERT's
// hidden dropout: Devlin et al. 2019; Megatron-LM's bias_dropout_add): the mask as
// dropout_forward draws it, and each dropped chunk gets the residual added while it is in L1,
// on the thread team (the add had been a serial pass of its own: issue 15). Bitwise
// dropout_forward followed by out[i] += residual[i]; p == 0 is the plain sum. Shapes: out, inp,
// residual [rows, per_sample]. out may alias inp, not residual. Throws std::invalid_argument
// unless 0 <= p < 1.
template <class T>
void dropout_residual_forward(NoDeduce<T>* out, const T* inp, const NoDeduce<T>* residual, int rows, long per_sample,
                              float p, const RngKey& key, std::uint64_t first_sample, std::uint64_t first_element = 0);

// Applies the mask of elements [first_element, first_element + n) of one sample in place:
// x[i] *= keep(first_element + i) / (1 - p). The building block of dropout and of attention's
// dropout on probabilities. Requires 0 < p < 1.
template <class T>
void apply_dropout_mask(T* x, std::int64_t n, float p, const PhiloxStream& stream, std::uint64_t sample,
                        std::uint64_t first_element);

// apply_dropout_mask on x and y [n] with the same mask, its Philox words drawn once (attention's
// backward drops the probabilities for dV and their gradient for dS at the same positions).
// Requires 0 < p < 1.
template <class T>
void apply_dropout_mask_pair(T* x, T* y, std::int64_t n, float p, const PhiloxStream& stream, std::uint64_t sample,
                             std::uint64_t first_element);

}  // namespace memtrain::kernels
