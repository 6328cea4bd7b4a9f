// validate_cuda_support (Note [What a GPU run trains so far]): a GPU run with a value it does
// not train yet is refused before anything is allocated, naming the key, where it was set and
// what is expected; the defaults, full recompute and the CPU are accepted. Every refusal here
// runs on a machine without a GPU: the check reads the config only.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/config/config_loader.hpp"
#include "runtime/config/config_validate.hpp"
#include "runtime/core/errors.hpp"
#include "tests/config/config_test_files.hpp"
#include "tests/test_names.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::contains;
using testing::kMinimalYaml;

std::string refusal(const Config& c) {
  try {
    validate_cuda_support(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaSupport, TheDefaultsFullRecomputeAndTheCpuAreAccepted) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  EXPECT_EQ(refusal(load_config(path, {"device=cuda"})), "");
  EXPECT_EQ(refusal(load_config(path, {"device=cuda:1", "memory.recompute=full", "memory.attention=flash"})), "");
  EXPECT_EQ(refusal(load_config(path, {"device=cuda", "precision.dtype=bf16"})), "");
  EXPECT_EQ(refusal(load_config(path, {"device=cuda", "precision.dtype=fp16"})), "");
  // On the CPU nothing here is refused.
  EXPECT_EQ(refusal(load_config(path, {"precision.dtype=bf16", "memory.recompute=selective"})), "");
}

TEST(CudaSupport, EachValueAGpuRunDoesNotTrainYetIsNamedWithWhereItWasSet) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"parallel.tensor_model_parallel_size=2",
       "parallel.tensor_model_parallel_size = 2: training on cuda has no tensor parallelism yet"},
      {"parallel.zero_stage=1", "parallel.zero_stage = 1: training on cuda has no ZeRO-1 yet"},
      {"compression.method=powersgd", "compression.method = powersgd: training on cuda has no gradient compression"},
      {"memory.recompute=selective", "memory.recompute = selective: training on cuda has no CUDA kernel"},
      {"checkpoint.async=true", "checkpoint.async = true: training on cuda writes checkpoints synchronously"},
  };
  // Issue 44, section 6: a GPU's memory goes through its own ledger, so these are accepted.
  EXPECT_EQ(refusal(load_config(path, {"device=cuda", "memory.limit=1GiB"})), "");
  EXPECT_EQ(refusal(load_config(path, {"device=cuda", "memory.capacity=2GiB", "memory.reservation=1GiB"})), "");
  // Flash attention on a GPU holds a head's row in registers: heads of at most 128.
  EXPECT_EQ(refusal(load_config(path, {"device=cuda", "memory.attention=flash", "model.hidden_size=512",
                                       "model.num_attention_heads=4"})),
            "");
  const std::string wide = refusal(load_config(
      path, {"device=cuda", "memory.attention=flash", "model.hidden_size=512", "model.num_attention_heads=2"}));
  EXPECT_TRUE(contains(wide, "memory.attention = flash: training on cuda has no flash attention for heads of 256"))
      << wide;
  const std::string what =
      refusal(load_config(path, {"device=cuda", "precision.dtype=bf16", "precision.fp32_grad_accumulation=true"}));
  EXPECT_TRUE(contains(what, "precision.fp32_grad_accumulation = true: training on cuda has no update")) << what;
  for (const auto& [set, message] : cases) {
    const std::string what = refusal(load_config(path, {"device=cuda", set}));
    EXPECT_TRUE(contains(what, "--set " + set)) << set << ": " << what;
    EXPECT_TRUE(contains(what, message)) << set << ": " << what;
    EXPECT_TRUE(contains(what, "; expected ")) << set << ": " << what;
  }
}

}  // namespace
}  // namespace memtrain::train
