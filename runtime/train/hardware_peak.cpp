#include "runtime/train/hardware_peak.hpp"

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "kernels/cpu/blas_info.hpp"
#include "kernels/cpu/matmul_bf16.hpp"

namespace memtrain::train {
namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace

void read_clock(HardwarePeak& peak, const std::string& max_freq_khz, std::istream& cpuinfo) {
  peak.clock_hz = 0;
  try {
    const double khz = std::stod(max_freq_khz);
    if (khz > 0) {
      peak.clock_hz = khz * 1e3;
      peak.clock_source = "cpufreq cpuinfo_max_freq";
      return;
    }
  } catch (const std::exception&) {
    // Absent or unreadable: fall through to /proc/cpuinfo.
  }
  static const std::regex nominal(R"(@\s*([0-9]+(\.[0-9]+)?)\s*GHz)");
  static const std::regex mhz(R"(^cpu MHz\s*:\s*([0-9]+(\.[0-9]+)?))");
  double current_mhz = 0;
  for (std::string line; std::getline(cpuinfo, line);) {
    std::smatch m;
    if (line.rfind("model name", 0) == 0 && std::regex_search(line, m, nominal)) {
      peak.clock_hz = std::stod(m[1].str()) * 1e9;
      peak.clock_source = "nominal clock in /proc/cpuinfo model name";
      return;  // the first processor's line; the nominal clock beats "cpu MHz"
    }
    if (current_mhz == 0 && std::regex_search(line, m, mhz)) current_mhz = std::stod(m[1].str());
  }
  if (current_mhz > 0) {
    peak.clock_hz = current_mhz * 1e6;
    peak.clock_source = "/proc/cpuinfo cpu MHz";
    return;
  }
  peak.clock_source = "clock unknown: no cpufreq, no clock in /proc/cpuinfo";
}

HardwarePeak hardware_peak(int cores) {
  HardwarePeak peak;
  peak.cores = cores;
  peak.core_name = kernels::blas_core_name();
  peak.flops_per_cycle = kernels::fp32_flops_per_cycle(peak.core_name);
  std::ifstream cpuinfo("/proc/cpuinfo");
  read_clock(peak, read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), cpuinfo);
  return peak;
}

HardwarePeak hardware_peak_bf16(int cores) {
  HardwarePeak peak;
  peak.cores = cores;
  peak.core_name = kernels::bf16_gemm_description() + ", bf16";
  peak.flops_per_cycle = kernels::bf16_flops_per_cycle();
  std::ifstream cpuinfo("/proc/cpuinfo");
  read_clock(peak, read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), cpuinfo);
  return peak;
}

std::string HardwarePeak::describe() const {
  std::string s = std::to_string(cores) + (cores == 1 ? " core x " : " cores x ");
  s += flops_per_cycle > 0 ? std::to_string(flops_per_cycle) + " FLOP/cycle (" + core_name + ")"
                           : "unknown FLOP/cycle (OpenBLAS kernels '" + core_name + "')";
  s += clock_hz > 0 ? " x " + fixed(clock_hz / 1e9, 2) + " GHz (" + clock_source + ")" : " x " + clock_source;
  s += flops() > 0 ? " = " + fixed(flops() / 1e9, 1) + " GFLOP/s" : ": peak unknown, mfu null";
  return s;
}

}  // namespace memtrain::train
