// The reference speeds `train --profile-ops` puts beside the step (issue 15): the step's model
// FLOP/s over an sgemm measured in the same run, and the optimizer's bytes per second over
// memcpy's, each a quotient checked here against the same quotient written out by hand, and the
// measurements' refusals of arguments that measure nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "runtime/core/context.hpp"
#include "runtime/train/memcpy_bandwidth.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/op_profile_report.hpp"
#include "runtime/train/sgemm_peak.hpp"

namespace memtrain::train {
namespace {

core::OpProfile two_step_profile() {
  core::OpProfile p;
  // Two AdamW calls over 1,000 parameters (28 bytes each) in 2e-6 s, and one GEMM.
  p.add("optimizer.step", "[1000] parameters", 1e-6, 0, 28e3);
  p.add("optimizer.step", "[1000] parameters", 1e-6, 0, 28e3);
  p.add("gemm.forward", "[32, 32] x [32, 32]^T", 4e-6, 2.0 * 32 * 32 * 32, 0);
  return p;
}

TEST(StepReference, FractionsAreTheStepsSpeedsOverTheMeasuredOnes) {
  const auto profile = two_step_profile();
  StepReference ref;
  ref.sgemm_shape = "[32, 32] x [32, 64]";
  ref.sgemm_flops = 50e9;
  ref.memcpy_bytes_per_s = 20e9;
  ref.model_flops = 3e6;
  const double step_seconds = 1e-4;
  const auto j = op_profile_json(profile, 2, step_seconds, &ref)["reference"];
  EXPECT_EQ(j["sgemm_shape"], "[32, 32] x [32, 64]");
  EXPECT_EQ(j["sgemm_flops"].get<double>(), 50e9);
  EXPECT_EQ(j["memcpy_bytes_per_s"].get<double>(), 20e9);
  // 3e6 FLOPs in 1e-4 s = 30 GFLOP/s = 0.6 of 50; 56e3 bytes in 2e-6 s = 28 GB/s = 1.4 of 20.
  EXPECT_DOUBLE_EQ(j["model_flops_per_s"].get<double>(), 3e10);
  EXPECT_DOUBLE_EQ(j["sgemm_fraction"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(j["optimizer_memcpy_fraction"].get<double>(), 1.4);

  const auto text = format_op_profile(profile, 2, step_seconds, &ref);
  EXPECT_NE(text.find("sgemm [32, 32] x [32, 64] 50.0 GFLOP/s, memcpy 20.00 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("30.0 model GFLOP/s = 0.60 of the sgemm; optimizer.step at 1.40 of memcpy"), std::string::npos)
      << text;
}

TEST(StepReference, WithoutAnOptimizerRowItsFractionIsNull) {
  core::OpProfile profile;
  profile.add("gemm.forward", "[32, 32] x [32, 32]^T", 4e-6, 2.0 * 32 * 32 * 32, 0);
  StepReference ref;
  ref.sgemm_shape = "[1, 1] x [1, 1]";
  ref.sgemm_flops = 1e9;
  ref.memcpy_bytes_per_s = 1e9;
  ref.model_flops = 1e3;
  const auto j = op_profile_json(profile, 1, 1e-3, &ref)["reference"];
  EXPECT_TRUE(j["optimizer_memcpy_fraction"].is_null()) << j.dump();
  EXPECT_DOUBLE_EQ(j["sgemm_fraction"].get<double>(), 1e6 / 1e9);
  EXPECT_EQ(format_op_profile(profile, 1, 1e-3, &ref).find("memcpy;"), std::string::npos);
}

TEST(StepReference, WithoutAReferenceTheJsonHasNone) {
  const auto j = op_profile_json(two_step_profile(), 2, 1e-4);
  EXPECT_FALSE(j.contains("reference"));
  EXPECT_EQ(format_op_profile(two_step_profile(), 2, 1e-4).find("measured after the steps"), std::string::npos);
}

TEST(MemcpyBandwidth, RefusesArgumentsThatMeasureNothing) {
  EXPECT_THROW(measure_memcpy_bandwidth(0), std::invalid_argument);
  EXPECT_THROW(measure_memcpy_bandwidth(1 << 20, 0), std::invalid_argument);
  // A small copy still gives a finite, positive speed (no assert on its value: the machine is shared).
  const double b = measure_memcpy_bandwidth(1 << 20, 1);
  EXPECT_TRUE(std::isfinite(b) && b > 0) << b;
}

TEST(SgemmFlops, RefusesAnEmptyShape) {
  core::Context ctx(make_model_allocator(MemoryConfig{}));
  EXPECT_THROW(measure_sgemm_flops(ctx, 0, 8, 8, true), std::invalid_argument);
  EXPECT_THROW(measure_sgemm_flops(ctx, 8, 8, 0, false), std::invalid_argument);
  const double f = measure_sgemm_flops(ctx, 16, 24, 8, true, 1);
  EXPECT_TRUE(std::isfinite(f) && f > 0) << f;
}

}  // namespace
}  // namespace memtrain::train
