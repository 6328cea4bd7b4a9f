#include "runtime/train/bf16_gemm_choice.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"

namespace memtrain::train {
namespace {

const char* path_name(bool native) { return native ? "oneDNN bf16" : "fp32 sgemm"; }

// "41.2", or three significant digits below 10 GFLOP/s ("0.0123": a tiny model's GEMMs).
std::string gflops(double flops) {
  char s[32];
  std::snprintf(s, sizeof s, flops >= 10e9 ? "%.1f" : "%.3g", flops / 1e9);
  return s;
}

bool known_path(const std::string& p) { return p == "native" || p == "fp32"; }

}  // namespace

Bf16GemmPlan plan_bf16_gemm(const Bf16GemmInputs& in) {
  if (in.configured != "auto" && !known_path(in.configured)) {
    throw std::invalid_argument("plan_bf16_gemm: precision.bf16_gemm = " + in.configured +
                                "; expected auto, native or fp32");
  }
  if (!in.recorded.empty() && !known_path(in.recorded)) {
    throw std::invalid_argument("plan_bf16_gemm: recorded bf16_gemm = " + in.recorded + "; expected native or fp32");
  }
  if (!in.bf16_on_cpu) return {Bf16GemmBasis::not_applicable, false};
  // native without dot products: training refuses it (validate_compute_host); elsewhere it
  // falls back, as make_pass does.
  if (in.configured != "auto") return {Bf16GemmBasis::config, in.configured == "native" && in.dot_products};
  if (!in.dot_products) return {Bf16GemmBasis::no_dot_products, false};
  if (in.dry_run) return {Bf16GemmBasis::dry_run, true};
  if (in.resuming && in.recorded.empty()) return {Bf16GemmBasis::old_checkpoint, true};
  if (in.resuming) return {Bf16GemmBasis::checkpoint, in.recorded == "native"};
  return {Bf16GemmBasis::measurement, false};
}

std::optional<bool> forced_bf16_gemm_preference() {
  const char* v = std::getenv("MEMTRAIN_BF16_GEMM_PREFER");
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::string s = v;
  if (s == "native") return true;
  if (s == "fp32") return false;
  throw ConfigError("MEMTRAIN_BF16_GEMM_PREFER=" + printable(s, 40) + ": expected native or fp32");
}

bool prefers_native(const Bf16GemmSpeeds& speeds, std::optional<bool> forced) {
  if (forced) return *forced;
  return speeds.native_flops >= speeds.fp32_flops;
}

std::string Bf16GemmChoice::recorded_path() const {
  if (basis == Bf16GemmBasis::not_applicable) return "";
  return native ? "native" : "fp32";
}

std::string bf16_gemm_header_line(const Bf16GemmChoice& c) {
  const std::string head = "memtrain: bf16 GEMMs: ";
  switch (c.basis) {
    case Bf16GemmBasis::measurement: {
      const double chosen = c.native ? c.speeds->native_flops : c.speeds->fp32_flops;
      const double other = c.native ? c.speeds->fp32_flops : c.speeds->native_flops;
      std::string line = head + "auto chose " + path_name(c.native) + ": " + gflops(chosen) + " GFLOP/s against " +
                         path_name(!c.native) + " " + gflops(other) +
                         " GFLOP/s on the step's shapes (forward GEMMs of one micro-batch, median of 3, rank 0)";
      if (c.forced) line += "; MEMTRAIN_BF16_GEMM_PREFER=" + std::string(*c.forced ? "native" : "fp32") + " decided";
      return line + "\n";
    }
    case Bf16GemmBasis::checkpoint:
      return head + "auto keeps the checkpoint's " + path_name(c.native) +
             " (meta.json bf16_gemm), not measured: a resume continues on its run's path\n";
    case Bf16GemmBasis::old_checkpoint:
      return head + "auto keeps " + path_name(c.native) +
             ", not measured: the checkpoint records no bf16_gemm (written before auto measured), and auto "
             "chose oneDNN wherever the CPU has bf16 dot products then\n";
    case Bf16GemmBasis::dry_run:
      return head + "auto not measured in a dry run; assumed " + path_name(c.native) +
             " (the path moves no allocation)\n";
    case Bf16GemmBasis::config:
      if (c.overridden.empty()) return "";
      return head + "precision.bf16_gemm: " + (c.native ? "native" : "fp32") + " overrides the checkpoint's " +
             path_name(c.overridden == "native") + ": the run continues within rounding, not bitwise\n";
    case Bf16GemmBasis::not_applicable:
    case Bf16GemmBasis::no_dot_products:
      return "";
  }
  return "";
}

std::string bf16_gemm_summary(const Bf16GemmChoice& c) {
  if (c.basis == Bf16GemmBasis::not_applicable) return "";
  std::string s = std::string(path_name(c.native)) + " GEMMs";
  switch (c.basis) {
    case Bf16GemmBasis::measurement:
      return s + " (auto: measured " + gflops(c.native ? c.speeds->native_flops : c.speeds->fp32_flops) + " against " +
             gflops(c.native ? c.speeds->fp32_flops : c.speeds->native_flops) + " GFLOP/s)";
    case Bf16GemmBasis::checkpoint:
    case Bf16GemmBasis::old_checkpoint:
      return s + " (auto: the checkpoint's)";
    case Bf16GemmBasis::dry_run:
      return s + " (auto: assumed in a dry run)";
    case Bf16GemmBasis::config:
      return s + " (precision.bf16_gemm)";
    case Bf16GemmBasis::no_dot_products:
      return s + " (auto: no bf16 dot products here)";
    case Bf16GemmBasis::not_applicable:
      break;
  }
  return s;
}

}  // namespace memtrain::train
