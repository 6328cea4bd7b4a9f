#pragma once
// bf16 GEMMs with fp32 accumulation through oneDNN's matmul primitive, for CPUs with bf16 dot
// products (AVX512_BF16 or AMX): Note [bf16 GEMMs through oneDNN].
#include <cstdint>
#include <string>

namespace memtrain::kernels {

// Note [bf16 GEMMs through oneDNN]
// Debian's OpenBLAS (0.3.21) is built without sbgemm, so until now a bf16 step converted every
// GEMM operand to float and ran sgemm: the 16-bit step could only be slower than fp32's
// (issue 15). CPUs with AVX512_BF16 (Cooper Lake, Zen 4) or AMX have an instruction that
// multiplies pairs of bf16 values and accumulates them in fp32 (vdpbf16ps), twice the
// multiply-adds of an fp32 FMA per instruction. oneDNN's matmul uses it: measured on a Zen 4,
// 2 threads, [1024 x 768] x [768 x 3072], 980 GFLOP/s against 450 for OpenBLAS's AVX-512 sgemm
// and 250 for its AVX2 one. We use the library (Debian's libdnnl, the one PyTorch's CPU bf16
// autocast calls) rather than a GEMM of our own.
// - Accumulation is fp32 inside the product, and the result is rounded once to the output's
//   dtype, the same contract as the fp32 path on converted operands (Note [fp32 arithmetic on
//   16-bit storage]); only the order of the fp32 sums differs, so results agree to rounding,
//   not bitwise. A given shape and thread count always runs the same code, so a run repeats
//   itself bitwise (recompute, resume).
// - Products of bf16 values are exact in fp32, so the operands lose nothing the storage had
//   not already lost.
// - On a CPU without bf16 dot products oneDNN would emulate them, slower than sgemm, so the
//   choice is the caller's (bf16_gemm_native) and the fp32 path stays the fallback.
// - oneDNN keeps its JIT code and scratch memory inside the library, as OpenBLAS keeps its
//   buffers: nothing here goes through memtrain's allocator, so the allocation trace does not
//   depend on which path runs. Primitives are made once per shape and kept. Unlike the sgemm
//   path, a warm call still makes small heap allocations (oneDNN's execute builds its argument
//   map each time), never an operand-sized one: tests/kernels/no_allocation_test.cpp holds both.
// - oneDNN's OpenMP build runs on the calling thread's OpenMP team: num_threads() threads.

// True when oneDNN runs bf16 dot products natively here: its effective ISA (which honours
// ONEDNN_MAX_CPU_ISA) includes avx512_core_bf16.
bool bf16_gemm_native();

// Peak bf16 FLOPs per cycle of one core for oneDNN's effective ISA, the MFU denominator of a
// run whose GEMMs run in bf16: 128 with AVX512_BF16 (vdpbf16ps: 16 fp32 lanes, each
// accumulating 2 bf16 products, on 2 FMA units: twice AVX-512's fp32 64), 2048 with AMX
// (Intel's figure for AMX-BF16: 1024 multiply-adds per cycle per core), 0 without bf16 dot
// products. The same model as kernels::fp32_flops_per_cycle (blas_info.hpp), with its caveats.
int bf16_flops_per_cycle();

// One line for the run header: oneDNN's version and effective ISA, e.g.
// "oneDNN 2.6.3, avx512_core_bf16".
std::string bf16_gemm_description();

// C = op(A) op(B) (+ bias) (+ C when accumulate), fp32 accumulation, all row-major.
// op(A) [M, K] (A stored [M, K], or [K, M] when trans_a), bf16 bit patterns;
// op(B) [K, N] (B stored [K, N], or [N, K] when trans_b), bf16;
// bias [N] f32 or null, added to every row;
// C [M, N]: f32 when c_bf16 is false, else bf16 bit patterns (rounded to nearest even).
// With accumulate false C is not read. Never allocates through memtrain, and once a shape is
// warm only oneDNN's small bookkeeping on the host heap; call outside OpenMP regions.
// Throws std::runtime_error when oneDNN refuses the matmul (on a CPU without AVX-512 it runs
// no bf16 matmul at all), std::invalid_argument for a non-positive size.
void matmul_bf16(void* C, bool c_bf16, const std::uint16_t* A, const std::uint16_t* B, const float* bias, int M, int N,
                 int K, bool trans_a, bool trans_b, bool accumulate);

}  // namespace memtrain::kernels
