#include "runtime/config/model_options_from_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/matmul_bf16.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

namespace {

[[noreturn]] void bad(const std::string& key, const std::string& value, const std::string& expected) {
  throw ConfigError(key + " = " + value + ": not a model option; expected " + expected);
}

}  // namespace

core::DType compute_dtype(const std::string& precision_dtype) {
  if (precision_dtype == "fp32") return core::DType::f32;
  if (precision_dtype == "fp16") return core::DType::f16;
  if (precision_dtype == "bf16") return core::DType::bf16;
  bad("precision.dtype", precision_dtype, "one of fp32, fp16, bf16");
}

models::ModelOptions model_options(const Config& config) {
  models::ModelOptions o;
  o.compute_dtype = compute_dtype(config.precision.dtype);
  o.fp32_grad_accumulation = config.precision.fp32_grad_accumulation;
  const std::string& gemm = config.precision.bf16_gemm;
  if (gemm != "auto" && gemm != "native" && gemm != "fp32") bad("precision.bf16_gemm", gemm, "auto, native or fp32");
  // native on a CPU without bf16 dot products is refused for a training run
  // (validate_compute_host); eval, export-hf and plans of such a run fall back as auto does.
  // On a GPU the bf16 GEMMs are cuBLASLt's on tensor cores (every GPU memtrain builds for, sm_80
  // and later, has them); on the CPU oneDNN's where the CPU has bf16 dot products.
  o.native_bf16_gemm =
      o.compute_dtype == core::DType::bf16 && gemm != "fp32" && (config.device != "cpu" || kernels::bf16_gemm_native());
  // ZeRO-1's optimizer keeps the masters of its shard (runtime/train/zero_adamw.hpp).
  o.master_weights = config.parallel.zero_stage == 0;

  const auto& m = config.memory;
  if (m.recompute == "none") {
    o.recompute = models::Recompute::none;
  } else if (m.recompute == "selective") {
    o.recompute = models::Recompute::selective;
  } else if (m.recompute == "full") {
    o.recompute = models::Recompute::full;
  } else if (m.recompute == "auto") {
    bad("memory.recompute", m.recompute,
        "none, selective or full: auto is resolved by a dry-run search (recompute_auto.hpp) before the model "
        "is built");
  } else {
    bad("memory.recompute", m.recompute, "one of none, selective, full");
  }

  if (m.recompute_method == "uniform") {
    o.recompute_method = models::RecomputeMethod::uniform;
  } else if (m.recompute_method == "block") {
    o.recompute_method = models::RecomputeMethod::block;
  } else {
    bad("memory.recompute_method", m.recompute_method, "uniform or block");
  }
  if (m.recompute_num_layers < 0) {
    bad("memory.recompute_num_layers", std::to_string(m.recompute_num_layers), "an integer >= 0");
  }
  o.recompute_num_layers = m.recompute_num_layers;

  if (m.attention == "standard") {
    o.attention = models::AttentionImpl::standard;
  } else if (m.attention == "flash") {
    o.attention = models::AttentionImpl::flash;
  } else {
    bad("memory.attention", m.attention, "standard or flash");
  }
  o.gradient_bucket_bytes =
      std::max<std::int64_t>(1, std::llround(config.parallel.bucket_size_mb * static_cast<double>(1 << 20)));
  return o;
}

models::TensorParallel tensor_parallel(const Config& config, comms::Communicator* tp_group) {
  return models::TensorParallel{tp_group, config.parallel.make_vocab_size_divisible_by,
                                config.parallel.sequence_parallel};
}

}  // namespace memtrain::train
