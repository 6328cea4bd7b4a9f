#pragma once
// The denominator of MFU (model FLOPs utilization; PaLM, Chowdhery et al. 2022,
// App. B): the hardware's peak, which does not move with the machine's load,
// unlike a measured sgemm.
#include <istream>
#include <string>

namespace memtrain::train {

// Peak fp32 FLOP/s of the cores one rank computes on: cores x FLOPs per cycle
// of the instruction set the GEMM kernels use (kernels::fp32_flops_per_cycle of
// kernels::blas_core_name()) x clock.
struct HardwarePeak {
  int cores = 0;             // the rank's compute threads, at most its share of the cores
  std::string core_name;     // OpenBLAS's kernels, e.g. "SkylakeX"
  int flops_per_cycle = 0;   // fp32, per core; 0 = unknown instruction set
  double clock_hz = 0;       // 0 = could not be read
  std::string clock_source;  // where clock_hz came from, or why it is unknown
  // cores x flops_per_cycle x clock_hz; 0 when any factor is unknown (MFU is
  // then null).
  double flops() const { return cores * static_cast<double>(flops_per_cycle) * clock_hz; }
  // "2 cores x 64 FLOP/cycle (SkylakeX) x 2.10 GHz (/proc/cpuinfo cpu MHz) =
  // 268.8 GFLOP/s".
  std::string describe() const;
};

// Note [Which clock the peak uses]
// The peak must not move with load, so the clock is a fixed figure of the CPU,
// read in this order: (1) /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq
// (kHz; the highest clock the kernel's cpufreq driver allows, turbo included
// where the driver reports it); (2) the nominal clock in /proc/cpuinfo's "model
// name" ("... @ 2.60GHz"); (3) /proc/cpuinfo's "cpu MHz" of the first processor
// (on virtual machines without cpufreq, such as this project's, a constant: the
// host's TSC rate; on bare metal without cpufreq it is the current clock, read
// once at start). When none can be read the clock is 0, MFU is null in
// metrics.jsonl, and the run header says why; sgemm_fraction (against the sgemm
// speed measured at start) is still reported.
HardwarePeak hardware_peak(int cores);

// The bf16 peak of the same cores, for runs whose GEMMs run on bf16 dot products
// (precision.bf16_gemm, Note [bf16 GEMMs through oneDNN]): kernels::bf16_flops_per_cycle of
// oneDNN's ISA instead of OpenBLAS's fp32 figure, the same clock. As PaLM's MFU counts against
// the peak of the matmuls' dtype.
HardwarePeak hardware_peak_bf16(int cores);

// The clock of Note [Which clock the peak uses] from the given sources:
// `max_freq_khz` is the text of cpuinfo_max_freq ("" when absent), `cpuinfo`
// the content of /proc/cpuinfo. Sets clock_hz and clock_source of `peak`.
// Exposed for tests.
void read_clock(HardwarePeak& peak, const std::string& max_freq_khz, std::istream& cpuinfo);

}  // namespace memtrain::train
