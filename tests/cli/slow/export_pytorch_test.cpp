// Issue 13's test 8: `memtrain export-hf` output read by an independent implementation (the
// fixture generator's PyTorch BertForMaskedLM, Debian's /usr/bin/python3 with python3-torch:
// scripts/test.sh --slow installs it) gives memtrain's `eval --checkpoint` loss within 1e-5
// and the same argmax, on ids with padding and two token types, at tp = 1 and merged from
// tp = 2; an fp16 model within fp16's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::Scratch;

std::string config(const Scratch& s, const std::string& name, const std::string& dtype, int tp) {
  return s.write(
      name,
      "model:\n  vocab_size: 64\n  hidden_size: 32\n  num_hidden_layers: 2\n  num_attention_heads: 4\n"
      "  intermediate_size: 64\n  max_position_embeddings: 16\n"
      "data:\n  mock: true\n  seq_length: 16\n"
      "training:\n  micro_batch_size: 2\n  global_batch_size: 2\n  max_steps: 4\n  lr: 0.01\n  eval_steps: 1\n"
      "checkpoint:\n  interval: 4\nprecision:\n  dtype: " +
          dtype + "\nparallel:\n  tensor_model_parallel_size: " + std::to_string(tp) + "\n");
}

TEST(ExportPyTorch, AnIndependentReaderOfTheExportGivesMemtrainsEvalLoss) {
  Scratch s;
  s.write("in.json", R"({"input_ids": [[2,17,33,5,60,9,1,0],[4,4,50,12,3,0,0,0]],
    "labels": [[-100,17,-100,-100,61,-100,3,-100],[8,-100,-100,12,-100,-100,-100,-100]],
    "attention_mask": [[1,1,1,1,1,1,1,1],[1,1,1,1,1,0,0,0]],
    "token_type_ids": [[0,0,0,0,1,1,1,1],[0,0,1,1,1,1,1,1]]})");
  for (const auto& [dtype, tp] : {std::pair<std::string, int>{"fp32", 1}, {"fp16", 1}, {"fp32", 2}}) {
    const std::string run = dtype + "-tp" + std::to_string(tp);
    const std::string cmd = "train --config " + config(s, run + ".yaml", dtype, tp) + " --run-dir " + run;
    ASSERT_EQ((tp == 1 ? s.memtrain(cmd) : s.mpirun(tp, cmd)).exit_code, 0) << run;
    const std::string ckpt = run + "/checkpoints/step-00000004";
    ASSERT_EQ(s.memtrain("export-hf " + ckpt + " " + run + "-hf").exit_code, 0) << run;
    const auto ours = s.memtrain("eval --checkpoint " + ckpt + " --input in.json");
    ASSERT_EQ(ours.exit_code, 0) << ours.err;
    const auto ref = s.shell("/usr/bin/python3 '" + std::string(MEMTRAIN_SOURCE_DIR) +
                             "/tests/fixtures/hf_reference_eval.py' " + run + "-hf in.json");
    ASSERT_EQ(ref.exit_code, 0) << ref.err;
    const auto a = nlohmann::json::parse(ours.out), b = nlohmann::json::parse(ref.out);
    // fp32: float rounding of memtrain's forward against float64. fp16 computes in fp16
    // (unit roundoff 2^-11 = 4.9e-4), so its loss is held to that instead.
    const double tolerance = dtype == "fp32" ? 1e-5 : 1e-3;
    EXPECT_NEAR(a["loss"].get<double>(), b["loss"].get<double>(), tolerance * b["loss"].get<double>()) << run;
    if (dtype == "fp32") {
      EXPECT_EQ(a["argmax"], b["argmax"]) << run;
    }
  }
}

}  // namespace
}  // namespace memtrain::cli
