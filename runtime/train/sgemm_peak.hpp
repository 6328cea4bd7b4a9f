#pragma once
// The denominator of sgemm_fraction in metrics.jsonl: the sgemm throughput this process measures at
// startup with its own thread count, so the fraction says how much of the GEMM speed reachable here
// a step uses. It moves with the machine's load (a busy neighbour during the probe makes it small
// and the fraction large), which is why MFU uses the hardware's peak instead (hardware_peak.hpp).
#include "runtime/core/context.hpp"

namespace memtrain::train {

// FLOP/s of kernels::matmul on [n, n] x [n, n] (2 n^3 FLOPs each): the best of `repeats` timed
// runs after one untimed warm-up. Buffers come from `ctx`'s allocator (tag temporary) and are
// released before returning. Takes about repeats * 2 n^3 / peak seconds (~0.1 s at n = 1024).
double measure_sgemm_peak_flops(core::Context& ctx, int n = 1024, int repeats = 3);

// FLOP/s of kernels::matmul on [m, k] x op(B) with op(B) [k, n] (2 m n k FLOPs each; B stored
// [n, k] when trans_b, the layout of a Linear's weight), best of `repeats` after one warm-up;
// buffers as above. `train --profile-ops` measures the FFN's up-projection shape with it
// ([tokens, hidden] x [hidden, intermediate]), the issue-15 reference for a step's FLOP/s.
// Throws std::invalid_argument if m, n or k < 1.
double measure_sgemm_flops(core::Context& ctx, int m, int n, int k, bool trans_b, int repeats = 3);

}  // namespace memtrain::train
