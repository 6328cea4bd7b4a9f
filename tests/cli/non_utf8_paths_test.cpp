// Note [Paths that are not UTF-8]: a run directory, config file or corpus named with bytes that
// are not UTF-8 trains, resumes and evaluates; the JSON files that name them carry U+FFFD for
// each such byte.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;
using testing::slurp;

const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD in UTF-8

TEST(NonUtf8Paths, ARunDirectoryNamedInLatin1TrainsResumesAndEvaluates) {
  Scratch s;
  s.write("c\xe9.yaml", std::string(kTinyMockYaml) + "checkpoint:\n  interval: 2\n");
  const std::string run = "run-\xe9t\xe9";  // "run-été" in Latin-1
  const std::string args = "train --config 'c\xe9.yaml' --run-dir '" + run + "' --set training.lr_decay_steps=4";
  const auto first = s.memtrain(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto meta = nlohmann::json::parse(slurp(s.path(run + "/run.json")));
  EXPECT_EQ(meta.at("config_path"), "c" + kReplacement + ".yaml");

  const auto second = s.memtrain(args + " --set training.max_steps=4");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::string metrics = slurp(s.path(run + "/metrics.jsonl"));
  EXPECT_TRUE(contains(metrics, "{\"resumed_from\":2,\"checkpoint\":\"run-" + kReplacement + "t" + kReplacement +
                                    "/checkpoints/step-00000002\""))
      << metrics;

  const auto eval = s.memtrain("eval --checkpoint '" + run + "/checkpoints/step-00000004'");
  EXPECT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_TRUE(contains(eval.out, "\"step\":4")) << eval.out;
}

}  // namespace
}  // namespace memtrain::cli
