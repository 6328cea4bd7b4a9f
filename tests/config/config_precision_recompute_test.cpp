// The precision.* and memory.recompute/budget/attention keys of issue 5: accepted values load
// (from a file, nested precision.loss_scale mapping included, and through --set), every bad
// value is one ConfigError naming the file:line, the key, the value and what is accepted. The
// expected line numbers are those of the YAML text each test writes.
#include <gtest/gtest.h>

#include "runtime/core/errors.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "runtime/config/config_validate.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "tests/test_names.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::contains;
using testing::kMinimalYaml;
using testing::load_error;

// kMinimalYaml is 7 lines; a section appended starts at line 8, its first key is line 9.
std::string with(const std::string& extra) { return std::string(kMinimalYaml) + extra; }

TEST(PrecisionConfig, EveryKeyLoadsFromTheFileWithANestedLossScale) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", with("precision:\n"
                                                          "  dtype: fp16\n"
                                                          "  fp32_grad_accumulation: true\n"
                                                          "  loss_scale:\n"
                                                          "    initial_scale: 1024\n"
                                                          "    growth_factor: 4\n"
                                                          "    backoff_factor: 0.25\n"
                                                          "    growth_interval: 100\n"
                                                          "    hysteresis: 2\n"
                                                          "    min_loss_scale: 0.5\n"
                                                          "    max_skipped_steps_at_min: 3\n")),
                               {});
  EXPECT_EQ(c.precision.dtype, "fp16");
  EXPECT_TRUE(c.precision.fp32_grad_accumulation);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.initial_scale, 1024.0);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.growth_factor, 4.0);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.backoff_factor, 0.25);
  EXPECT_EQ(c.precision.loss_scale.growth_interval, 100);
  EXPECT_EQ(c.precision.loss_scale.hysteresis, 2);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.min_loss_scale, 0.5);
  EXPECT_EQ(c.precision.loss_scale.max_skipped_steps_at_min, 3);
}

// PyTorch GradScaler's documented defaults (init_scale 2^16, growth 2, backoff 0.5, interval 2000).
TEST(PrecisionConfig, DefaultsAreFp32AndGradScalersDefaults) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", kMinimalYaml), {});
  EXPECT_EQ(c.precision.dtype, "fp32");
  EXPECT_FALSE(c.precision.fp32_grad_accumulation);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.initial_scale, 65536.0);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.growth_factor, 2.0);
  EXPECT_DOUBLE_EQ(c.precision.loss_scale.backoff_factor, 0.5);
  EXPECT_EQ(c.precision.loss_scale.growth_interval, 2000);
  EXPECT_EQ(c.precision.loss_scale.hysteresis, 1);
  EXPECT_EQ(c.memory.recompute, "none");
  EXPECT_EQ(c.memory.attention, "standard");
}

TEST(PrecisionConfig, NestedKeysAreSetThroughSet) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", kMinimalYaml),
                               {"precision.dtype=bf16", "precision.loss_scale.growth_interval=7"});
  EXPECT_EQ(c.precision.dtype, "bf16");
  EXPECT_EQ(c.precision.loss_scale.growth_interval, 7);
  EXPECT_EQ(c.origin.at("precision.loss_scale.growth_interval"), "--set precision.loss_scale.growth_interval=7");
}

TEST(PrecisionConfig, UnknownDtypeListsTheAcceptedOnes) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("precision:\n  dtype: fp8\n"));
  EXPECT_TRUE(
      contains(load_error(path), path + ":9: precision.dtype = fp8: unknown value; expected one of fp32, fp16, bf16"));
}

struct BadValue {
  std::string yaml;     // appended to kMinimalYaml
  std::string message;  // expected part, after "<path>:"
};

class BadPrecisionOrRecompute : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadPrecisionOrRecompute, IsOneMessageWithFileLineKeyAndExpectation) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with(GetParam().yaml));
  EXPECT_TRUE(contains(load_error(path), path + ":" + GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    ConfigErrors, BadPrecisionOrRecompute,
    ::testing::Values(
        BadValue{"precision:\n  loss_scale:\n    growth_factor: 0.5\n",
                 "10: precision.loss_scale.growth_factor = 0.5: out of range; expected a number > 1"},
        BadValue{"precision:\n  loss_scale:\n    growth_factor: 1\n",
                 "10: precision.loss_scale.growth_factor = 1: out of range; expected a number > 1"},
        BadValue{"precision:\n  loss_scale:\n    backoff_factor: 1\n",
                 "10: precision.loss_scale.backoff_factor = 1: out of range; expected a number in (0, 1)"},
        BadValue{"precision:\n  loss_scale:\n    backoff_factor: 0\n",
                 "10: precision.loss_scale.backoff_factor = 0: out of range; expected a number in (0, 1)"},
        BadValue{"precision:\n  loss_scale:\n    initial_scale: 0\n",
                 "10: precision.loss_scale.initial_scale = 0: out of range; expected a number in [1.18e-38, 3.40e38] "
                 "(a normal float)"},
        // 1 / 1e-40 overflows float: the unscaled gradients would become NaN.
        BadValue{"precision:\n  loss_scale:\n    initial_scale: 1e-40\n    min_loss_scale: 1e-40\n",
                 "10: precision.loss_scale.initial_scale = 1e-40: out of range; expected a number in [1.18e-38, "
                 "3.40e38] (a normal float)"},
        BadValue{"precision:\n  loss_scale:\n    initial_scale: 1e300\n",
                 "10: precision.loss_scale.initial_scale = 1e300: out of range; expected a number in [1.18e-38, "
                 "3.40e38] (a normal float)"},
        BadValue{"precision:\n  loss_scale:\n    initial_scale: .inf\n",
                 "10: precision.loss_scale.initial_scale = .inf: "},
        BadValue{"precision:\n  loss_scale:\n    min_loss_scale: -1\n",
                 "10: precision.loss_scale.min_loss_scale = -1: out of range; expected a number in [1.18e-38, 3.40e38] "
                 "(a normal float)"},
        BadValue{"precision:\n  loss_scale:\n    growth_interval: 0\n",
                 "10: precision.loss_scale.growth_interval = 0: out of range; expected an integer in [1, "},
        BadValue{"precision:\n  loss_scale:\n    hysteresis: 0\n",
                 "10: precision.loss_scale.hysteresis = 0: out of range; expected an integer in [1, "},
        BadValue{"precision:\n  loss_scale:\n    max_skipped_steps_at_min: 0\n",
                 "10: precision.loss_scale.max_skipped_steps_at_min = 0: out of range; expected an integer in [1, "},
        BadValue{"precision:\n  loss_scale: 1024\n",
                 "9: precision.loss_scale = 1024: not a mapping; expected a mapping of precision.loss_scale.* keys"},
        BadValue{"precision:\n  loss_scale:\n    initial: 8\n",
                 "10: precision.loss_scale.initial = 8: unknown key (did you mean "
                 "precision.loss_scale.initial_scale?)"},
        BadValue{"precision:\n  loss_scale:\n    hysteresis: 2\n    hysteresis: 3\n",
                 "11: precision.loss_scale.hysteresis = 3: duplicate key (first at line 10)"},
        BadValue{"precision:\n  fp32_grad_accumulation: yes please\n",
                 "9: precision.fp32_grad_accumulation = yes please: "},
        BadValue{"precision:\n  loss_scale:\n    initial_scale: 2\n    min_loss_scale: 8\n",
                 "11: precision.loss_scale.min_loss_scale = 8: exceeds precision.loss_scale.initial_scale = 2 "},
        BadValue{"memory:\n  recompute: true\n",
                 "9: memory.recompute = true: unknown value; expected one of none, selective, full, auto"},
        BadValue{"memory:\n  recompute: full\n  recompute_method: every\n",
                 "10: memory.recompute_method = every: unknown value; expected one of uniform, block"},
        BadValue{"memory:\n  recompute: full\n  recompute_num_layers: -1\n",
                 "10: memory.recompute_num_layers = -1: out of range; expected an integer in [0, 1024]"},
        // kMinimalYaml keeps the default 12 layers.
        BadValue{"memory:\n  recompute: full\n  recompute_num_layers: 13\n",
                 "10: memory.recompute_num_layers = 13: exceeds model.num_hidden_layers = 12 (default); "
                 "expected an integer in [0, 12]"},
        BadValue{
            "memory:\n  recompute_num_layers: 2\n",
            "9: memory.recompute_num_layers = 2: has no effect with memory.recompute = none (default); expected 0, "
            "or memory.recompute selective or full"},
        BadValue{"memory:\n  recompute: auto\n", "9: memory.recompute = auto: needs memory.budget"},
        BadValue{"memory:\n  budget: 30GiB\n",
                 "9: memory.budget = 32212254720: has no effect with memory.recompute = none (default); "
                 "expected 0, or memory.recompute = auto"},
        BadValue{"memory:\n  recompute: auto\n  budget: lots\n",
                 "10: memory.budget = lots: not a size; expected a size such as 30GiB"},
        BadValue{"memory:\n  attention: fast\n",
                 "9: memory.attention = fast: unknown value; expected one of standard, flash"}),
    [](const ::testing::TestParamInfo<BadValue>& info) {
      return memtrain::testing::case_name(info.param.message.substr(info.param.message.find(": ") + 2), info.index);
    });

TEST(RecomputeConfig, RecomputeCountAboveALayerCountSetElsewhereNamesBothPlaces) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("memory:\n  recompute: full\n  recompute_num_layers: 4\n"));
  EXPECT_TRUE(contains(load_error(path, {"model.num_hidden_layers=2"}),
                       path + ":10: memory.recompute_num_layers = 4: exceeds model.num_hidden_layers = 2 "
                              "(--set model.num_hidden_layers=2); expected an integer in [0, 2] (0 = every layer)"));
}

TEST(RecomputeConfig, AutoWithABudgetLoads) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", with("memory:\n  recompute: auto\n  budget: 30GiB\n")), {});
  EXPECT_EQ(c.memory.recompute, "auto");
  EXPECT_EQ(c.memory.budget, std::size_t{30} << 30);
}

TEST(RecomputeConfig, ASectionNameGivenToSetIsRefused) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {"precision.loss_scale=5"}),
                       "--set precision.loss_scale=5: precision.loss_scale is a section"));
}

TEST(ModelOptionsFromConfig, MapsEveryKeyOneToOne) {
  ConfigFiles files;
  const Config c = load_config(files.write("c.yaml", with("precision:\n  dtype: bf16\n  fp32_grad_accumulation: true\n"
                                                          "memory:\n  recompute: full\n  recompute_method: block\n"
                                                          "  recompute_num_layers: 3\n  attention: flash\n")),
                               {});
  const models::ModelOptions o = model_options(c);
  EXPECT_EQ(o.compute_dtype, core::DType::bf16);
  EXPECT_TRUE(o.fp32_grad_accumulation);
  EXPECT_EQ(o.recompute, models::Recompute::full);
  EXPECT_EQ(o.recompute_method, models::RecomputeMethod::block);
  EXPECT_EQ(o.recompute_num_layers, 3);
  EXPECT_EQ(o.attention, models::AttentionImpl::flash);
}

TEST(ModelOptionsFromConfig, DefaultsAreTheFp32ModelOfBefore) {
  ConfigFiles files;
  const models::ModelOptions o = model_options(load_config(files.write("c.yaml", kMinimalYaml), {}));
  EXPECT_EQ(o.compute_dtype, core::DType::f32);
  EXPECT_FALSE(o.fp32_grad_accumulation);
  EXPECT_EQ(o.recompute, models::Recompute::none);
  EXPECT_EQ(o.attention, models::AttentionImpl::standard);
  EXPECT_EQ(compute_dtype("fp16"), core::DType::f16);
}

// precision.bf16_gemm: auto follows the CPU (kernels::bf16_gemm_native, oneDNN's ISA), fp32
// never uses bf16 GEMMs, and neither does anything outside bf16 storage.
TEST(ModelOptionsFromConfig, Bf16GemmAutoFollowsTheCpuAndOnlyActsInBf16) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  EXPECT_EQ(load_config(path, {}).precision.bf16_gemm, "auto");
  EXPECT_EQ(model_options(load_config(path, {"precision.dtype=bf16"})).native_bf16_gemm, kernels::bf16_gemm_native());
  EXPECT_FALSE(model_options(load_config(path, {"precision.dtype=bf16", "precision.bf16_gemm=fp32"})).native_bf16_gemm);
  EXPECT_FALSE(model_options(load_config(path, {"precision.dtype=fp16"})).native_bf16_gemm);
  EXPECT_FALSE(model_options(load_config(path, {})).native_bf16_gemm);
  // native: used where the CPU has them; elsewhere the loader accepts it (plans, eval and export
  // of such a run need no bf16 dot products) and only a training run is refused.
  const Config native = load_config(path, {"precision.dtype=bf16", "precision.bf16_gemm=native"});
  EXPECT_EQ(model_options(native).native_bf16_gemm, kernels::bf16_gemm_native());
  if (kernels::bf16_gemm_native()) {
    EXPECT_NO_THROW(validate_compute_host(native));
  } else {
    try {
      validate_compute_host(native);
      ADD_FAILURE() << "native accepted for training without bf16 dot products";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(contains(e.what(), "precision.bf16_gemm = native: oneDNN finds no bf16 dot products")) << e.what();
    }
  }
  // Outside bf16 storage the key does nothing, so no machine refuses it.
  EXPECT_NO_THROW(validate_compute_host(load_config(path, {"precision.dtype=fp16", "precision.bf16_gemm=native"})));
}

TEST(PrecisionConfig, UnknownBf16GemmListsTheAcceptedOnes) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("precision:\n  bf16_gemm: onednn\n"));
  EXPECT_TRUE(contains(load_error(path),
                       path + ":9: precision.bf16_gemm = onednn: unknown value; expected one of auto, native, fp32"))
      << load_error(path);
}

TEST(ModelOptionsFromConfig, UnresolvedAutoIsRefused) {
  Config c;
  c.memory.recompute = "auto";
  try {
    model_options(c);
    FAIL() << "auto was mapped";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "memory.recompute = auto: not a model option; expected none, selective or full"));
  }
}

}  // namespace
}  // namespace memtrain::train
