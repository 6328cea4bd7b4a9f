#pragma once
// What the GEMM library runs on this machine: the kernels OpenBLAS picked and
// the fp32 FLOPs per cycle per core of their instruction set (the hardware peak
// of model FLOPs utilization).
#include <string>

namespace memtrain::kernels {

// OpenBLAS's core name for the kernels it uses (openblas_get_corename(),
// documented in its cblas.h: "Get the CPU corename on runtime"): "SkylakeX",
// "Haswell", "Zen", "Prescott", ... With a DYNAMIC_ARCH build (Debian's) this
// follows OPENBLAS_CORETYPE.
std::string blas_core_name();

// Peak fp32 FLOPs per cycle of one core running the kernels of `core_name`:
// SIMD lanes x 2 (a fused multiply-add, or a multiply and an add issued
// together) x the vector units that do so each cycle. 64 for AVX-512 cores
// (SkylakeX, Cooperlake, SapphireRapids: 16 lanes, 2 FMA units), 32 for
// AVX2+FMA (Haswell, Zen: 8 lanes, 2 FMA units), 16 for AVX without FMA
// (Sandybridge: a multiply and an add port), 8 for SSE kernels (Prescott,
// Core2, Penryn, Dunnington, Nehalem, Atom, Opteron, Barcelona: 4 lanes). 0 for
// a name not in this table (the caller reports the peak as unknown). Source:
// Intel's and AMD's optimization manuals (FMA units per core). Caveats, written
// down where they are assumed: some Xeon Silver/Bronze parts have one AVX-512
// FMA unit (half the peak), and Zen 1 splits 256-bit FMAs in two (half of 32).
int fp32_flops_per_cycle(const std::string& core_name);

}  // namespace memtrain::kernels
