// The hardware peak behind mfu (issue 9): FLOPs per cycle per instruction set
// from the vendors' figures (SIMD lanes x 2 for a fused multiply-add x FMA
// units), and the clock read in the order of Note [Which clock the peak uses]
// from fixtures of sysfs and /proc/cpuinfo.
#include "runtime/train/hardware_peak.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "kernels/cpu/blas_info.hpp"
#include "kernels/cpu/matmul_bf16.hpp"

namespace memtrain::train {
namespace {

// lanes of fp32 in one vector x 2 FLOPs per FMA x FMA (or mul + add) units per
// core.
constexpr int per_cycle(int vector_bits, int units) { return vector_bits / 32 * 2 * units; }

TEST(Fp32FlopsPerCycle, MatchesLanesTimesFmaTimesUnits) {
  EXPECT_EQ(kernels::fp32_flops_per_cycle("SkylakeX"), per_cycle(512, 2));
  EXPECT_EQ(kernels::fp32_flops_per_cycle("Cooperlake"), per_cycle(512, 2));
  EXPECT_EQ(kernels::fp32_flops_per_cycle("Haswell"), per_cycle(256, 2));
  EXPECT_EQ(kernels::fp32_flops_per_cycle("Zen"), per_cycle(256, 2));
  EXPECT_EQ(kernels::fp32_flops_per_cycle("Sandybridge"), per_cycle(256, 1));
  EXPECT_EQ(kernels::fp32_flops_per_cycle("Prescott"), per_cycle(128, 1));
  EXPECT_EQ(kernels::fp32_flops_per_cycle("NoSuchCore"), 0);
}

// The library reports a core name this table knows on every x86-64 machine it
// supports.
TEST(Fp32FlopsPerCycle, KnowsTheKernelsOpenBlasRunsHere) {
  const std::string name = kernels::blas_core_name();
  EXPECT_FALSE(name.empty());
  EXPECT_GT(kernels::fp32_flops_per_cycle(name), 0) << "OpenBLAS kernels " << name;
}

// bf16 dot products (vdpbf16ps) accumulate 2 bf16 products per fp32 lane: twice the fp32 FMA
// rate of the same vectors. Checked under ONEDNN_MAX_CPU_ISA=AVX2 by the CLI test of
// precision.bf16_gemm, where there are none.
TEST(Bf16FlopsPerCycle, IsTwiceTheAvx512Fp32RateWithBf16DotProducts) {
  const int f = kernels::bf16_flops_per_cycle();
  if (!kernels::bf16_gemm_native()) {
    EXPECT_EQ(f, 0);
  } else if (f != 2048) {  // 2048: AMX, Intel's figure
    EXPECT_EQ(f, 2 * per_cycle(512, 2));
  }
  const HardwarePeak p = hardware_peak_bf16(2);
  EXPECT_EQ(p.flops_per_cycle, f);
  EXPECT_EQ(p.cores, 2);
  EXPECT_NE(p.describe().find("oneDNN"), std::string::npos) << p.describe();
}

TEST(ReadClock, PrefersCpufreqMaximum) {
  HardwarePeak p;
  std::istringstream cpuinfo(
      "model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ "
      "2.40GHz\ncpu MHz\t\t: 1000.0\n");
  read_clock(p, "3700000\n", cpuinfo);
  EXPECT_DOUBLE_EQ(p.clock_hz, 3.7e9);
  EXPECT_EQ(p.clock_source, "cpufreq cpuinfo_max_freq");
}

TEST(ReadClock, UsesTheNominalClockOfTheModelNameBeforeCpuMhz) {
  HardwarePeak p;
  std::istringstream cpuinfo(
      "processor\t: 0\ncpu MHz\t\t: 1000.000\nmodel name\t: Intel(R) Xeon(R) "
      "Gold 6148 CPU @ 2.40GHz\n");
  read_clock(p, "", cpuinfo);
  EXPECT_DOUBLE_EQ(p.clock_hz, 2.4e9);
}

TEST(ReadClock, FallsBackToCpuMhzOfTheFirstProcessor) {
  HardwarePeak p;
  std::istringstream cpuinfo(
      "model name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t\t: 2100.000\n"
      "model name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t\t: 2900.000\n");
  read_clock(p, "", cpuinfo);
  EXPECT_DOUBLE_EQ(p.clock_hz, 2.1e9);
  EXPECT_EQ(p.clock_source, "/proc/cpuinfo cpu MHz");
}

TEST(ReadClock, UnknownClockGivesZeroPeakAndSaysWhy) {
  HardwarePeak p;
  p.cores = 2;
  p.core_name = "SkylakeX";
  p.flops_per_cycle = 64;
  std::istringstream cpuinfo("processor\t: 0\nmodel name\t: some CPU\n");
  read_clock(p, "garbage", cpuinfo);
  EXPECT_EQ(p.clock_hz, 0.0);
  EXPECT_EQ(p.flops(), 0.0);
  EXPECT_NE(p.describe().find("peak unknown"), std::string::npos) << p.describe();
}

TEST(HardwarePeak, IsCoresTimesFlopsPerCycleTimesClock) {
  HardwarePeak p;
  p.cores = 2;
  p.core_name = "SkylakeX";
  p.flops_per_cycle = 64;
  p.clock_hz = 2.1e9;
  p.clock_source = "/proc/cpuinfo cpu MHz";
  EXPECT_DOUBLE_EQ(p.flops(), 268.8e9);
  EXPECT_NE(p.describe().find("= 268.8 GFLOP/s"), std::string::npos) << p.describe();
}

}  // namespace
}  // namespace memtrain::train
