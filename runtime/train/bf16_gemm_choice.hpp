#pragma once
// How a run settles the path of its bf16 GEMMs on the CPU (precision.bf16_gemm, docs/config.md):
// by the config, by the machine, by a checkpoint's record, or by measuring the step's GEMMs.
#include <optional>
#include <string>

#include "runtime/train/bf16_gemm_probe.hpp"

namespace memtrain::train {

// Note [bf16_gemm: auto measures the step's GEMMs]
// Whether oneDNN's bf16 matmul beats sgemm on converted operands depends on the CPU and on the
// shapes, not on the ISA alone: on a Zen 4 with AVX512_BF16 the bf16 step runs 1.8x fp32's, but
// on an Intel Xeon with AVX512_BF16 and no AMX (Debian 12's oneDNN 2.6.3) it is the slowest
// choice (bench-bert: fp32 ~2150 tok/s, bf16 through sgemm ~1550-2030, through oneDNN ~1250).
// So where a bf16 run on the CPU has bf16 dot products, `auto` times both paths on the GEMMs
// its step runs (bf16_gemm_probe.hpp: the forward GEMMs of one micro-batch, rows capped at
// kProbeMaxRows, a warm-up then three alternated repeats, medians) and takes the faster one.
// - Rank 0 measures, on its own threads (its share of the node's cores, as it will train), and
//   broadcasts the choice: every rank runs the same path, so a data-parallel gradient is one
//   path's sum and the run is the same whatever the measurement on another rank would say.
// - The two paths sum the same fp32 products in another order (Note [bf16 GEMMs through
//   oneDNN]), so the path is part of a run's bits: checkpoints record it (meta.json
//   "bf16_gemm"), and a resume with auto takes the recorded path without measuring, so a
//   resumed run is bitwise the run that was not interrupted. The run's checkpoints then record
//   it again: a trajectory keeps its path across any number of resumes.
// - An explicit native or fp32 is an override: it is used whatever the checkpoint recorded
//   (the run continues within rounding, and says so), and the checkpoints it writes record
//   the path it used, which a later resume with auto keeps.
// - A checkpoint without the field (written before the field existed) resumes as auto did
//   then: oneDNN wherever the CPU has bf16 dot products, without measuring.
// - A dry run and `plan` do not measure (they stay deterministic and fast): they assume that
//   older rule too. The path moves no allocation (the views and operands it needs live in the
//   workspace outside the allocator), so the plan holds for either path; only the header's
//   MFU denominator (hardware_peak_bf16 or fp32's) follows the assumption.
// - Timing decides, so two starts of the same config on one machine may choose differently
//   when the paths are close; MEMTRAIN_BF16_GEMM_PREFER (native or fp32) overrides what the
//   measurement prefers, for tests that must not depend on timing.

// Why a run's bf16 GEMMs take their path.
enum class Bf16GemmBasis {
  not_applicable,   // not a bf16 run on the CPU: ModelOptions decide as before (GPU: cuBLASLt)
  config,           // precision.bf16_gemm: native or fp32
  no_dot_products,  // auto on a CPU without bf16 dot products: fp32
  dry_run,          // auto in a dry run: assumed native, not measured
  checkpoint,       // auto resumed: the checkpoint's meta.json "bf16_gemm"
  old_checkpoint,   // auto resumed from a checkpoint without the field: native, as auto was
  measurement,      // auto: rank 0 timed both paths
};

// What decides the path, before any measurement. All of it is the same on every rank but
// dot_products and recorded (rank 0's count).
struct Bf16GemmInputs {
  bool bf16_on_cpu = false;   // precision.dtype bf16 and device cpu
  std::string configured;     // precision.bf16_gemm: auto, native or fp32
  bool dot_products = false;  // kernels::bf16_gemm_native()
  bool dry_run = false;
  bool resuming = false;
  std::string recorded;  // the checkpoint's meta.json "bf16_gemm" ("native", "fp32"; "" when absent)
};

// The decision: the basis and, unless the basis is measurement (the speeds decide, through
// prefers_native), the path. Throws std::invalid_argument for a configured value other than
// auto, native, fp32 or a recorded one other than "", native, fp32.
struct Bf16GemmPlan {
  Bf16GemmBasis basis = Bf16GemmBasis::not_applicable;
  bool native = false;
};
Bf16GemmPlan plan_bf16_gemm(const Bf16GemmInputs& in);

// MEMTRAIN_BF16_GEMM_PREFER: "native" or "fp32" forces what the measurement prefers (the
// speeds are still measured and reported); unset or empty: none. Throws ConfigError
// "MEMTRAIN_BF16_GEMM_PREFER=x: expected native or fp32" for any other value.
std::optional<bool> forced_bf16_gemm_preference();

// The faster path (oneDNN on a tie: the ISA's own instruction), unless `forced` says which.
bool prefers_native(const Bf16GemmSpeeds& speeds, std::optional<bool> forced);

// A run's settled path, for the header, the summary and its checkpoints.
struct Bf16GemmChoice {
  Bf16GemmBasis basis = Bf16GemmBasis::not_applicable;
  bool native = false;
  std::optional<Bf16GemmSpeeds> speeds;  // basis measurement
  std::optional<bool> forced;            // MEMTRAIN_BF16_GEMM_PREFER, when set
  std::string overridden;                // basis config: the checkpoint's other path ("" when none)

  // meta.json "bf16_gemm": "native" or "fp32"; "" when basis is not_applicable (not recorded).
  std::string recorded_path() const;
};

// The header's line for the choice of `auto` and for an override of a checkpoint's path,
// "memtrain: bf16 GEMMs: auto chose fp32 sgemm: 41.2 GFLOP/s against oneDNN bf16 28.0 GFLOP/s
// on the step's shapes (...)\n"; empty for the other bases.
std::string bf16_gemm_header_line(const Bf16GemmChoice& choice);

// The summary's word for the path after "bf16": "oneDNN bf16 GEMMs (auto: measured 41.2
// against 28.0 GFLOP/s)"; empty when basis is not_applicable.
std::string bf16_gemm_summary(const Bf16GemmChoice& choice);

}  // namespace memtrain::train
