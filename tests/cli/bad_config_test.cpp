// Each bad input of issue 2 through the real binary: exit code 2, one "memtrain: config error:"
// line naming file, line, key and what was expected, and no run directory left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "tests/cli/run_memtrain.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "memory/cuda_resource.hpp"
#endif

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;

// Trains `yaml` with a --run-dir and checks the failure: exit 2, the message, and that the run
// directory was never created.
void expect_config_error(const std::string& yaml, const std::string& message, const std::string& extra = "",
                         const std::string& env = "") {
  Scratch s;
  s.write("exp.yaml", yaml);
  const auto r = s.memtrain("train --config exp.yaml --run-dir run " + extra, env);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: " + message));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("run"))) << "a failed validation left a run directory";
}

TEST(BadConfig, MissingFile) {
  Scratch s;
  const auto r = s.memtrain("train --config missing.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrain: config error: missing.yaml: config file not found; expected a YAML file such as "
            "configs/tiny.yaml\n");
}

TEST(BadConfig, EmptyFileDoesNotTrainDefaults) {
  expect_config_error("# nothing here\n",
                      "exp.yaml: config file is empty; expected a YAML mapping with sections model, data");
}

TEST(BadConfig, DevNullIsNotAConfig) {
  Scratch s;
  const auto r = s.memtrain("train --config /dev/null --run-dir run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrain: config error: /dev/null: is not a regular file (a pipe, device or special file); "
            "expected a YAML file such as configs/tiny.yaml\n");
  EXPECT_FALSE(std::filesystem::exists(s.path("run")));
}

TEST(BadConfig, SecondDocumentIsRejected) {
  expect_config_error(std::string(kTinyMockYaml) + "---\ndata:\n  mock: false\n",
                      "exp.yaml:17: a second YAML document; expected one document per config file");
}

TEST(BadConfig, SetWithUnknownSection) {
  expect_config_error(kTinyMockYaml, "--set frob.x=1: frob: unknown section; expected one of", "--set frob.x=1");
}

TEST(BadConfig, SetWithEmptyKey) {
  expect_config_error(kTinyMockYaml, "--set =: empty key; expected section.key=value", "--set =");
}

TEST(BadConfig, NotYaml) { expect_config_error("model: {hidden_size: 8\n", "exp.yaml:2: not valid YAML ("); }

TEST(BadConfig, UnknownKeySuggestsTheClosest) {
  expect_config_error(std::string(kTinyMockYaml) + "  lr_warmup: 5\n",
                      "exp.yaml:16: training.lr_warmup = 5: unknown key (did you mean training.warmup_steps?)");
  // A misspelt health check is a typo too, not a check that is not built.
  expect_config_error(std::string(kTinyMockYaml) + "health:\n  ecc_checks: true\n",
                      "exp.yaml:17: health.ecc_checks = true: unknown key (did you mean health.ecc_check?)");
}

TEST(BadConfig, WrongType) {
  expect_config_error(std::string(kTinyMockYaml) + "  max_steps_x: 1\n", "exp.yaml:16: training.max_steps_x");
  expect_config_error("model:\n  num_hidden_layers: two\ndata:\n  mock: true\n",
                      "exp.yaml:2: model.num_hidden_layers = two: not an integer; expected an integer in [1, 1024]");
}

TEST(BadConfig, OutOfRange) {
  expect_config_error("data:\n  mock: true\n  mlm_probability: 1.5\n",
                      "exp.yaml:3: data.mlm_probability = 1.5: out of range; expected a number in (0, 1)");
}

TEST(BadConfig, HiddenSizeNotDivisibleByHeads) {
  expect_config_error("model:\n  hidden_size: 100\n  num_attention_heads: 3\ndata:\n  mock: true\n",
                      "exp.yaml:3: model.num_attention_heads = 3: does not divide model.hidden_size = 100 "
                      "(exp.yaml:2); expected a divisor of 100");
}

TEST(BadConfig, SeqLengthAboveMaxPositionEmbeddings) {
  expect_config_error("model:\n  max_position_embeddings: 64\ndata:\n  mock: true\n  seq_length: 128\n",
                      "exp.yaml:5: data.seq_length = 128: exceeds model.max_position_embeddings = 64 (exp.yaml:2); "
                      "expected at most 64");
}

TEST(BadConfig, ZeroBatchSize) {
  expect_config_error("data:\n  mock: true\ntraining:\n  micro_batch_size: 0\n",
                      "exp.yaml:4: training.micro_batch_size = 0: out of range; expected an integer in [1, ");
}

TEST(BadConfig, MissingCorpus) {
  expect_config_error("data:\n  corpus: books/none.txt\n",
                      "exp.yaml:2: data.corpus = books/none.txt: no such file or directory");
}

// The corpus's own faults carry the line that set data.corpus, as a missing corpus does.
TEST(BadConfig, EmptyCorpusAndDirectoryWithoutTextNameTheLine) {
  Scratch s;
  s.write("empty.txt", "\n  \t\n");
  std::filesystem::create_directories(s.path("cdir/sub"));
  s.write("cdir/sub/notes.md", "text");
  const std::pair<std::string, std::string> cases[] = {
      {"empty.txt",
       "exp.yaml:2: data.corpus = empty.txt: is empty (no non-blank line); expected UTF-8 text to "
       "train on\n"},
      {"cdir",
       "exp.yaml:2: data.corpus = cdir: directory contains no .txt files; expected a directory of UTF-8 "
       ".txt files\n"}};
  for (const auto& [corpus, message] : cases) {
    s.write("exp.yaml", "data:\n  corpus: " + corpus + "\n");
    for (const std::string verb : {"train --run-dir run", "data prepare"}) {
      const auto r = s.memtrain(verb + " --config exp.yaml");
      EXPECT_EQ(r.exit_code, 2) << verb;
      EXPECT_EQ(r.err, "memtrain: config error: " + message) << verb;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(s.path("run")));
}

// A data.cache_dir below a file is a wrong setting (exit 2), not a failing machine.
TEST(BadConfig, ACacheDirBelowAFileIsAConfigError) {
  Scratch s;
  s.write("a-file", "");
  s.write("corpus.txt", "in the beginning god created the heaven and the earth.\n");
  s.write("exp.yaml", "data:\n  corpus: corpus.txt\n  cache_dir: a-file/cache\n");
  const auto r = s.memtrain("data prepare --config exp.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: data.cache_dir = a-file/cache: cannot create it: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "(a part of the path is a file); expected a directory path")) << r.err;
}

// A list, mapping or empty string as a key names no key: said so, with no suggestion.
TEST(BadConfig, AKeyThatIsNotANonEmptyStringIsNamed) {
  expect_config_error("[a]: 1\n",
                      "exp.yaml:1: key [a] is a list; expected a non-empty string (a section or key name)\n");
  expect_config_error("training:\n  {a: 1}: 2\n",
                      "exp.yaml:2: key {a: 1} is a mapping; expected a non-empty string (a section or key name)\n");
  expect_config_error(std::string(kTinyMockYaml) + "  \"\": 1\n",
                      "exp.yaml:16: a key is empty; expected a non-empty string (a section or key name)\n");
}

TEST(BadConfig, KjvWithoutTheBibleProgram) {
  // PATH holds no `bible`: the Debian package bible-kjv is what provides it.
  expect_config_error("data:\n  corpus: kjv\n",
                      "exp.yaml:2: data.corpus = kjv: the `bible` program (Debian package bible-kjv) is not in PATH",
                      "", "PATH=/nonexistent");
}

TEST(BadConfig, FeatureNotBuiltYet) {
  expect_config_error(
      std::string(kTinyMockYaml) + "compression:\n  method: topk\n",
      "exp.yaml:17: compression.method = topk: not supported yet; expected one of none, powersgd, onebit");
}

// device: cuda on a machine without a usable GPU (these build machines: no driver, so
// cudaGetDeviceCount fails with cudaErrorInsufficientDriver) is a config error, exit 2.
TEST(BadConfig, CudaWithoutAUsableDeviceIsNamedWithTheReason) {
#if MEMTRAIN_HAVE_CUDA
  if (memory::cuda_device_count() > 0) {
    // With a GPU the device is usable, and what a GPU run does not train yet is refused.
    expect_config_error(kTinyMockYaml, "parallel.zero_stage = 1: training on cuda has no ZeRO-1 yet",
                        "--set device=cuda --set parallel.zero_stage=1");
    return;
  }
  expect_config_error(kTinyMockYaml, "no CUDA device: cudaGetDeviceCount: ", "--set device=cuda");
  expect_config_error(kTinyMockYaml, "no CUDA device: cudaGetDeviceCount: ", "--set device=cuda:1");
#else
  expect_config_error(kTinyMockYaml, "no CUDA device: this memtrain was built without CUDA", "--set device=cuda");
#endif
}

TEST(BadConfig, DeviceNamesAreCpuCudaOrCudaN) {
  const std::string expected = "; expected cpu, cuda or cuda:N (N an integer in [0, 1023])";
  expect_config_error(kTinyMockYaml, "--set device=gpu: device = gpu: unknown value" + expected, "--set device=gpu");
  expect_config_error(kTinyMockYaml, "--set device=cuda:x: device = cuda:x: ", "--set device=cuda:x");
  expect_config_error(kTinyMockYaml, "--set device=cuda:1024: device = cuda:1024: ", "--set device=cuda:1024");
}

TEST(BadConfig, BadSetArgumentIsNamed) {
  expect_config_error(kTinyMockYaml, "--set training.lr=fast: training.lr = fast: not a number; expected a number > 0",
                      "--set training.lr=fast");
}

TEST(BadConfig, BadAllocConfIsNamed) {
  expect_config_error(kTinyMockYaml, "MEMTRAIN_ALLOC_CONF=bogus_option:1: ", "", "MEMTRAIN_ALLOC_CONF=bogus_option:1");
}

// precision.bf16_gemm: training with native on a CPU without bf16 dot products (made one here
// by capping oneDNN's ISA at AVX2, as a Zen 3 is) is a config error naming the key, the cap and
// the way out.
TEST(BadConfig, NativeBf16GemmWithoutBf16DotProducts) {
  expect_config_error(kTinyMockYaml,
                      "--set precision.bf16_gemm=native: precision.bf16_gemm = native: oneDNN finds no bf16 dot "
                      "products on this CPU (oneDNN 2",
                      "--set precision.dtype=bf16 --set precision.bf16_gemm=native", "ONEDNN_MAX_CPU_ISA=AVX2");
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("train --config exp.yaml --set precision.dtype=bf16 --set precision.bf16_gemm=native",
                            "ONEDNN_MAX_CPU_ISA=AVX2");
  EXPECT_TRUE(contains(r.err,
                       ", avx2, capped by ONEDNN_MAX_CPU_ISA=AVX2; native needs AVX512_BF16 or AMX); "
                       "expected auto or fp32 here"))
      << r.err;
}

// What needs no bf16 dot products does not refuse native there: a plan, a dry run, and a
// training run that does not store bf16.
TEST(BadConfig, NativeBf16GemmIsOnlyRefusedForABf16TrainingRun) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const std::string cap = "ONEDNN_MAX_CPU_ISA=AVX2";
  const std::string native = " --set precision.bf16_gemm=native";
  const auto plan = s.memtrain("plan --config exp.yaml --target a100-40gb --set precision.dtype=bf16" + native, cap);
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  const auto dry =
      s.memtrain("train --config exp.yaml --dry-run --run-dir dry --set precision.dtype=bf16" + native, cap);
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  const auto fp16 = s.memtrain("train --config exp.yaml --run-dir fp16 --set precision.dtype=fp16" + native, cap);
  EXPECT_EQ(fp16.exit_code, 0) << fp16.err;
}

TEST(BadConfig, DataPrepareValidatesTheSameWay) {
  Scratch s;
  s.write("exp.yaml", "model:\n  hidden_size: 100\n  num_attention_heads: 3\n");
  const auto r = s.memtrain("data prepare --config exp.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: config error: exp.yaml:3: model.num_attention_heads = 3"));
}

TEST(DataPrepare, MockDataNeedsNothing) {
  Scratch s;
  s.write("exp.yaml", kTinyMockYaml);
  const auto r = s.memtrain("data prepare --config exp.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "nothing to prepare"));
}

}  // namespace
}  // namespace memtrain::cli
