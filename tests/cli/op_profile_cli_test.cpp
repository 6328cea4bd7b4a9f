// `memtrain train --profile-ops` as a user runs it (Note [Profiling ops in the step]): the
// step breakdown of the steps after the first, whose GEMM calls and FLOPs are those the model's
// shapes give in closed form, and whose AdamW row moves 28 bytes per parameter.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;
using testing::slurp;

TEST(OpProfileCli, TheEncoderGemmsAreTheModelsClosedForm) {
  Scratch s;
  std::string yaml = kTinyMockYaml;
  yaml.replace(yaml.find("  max_steps: 2\n"), 14, "  max_steps: 3\n");
  const auto r = s.memtrain("train --config " + s.write("c.yaml", yaml) + " --run-dir run --profile-ops");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "op profile of 2 steps")) << r.out;
  const auto j = nlohmann::json::parse(slurp(s.path("run/op_profile.json")));
  EXPECT_EQ(j["steps"], 2);
  EXPECT_LE(j["op_seconds"].get<double>(), j["step_seconds"].get<double>());
  std::map<std::pair<std::string, std::string>, nlohmann::json> rows;
  for (const auto& row : j["ops"]) rows[{row["op"], row["shape"]}] = row;

  // kTinyMockYaml: one layer, C 32, I 64, B 2 x T 16 = 32 tokens in one micro-batch. A layer
  // has four [C, C] projections (Q, K, V, attention output) and the [C, I], [I, C] MLP pair;
  // 2 N in out FLOPs each forward, twice that backward (dinp and dweight).
  const double N = 32, C = 32, I = 64, steps = 2;
  const struct {
    const char* shape;
    double per_step, in, out;
  } gemms[] = {
      {"[32, 32] x [32, 32]^T", 4, C, C}, {"[32, 32] x [64, 32]^T", 1, C, I}, {"[32, 64] x [32, 64]^T", 1, I, C}};
  for (const auto& g : gemms) {
    const auto& fwd = rows[{"gemm.forward", g.shape}];
    const auto& bwd = rows[{"gemm.backward", g.shape}];
    ASSERT_FALSE(fwd.is_null()) << g.shape;
    ASSERT_FALSE(bwd.is_null()) << g.shape;
    EXPECT_EQ(fwd["calls"].get<double>(), g.per_step * steps) << g.shape;
    EXPECT_EQ(fwd["flops"].get<double>(), g.per_step * steps * 2 * N * g.in * g.out) << g.shape;
    EXPECT_EQ(bwd["flops"].get<double>(), g.per_step * steps * 4 * N * g.in * g.out) << g.shape;
  }
  // Attention over [2, 4, 16, 16]: 4 B T^2 C forward.
  const auto& attention = rows[{"attention.forward", "[2, 4, 16, 16] heads of 8"}];
  ASSERT_FALSE(attention.is_null()) << j.dump(1);
  EXPECT_EQ(attention["flops"].get<double>(), steps * 4 * 2 * 16 * 16 * C);
  // The parameters of BertForMaskedLM at V 64, P 16, two token types.
  const double V = 64, P = 16;
  const double embeddings = V * C + P * C + 2 * C + 2 * C;
  const double layer = 4 * (C * C + C) + 2 * C + (C * I + I) + (I * C + C) + 2 * C;
  const double head = C * C + C + 2 * C + V;
  std::string params = "[";
  params += std::to_string(static_cast<long>(embeddings + layer + head));
  params += "] parameters";
  const auto& adamw = rows[{"optimizer.step", params}];
  ASSERT_FALSE(adamw.is_null()) << j.dump(1);
  EXPECT_EQ(adamw["calls"], 2);
  EXPECT_EQ(adamw["bytes"].get<double>(), steps * 28 * (embeddings + layer + head));
}

TEST(OpProfileCli, ADryRunHasNoOpsToTime) {
  Scratch s;
  const auto r =
      s.memtrain("train --config " + s.write("c.yaml", kTinyMockYaml) + " --run-dir run --dry-run --profile-ops");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--profile-ops times the ops' math, and --dry-run does none")) << r.err;
  EXPECT_FALSE(fs::exists(s.path("run")));
}

}  // namespace
}  // namespace memtrain::cli
