// Every bad input of issue 2 ("CLI and bad input") gets one ConfigError whose message names the
// file, the line, the key, the value and what was expected. The reference for each line number is
// the YAML text the test wrote.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/config/config_loader.hpp"
#include "tests/test_names.hpp"
#include "tests/config/config_test_files.hpp"

namespace memtrain::train {
namespace {

using testing::ConfigFiles;
using testing::contains;
using testing::kMinimalYaml;
using testing::load_error;

// kMinimalYaml is 7 lines; a section appended starts at line 8.
std::string with(const std::string& extra) { return std::string(kMinimalYaml) + extra; }

TEST(ConfigErrors, UnknownKeyNamesFileLineAndClosestKey) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  micro_batch_sise: 8\n"));
  const std::string msg = load_error(path);
  EXPECT_TRUE(contains(msg, path + ":9: training.micro_batch_sise = 8: unknown key"));
  EXPECT_TRUE(contains(msg, "did you mean training.micro_batch_size?"));
  EXPECT_TRUE(contains(msg, "expected a key listed in docs/config.md"));
}

TEST(ConfigErrors, KeyInTheWrongSectionSuggestsItsSection) {
  ConfigFiles files;
  const std::string msg = load_error(files.write("c.yaml", with("training:\n  hidden_size: 8\n")));
  EXPECT_TRUE(contains(msg, "training.hidden_size = 8: unknown key (did you mean model.hidden_size?)"));
}

TEST(ConfigErrors, RewordedKeySuggestsTheKeySharingAWord) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr_warmup: 8\n"))),
                       "training.lr_warmup = 8: unknown key (did you mean training.warmup_steps?)"));
  EXPECT_TRUE(contains(load_error(files.write("d.yaml", with("memory:\n  split_size: 8\n"))),
                       "memory.split_size = 8: unknown key (did you mean memory.max_split_size?)"));
}

// yaml-cpp does not merge: a merge key arrives as a key named "<<", and is named as such.
TEST(ConfigErrors, YamlMergeKeyIsNamedAsUnsupported) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("compression:\n  <<: {method: onebit}\n"));
  EXPECT_TRUE(contains(load_error(path), path + ":9: compression.<< = {method: onebit}: a YAML merge key, which "
                                                "memtrain's config does not support; expected the keys written out"))
      << load_error(path);
}

TEST(ConfigErrors, NonsenseKeyGetsNoSuggestion) {
  ConfigFiles files;
  const std::string msg = load_error(files.write("c.yaml", with("training:\n  zzzzzzzzzzzzzzzzzzzz: 1\n")));
  EXPECT_TRUE(contains(msg, "unknown key;"));
  EXPECT_FALSE(contains(msg, "did you mean"));
}

TEST(ConfigErrors, UnknownSectionSuggestsTheClosestSection) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("trainng:\n  max_steps: 8\n"));
  const std::string msg = load_error(path);
  EXPECT_TRUE(contains(msg, path + ":8: trainng: unknown section (did you mean training?)"));
}

TEST(ConfigErrors, WrongTypeNamesTheExpectedType) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  max_steps: many\n"));
  EXPECT_TRUE(
      contains(load_error(path), path + ":9: training.max_steps = many: not an integer; expected an integer in [1, "));
}

TEST(ConfigErrors, NonBooleanHugePagesNamesTheExpectedValues) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("memory:\n  host_huge_pages: sometimes\n"));
  EXPECT_TRUE(contains(load_error(path), path + ":9: memory.host_huge_pages = sometimes: ")) << load_error(path);
}

TEST(ConfigErrors, FractionalIntegerIsRejected) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  micro_batch_size: 2.5\n"))),
                       "training.micro_batch_size = 2.5: not an integer"));
}

TEST(ConfigErrors, ListWhereAScalarBelongs) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr: [1, 2]\n"))),
                       "training.lr = [1, 2]: is a list; expected a number > 0"));
}

TEST(ConfigErrors, EmptyValue) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  lr:\n"));
  EXPECT_TRUE(contains(load_error(path), path + ":9: training.lr = (empty): has no value"));
}

TEST(ConfigErrors, BooleanMustBeTrueOrFalse) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("memory:\n  trace: maybe\n"))),
                       "memory.trace = maybe: not a boolean; expected true or false"));
}

TEST(ConfigErrors, UnknownChoiceListsTheChoices) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr_schedule: exponential\n"))),
                       "training.lr_schedule = exponential: unknown value; expected one of cosine, linear, constant"));
}

TEST(ConfigErrors, ProbabilityOutOfRange) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "model:\n  hidden_dropout_prob: 1.5\ndata:\n  mock: true\n");
  EXPECT_TRUE(contains(load_error(path),
                       path + ":2: model.hidden_dropout_prob = 1.5: out of range; expected a number in [0, 1)"));
}

// A float key holds what its text rounds to in single precision; a value that would round out
// of the key's range (to 0, to inf, onto an open bound) is refused with the value as written.
TEST(ConfigErrors, FloatKeysRefuseValuesThatRoundOutOfRange) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", "model:\n  layer_norm_eps: 1e-50\ndata:\n  mock: true\n")),
                       "model.layer_norm_eps = 1e-50: too small for single precision (it would be stored as 0, not as "
                       "the value written); expected a number in (0, 1)"));
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", "data:\n  mock: true\n  mlm_probability: 1e-50\n")),
                       "data.mlm_probability = 1e-50: too small for single precision (it would be stored as 0"));
  EXPECT_TRUE(
      contains(load_error(files.write("c.yaml", "model:\n  layer_norm_eps: 0.999999999\ndata:\n  mock: true\n")),
               "model.layer_norm_eps = 0.999999999: out of range in single precision (it would be stored as 1)"));
}

// AdamW's kernels take lr, the betas, eps and weight decay as float (kernels/cpu/adamw.hpp):
// a beta of 0.99999999 reached them as 1 and the run trained to NaN with exit 0; the value the
// kernel would see must keep the key's range, while the config keeps the double.
TEST(ConfigErrors, OptimizerKeysRefuseValuesTheKernelWouldSeeOutOfRange) {
  ConfigFiles files;
  for (const char* key : {"adam_beta1", "adam_beta2"}) {
    EXPECT_TRUE(contains(load_error(files.write("c.yaml", with(std::string("training:\n  ") + key + ": 0.99999999\n"))),
                         std::string("training.") + key +
                             " = 0.99999999: out of range in single precision (it would be stored as 1); "
                             "expected a number in [0, 1)"));
  }
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  adam_eps: 1e-46\n"))),
                       "training.adam_eps = 1e-46: too small for single precision (it would be stored as 0"));
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr: 1e-50\n"))),
                       "training.lr = 1e-50: too small for single precision"));
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  weight_decay: 1e-50\n"))),
                       "training.weight_decay = 1e-50: too small for single precision (it would be stored as 0, not as "
                       "the value written); expected a number >= 0"));
  // Values a float holds within range load, as doubles.
  const Config c =
      load_config(files.write("c.yaml", with("training:\n  adam_beta2: 0.9999999\n  adam_eps: 1e-44\n")), {});
  EXPECT_EQ(c.training.adam_beta2, 0.9999999);
  EXPECT_EQ(c.training.adam_eps, 1e-44);
}

TEST(ConfigErrors, NegativeLearningRate) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr: -1e-3\n"))),
                       "training.lr = -1e-3: out of range; expected a number > 0"));
}

TEST(ConfigErrors, NotANumberIsRejected) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr: nan\n"))), "training.lr = nan: not"));
}

TEST(ConfigErrors, ZeroMicroBatchSize) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  micro_batch_size: 0\n"))),
                       "training.micro_batch_size = 0: out of range; expected an integer in [1, "));
}

TEST(ConfigErrors, ZeroGlobalBatchSize) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  global_batch_size: 0\n"))),
                       "training.global_batch_size = 0: out of range"));
}

TEST(ConfigErrors, HeadsThatDoNotDivideHiddenSizeNameBothKeysAndLines) {
  ConfigFiles files;
  const std::string path =
      files.write("c.yaml", "model:\n  hidden_size: 100\n  num_attention_heads: 3\ndata:\n  mock: true\n");
  EXPECT_TRUE(contains(load_error(path), path +
                                             ":3: model.num_attention_heads = 3: does not divide "
                                             "model.hidden_size = 100 (" +
                                             path + ":2); expected a divisor of 100"));
}

// Tensor parallelism splits heads and intermediate features: a size that does not split is
// refused at load time, naming the key set last and where.
TEST(ConfigErrors, TensorParallelSizeThatDoesNotSplitHeadsOrMlp) {
  ConfigFiles files;
  const std::string a = files.write("a.yaml", "parallel:\n  tensor_model_parallel_size: 5\ndata:\n  mock: true\n");
  EXPECT_TRUE(contains(load_error(a), a + ":2: parallel.tensor_model_parallel_size = 5: does not "
                                          "divide model.num_attention_heads = 12 (default); "
                                          "expected a divisor of 12"))
      << load_error(a);
  const std::string b =
      files.write("b.yaml",
                  "parallel:\n  tensor_model_parallel_size: 4\nmodel:\n  intermediate_size: 1026\ndata:\n"
                  "  mock: true\n");
  EXPECT_TRUE(contains(load_error(b), b +
                                          ":4: model.intermediate_size = 1026: not divisible by "
                                          "parallel.tensor_model_parallel_size = 4 (" +
                                          b + ":2); expected a multiple of 4"))
      << load_error(b);
}

// Sequence parallelism needs a tensor-parallel group and lengths that split evenly.
TEST(ConfigErrors, SequenceParallelWithoutTensorParallelOrEvenLengths) {
  ConfigFiles files;
  const std::string a = files.write("a.yaml", "parallel:\n  sequence_parallel: true\ndata:\n  mock: true\n");
  EXPECT_TRUE(contains(load_error(a), a + ":2: parallel.sequence_parallel = true: means nothing "
                                          "with parallel.tensor_model_parallel_size = 1"))
      << load_error(a);
  const std::string b = files.write("b.yaml",
                                    "parallel:\n  tensor_model_parallel_size: 4\n  sequence_parallel: true\ndata:\n"
                                    "  mock: true\n  seq_length: 126\n");
  EXPECT_TRUE(contains(load_error(b), b + ":6: data.seq_length = 126: not divisible by "
                                          "parallel.tensor_model_parallel_size = 4"))
      << load_error(b);
  const std::string d = files.write("d.yaml",
                                    "parallel:\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\ndata:\n"
                                    "  mock: true\n  dynamic_seq_length: true\n");
  EXPECT_TRUE(contains(load_error(d), d +
                                          ":6: data.dynamic_seq_length = true: is set with "
                                          "parallel.sequence_parallel = true (" +
                                          d + ":3)"))
      << load_error(d);
}

// ZeRO stages 2 and 3 are refused as not supported; bucket sizes must be positive.
TEST(ConfigErrors, ZeroStagesTwoAndThreeAndEmptyBuckets) {
  ConfigFiles files;
  for (const char* stage : {"2", "3"}) {
    const std::string a = files.write(std::string("z") + stage + ".yaml",
                                      std::string("data:\n  mock: true\nparallel:\n  zero_stage: ") + stage + "\n");
    EXPECT_TRUE(contains(load_error(a),
                         a + ":4: parallel.zero_stage = " + stage + ": ZeRO stage " + stage + " is not supported"))
        << load_error(a);
  }
  const std::string b = files.write("b.yaml", "data:\n  mock: true\nparallel:\n  zero_stage: 4\n");
  EXPECT_TRUE(contains(load_error(b), "parallel.zero_stage = 4")) << load_error(b);
  EXPECT_TRUE(contains(load_error(b), "0 or 1")) << load_error(b);
  const std::string c = files.write("c.yaml", "data:\n  mock: true\nparallel:\n  bucket_size_mb: 0\n");
  EXPECT_TRUE(contains(load_error(c), c + ":4: parallel.bucket_size_mb = 0")) << load_error(c);
  EXPECT_TRUE(contains(load_error(c), "a number of MiB in (0, 1048576]")) << load_error(c);
  const std::string d = files.write("d.yaml", "data:\n  mock: true\nparallel:\n  overlap_grad_reduce: maybe\n");
  EXPECT_TRUE(contains(load_error(d), d + ":4: parallel.overlap_grad_reduce = maybe")) << load_error(d);
}

// PowerSGD: ZeRO-1 refused with the reason, 16-bit gradients accepted, bad option values
// named with their line; the options are accepted (and do nothing) with method none.
TEST(ConfigErrors, CompressionNeedsStageZeroFp32AndValidOptions) {
  ConfigFiles files;
  const std::string a =
      files.write("a.yaml", "data:\n  mock: true\nparallel:\n  zero_stage: 1\ncompression:\n  method: powersgd\n");
  EXPECT_TRUE(contains(load_error(a), a +
                                          ":6: compression.method = powersgd: gradient compression needs ZeRO "
                                          "stage 0, and parallel.zero_stage = 1 (" +
                                          a + ":4)"))
      << load_error(a);
  // 16-bit gradients are compressed in f32 (Note [16-bit gradients are compressed in f32]).
  const std::string b =
      files.write("b.yaml", "data:\n  mock: true\nprecision:\n  dtype: bf16\ncompression:\n  method: powersgd\n");
  EXPECT_EQ(load_config(b, {}).compression.method, "powersgd");
  const std::string c = files.write("c.yaml", "data:\n  mock: true\ncompression:\n  method: powersgd\n  rank: 0\n");
  EXPECT_TRUE(contains(load_error(c), c + ":5: compression.rank = 0")) << load_error(c);
  const std::string d =
      files.write("d.yaml", "data:\n  mock: true\ncompression:\n  method: powersgd\n  min_compression_rate: -1\n");
  EXPECT_TRUE(contains(load_error(d), d + ":5: compression.min_compression_rate = -1")) << load_error(d);
  // 1-bit Adam compresses the momentum: a gradient compressor beside it, 16-bit, ZeRO-1 and
  // tensor parallelism are refused; freeze_step with a gradient compressor is refused too.
  const std::string h = files.write(
      "h.yaml", "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  method: onebit\n");
  EXPECT_TRUE(contains(load_error(h), h +
                                          ":6: compression.method = onebit: compresses the gradients, and "
                                          "training.optimizer = onebit_adam (" +
                                          h + ":4) compresses the momentum"))
      << load_error(h);
  const std::string i =
      files.write("i.yaml", "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\nprecision:\n  dtype: bf16\n");
  EXPECT_TRUE(contains(load_error(i), i + ":4: training.optimizer = onebit_adam: not supported yet with "
                                          "precision.dtype = bf16"))
      << load_error(i);
  const std::string j =
      files.write("j.yaml", "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\nparallel:\n  zero_stage: 1\n");
  EXPECT_TRUE(contains(load_error(j), j +
                                          ":4: training.optimizer = onebit_adam: needs ZeRO stage 0, and "
                                          "parallel.zero_stage = 1 (" +
                                          j + ":6) shards the optimizer state"))
      << load_error(j);
  const std::string k =
      files.write("k.yaml", "data:\n  mock: true\ncompression:\n  method: powersgd\n  freeze_step: 5\n");
  EXPECT_TRUE(contains(load_error(k), k + ":5: compression.freeze_step = 5: is an option of training.optimizer = "
                                          "onebit_adam, which training.optimizer = adamw (default) does not use; "
                                          "expected no compression.freeze_step with compression.method = powersgd, or "
                                          "training.optimizer = onebit_adam with compression.method = none"))
      << load_error(k);
  const std::string l = files.write(
      "l.yaml", "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  freeze_step: 0\n");
  EXPECT_TRUE(contains(load_error(l), l + ":6: compression.freeze_step = 0")) << load_error(l);
  const Config adam = load_config(
      files.write("m.yaml",
                  "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  freeze_step: 7\n"),
      {});
  EXPECT_EQ(adam.compression.freeze_step, 7);
  // PowerSGD's options mean nothing to 1-bit: refused, with the method's line.
  const std::string f = files.write("f.yaml", "data:\n  mock: true\ncompression:\n  method: onebit\n  rank: 8\n");
  EXPECT_TRUE(contains(load_error(f), f +
                                          ":5: compression.rank = 8: is a PowerSGD option and compression.method = "
                                          "onebit (" +
                                          f + ":4) has no use for it"))
      << load_error(f);
  const std::string g = files.write(
      "g.yaml", "data:\n  mock: true\ncompression:\n  method: onebit\n  warm_start: false\n  start_iter: 3\n");
  EXPECT_TRUE(contains(load_error(g), g + ":5: compression.warm_start = false: is a PowerSGD option")) << load_error(g);
  // 1-bit's blocks are whole words of signs; its options mean nothing to PowerSGD; the scale is
  // one of two.
  const std::string n =
      files.write("n.yaml", "data:\n  mock: true\ncompression:\n  method: onebit\n  block_size: 24\n");
  EXPECT_TRUE(contains(load_error(n), n + ":5: compression.block_size = 24: is not a whole number of 16-bit words "
                                          "of signs; expected 0 (one scale per chunk) or a multiple of 16"))
      << load_error(n);
  const std::string o = files.write("o.yaml", "data:\n  mock: true\ncompression:\n  method: powersgd\n  scale: rms\n");
  EXPECT_TRUE(contains(load_error(o), o +
                                          ":5: compression.scale = rms: is a 1-bit option and compression.method = "
                                          "powersgd (" +
                                          o + ":4) has no use for it"))
      << load_error(o);
  const std::string p = files.write("p.yaml", "data:\n  mock: true\ncompression:\n  method: onebit\n  scale: max\n");
  EXPECT_TRUE(contains(load_error(p), p + ":5: compression.scale")) << load_error(p);
  const Config blocks = load_config(
      files.write("q.yaml",
                  "data:\n  mock: true\ntraining:\n  optimizer: onebit_adam\ncompression:\n  block_size: 0\n"
                  "  scale: rms\n"),
      {});
  EXPECT_EQ(blocks.compression.block_size, 0);
  EXPECT_EQ(blocks.compression.scale, "rms");
  const std::string e =
      files.write("e.yaml",
                  "data:\n  mock: true\nparallel:\n  zero_stage: 1\ncompression:\n  method: none\n  rank: 8\n"
                  "  start_iter: 0\n  warm_start: false\n");
  const Config ok = load_config(e, {});
  EXPECT_EQ(ok.compression.rank, 8);
  EXPECT_EQ(ok.compression.start_iter, 0);
  EXPECT_FALSE(ok.compression.warm_start);
}

TEST(ConfigErrors, SeqLengthAboveMaxPositionEmbeddings) {
  ConfigFiles files;
  const std::string clean =
      files.write("d.yaml", "model:\n  max_position_embeddings: 512\ndata:\n  mock: true\n  seq_length: 1024\n");
  EXPECT_TRUE(contains(load_error(clean), clean +
                                              ":5: data.seq_length = 1024: exceeds "
                                              "model.max_position_embeddings = 512 (" +
                                              clean + ":2); expected at most 512"));
}

TEST(ConfigErrors, GlobalBatchNotAMultipleOfMicroBatch) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  micro_batch_size: 4\n  global_batch_size: 10\n"));
  EXPECT_TRUE(contains(load_error(path), path +
                                             ":10: training.global_batch_size = 10: not a multiple of "
                                             "training.micro_batch_size = 4 (" +
                                             path + ":9); expected a multiple of 4"));
}

TEST(ConfigErrors, GlobalBatchNotAMultipleOfMicroTimesRanks) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  micro_batch_size: 4\n  global_batch_size: 8\n"));
  const Config c = load_config(path, {});
  try {
    check_data_parallel_size(c, 4);
    FAIL() << "accepted 8 = 4 x 4 ranks x 0.5 steps";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(std::string(e.what()),
                         path + ":10: training.global_batch_size = 8: not a multiple of training.micro_batch_size x "
                                "data-parallel size = 4 x 4 = 16; expected a multiple of 16"));
  }
}

TEST(ConfigErrors, MinLrAboveLr) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("training:\n  lr: 1e-4\n  min_lr: 1e-3\n"))),
                       "training.min_lr = 0.001: above training.lr = 0.0001"));
}

TEST(ConfigErrors, DuplicateKeyNamesBothLines) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  lr: 1e-4\n  lr: 1e-3\n"));
  EXPECT_TRUE(contains(load_error(path), path + ":10: training.lr = 1e-3: duplicate key (first at line 9)"));
}

TEST(ConfigErrors, MissingCorpusFile) {
  ConfigFiles files;
  const std::string missing = files.dir() + "/no-such-corpus.txt";
  const std::string path = files.write("c.yaml", "data:\n  corpus: " + missing + "\n");
  EXPECT_TRUE(contains(load_error(path), path + ":2: data.corpus = " + missing + ": no such file or directory"));
}

// A loop of links was reported as "no such file or directory", sending the user to a name that
// is there.
TEST(ConfigErrors, CorpusThatIsALoopOfLinksIsNamedAsSuch) {
  ConfigFiles files;
  const std::string a = files.dir() + "/loop-a", b = files.dir() + "/loop-b";
  std::filesystem::create_symlink(b, a);
  std::filesystem::create_symlink(a, b);
  const std::string path = files.write("c.yaml", "data:\n  corpus: " + a + "\n");
  EXPECT_TRUE(contains(
      load_error(path),
      path + ":2: data.corpus = " + a + ": a symbolic link that leads to no file (Too many levels of symbolic links)"))
      << load_error(path);
}

TEST(ConfigErrors, CorpusFileAndDirectoryAreAccepted) {
  ConfigFiles files;
  const std::string text = files.write("corpus.txt", "In the beginning.\n");
  EXPECT_NO_THROW(load_config(files.write("a.yaml", "data:\n  corpus: " + text + "\n"), {}));
  EXPECT_NO_THROW(load_config(files.write("b.yaml", "data:\n  corpus: " + files.dir() + "\n"), {}));
}

TEST(ConfigErrors, UnreadableCorpusFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  ConfigFiles files;
  const std::string text = files.write("corpus.txt", "secret\n");
  std::filesystem::permissions(text, std::filesystem::perms::none);
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", "data:\n  corpus: " + text + "\n")), "cannot be read"));
}

// Sets PATH for one test and restores it.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) : old_(std::getenv("PATH") ? std::getenv("PATH") : "") {
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

TEST(ConfigErrors, KjvCorpusWithoutTheBibleProgram) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "data:\n  corpus: kjv\n");
  ScopedPath empty(files.dir());
  const std::string msg = load_error(path);
  EXPECT_TRUE(
      contains(msg, path + ":2: data.corpus = kjv: the `bible` program (Debian package bible-kjv) is not in PATH"));
}

TEST(ConfigErrors, DefaultKjvCorpusWithoutTheBibleProgramSaysDefault) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "model:\n  hidden_size: 768\n");
  ScopedPath empty(files.dir());
  EXPECT_TRUE(contains(load_error(path), path + " (default): data.corpus = kjv: the `bible` program"));
}

TEST(ConfigErrors, KjvCorpusIsAcceptedWhenBibleIsFound) {
  ConfigFiles files;
  const std::string bible = files.write("bible", "#!/bin/sh\n");
  std::filesystem::permissions(bible, std::filesystem::perms::owner_all);
  ScopedPath fake(files.dir());
  EXPECT_NO_THROW(load_config(files.write("c.yaml", "data:\n  corpus: kjv\n"), {}));
}

TEST(ConfigErrors, MissingConfigFile) {
  EXPECT_EQ(load_error("/nonexistent/dir/exp.yaml"),
            "/nonexistent/dir/exp.yaml: config file not found; expected a YAML file such as configs/tiny.yaml");
}

TEST(ConfigErrors, ConfigPathIsADirectory) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.dir()), files.dir() + ": is a directory; expected a YAML file"));
}

TEST(ConfigErrors, UnreadableConfigFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  ConfigFiles files;
  const std::string path = files.write("c.yaml", kMinimalYaml);
  std::filesystem::permissions(path, std::filesystem::perms::none);
  EXPECT_TRUE(contains(load_error(path), path + ": cannot read config file"));
}

// An empty config would otherwise train BERT-Base on every default.
TEST(ConfigErrors, EmptyConfigFileIsRejected) {
  ConfigFiles files;
  for (const std::string text : {"", "# only a comment\n\n", "~\n", "---\n"}) {
    const std::string path = files.write("c.yaml", text);
    EXPECT_EQ(load_error(path), path +
                                    ": config file is empty; expected a YAML mapping with sections model, data, "
                                    "training, precision, memory, parallel, compression, checkpoint, health")
        << "text: " << text;
  }
}

TEST(ConfigErrors, DevNullIsNotAConfig) {
  EXPECT_TRUE(contains(load_error("/dev/null"), "/dev/null: is not a regular file"));
}

TEST(ConfigErrors, FifoIsRejectedWithoutOpeningIt) {
  // Opening a FIFO with no writer blocks forever; the check must come before the open.
  ConfigFiles files;
  const std::string path = files.dir() + "/fifo.yaml";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(load_error(path), path +
                                  ": is not a regular file (a pipe, device or special file); expected a YAML "
                                  "file such as configs/tiny.yaml");
}

TEST(ConfigErrors, ProcMemIsNotAConfig) {
  // stat calls /proc/self/mem a regular file of size 0, and reading it at offset 0 fails: it
  // reads as nothing, so it is refused as empty rather than trained on defaults.
  EXPECT_TRUE(contains(load_error("/proc/self/mem"), "/proc/self/mem: config file is empty"));
}

TEST(ConfigErrors, LinkToARegularFileIsFollowed) {
  ConfigFiles files;
  const std::string target = files.write("c.yaml", kMinimalYaml);
  const std::string link = files.dir() + "/link.yaml";
  std::filesystem::create_symlink(target, link);
  EXPECT_NO_THROW(load_config(link, {}));
}

TEST(ConfigErrors, SecondYamlDocumentNamesItsLine) {
  ConfigFiles files;
  // kMinimalYaml is 7 lines; `---` is line 8 and the second document's mapping starts on line 9.
  const std::string path = files.write("c.yaml", with("---\ntraining:\n  max_steps: 5\n"));
  EXPECT_EQ(load_error(path), path + ":9: a second YAML document; expected one document per config file");
}

TEST(ConfigErrors, EvalStepsZeroIsOutOfRange) {
  // The evaluator runs at least one batch, so 0 would silently mean 1.
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("training:\n  eval_steps: 0\n"));
  EXPECT_EQ(load_error(path),
            path + ":9: training.eval_steps = 0: out of range; expected an integer in [1, 1000000000]");
}

TEST(ConfigErrors, NotYamlNamesTheLine) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "model:\n  hidden_size: 8\n  vocab_size: [1, 2\n");
  EXPECT_TRUE(contains(load_error(path), path + ":4: not valid YAML ("));
}

TEST(ConfigErrors, BinaryFileIsNotAConfig) {
  // A picture passed by mistake: PNG signature and a header chunk with NUL bytes.
  ConfigFiles files;
  const std::string path = files.write("picture.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  const std::string msg = load_error(path);
  EXPECT_TRUE(contains(msg, path + ":"));
  EXPECT_TRUE(contains(msg, "expected a YAML mapping of sections"));
}

TEST(ConfigErrors, DocumentThatIsNotAMapping) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "- model\n- data\n");
  EXPECT_TRUE(contains(load_error(path), path + ":1: the document is a list; expected a YAML mapping of sections"));
}

TEST(ConfigErrors, SectionThatIsNotAMapping) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", "model: 5\n");
  EXPECT_TRUE(contains(load_error(path), path + ":1: model = 5: not a mapping; expected a mapping of model.* keys"));
}

// Features named by the interface but not built yet are rejected, never ignored.
struct NotBuilt {
  std::string yaml;
  std::string message;
};

class NotSupportedYet : public ::testing::TestWithParam<NotBuilt> {};

TEST_P(NotSupportedYet, IsRejectedWithThePhrase) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with(GetParam().yaml));
  const std::string msg = load_error(path);
  EXPECT_TRUE(contains(msg, path + ":"));
  EXPECT_TRUE(contains(msg, GetParam().message + ": not supported yet; expected "));
}

INSTANTIATE_TEST_SUITE_P(ConfigErrors, NotSupportedYet,
                         ::testing::Values(NotBuilt{"compression:\n  method: topk\n", "compression.method = topk"},
                                           NotBuilt{"health:\n  stall_timeout: 60\n", "health.stall_timeout = 60"},
                                           NotBuilt{"training:\n  optimizer: sgd\n", "training.optimizer = sgd"},
                                           NotBuilt{"training:\n  deterministic: true\n",
                                                    "training.deterministic = true"},
                                           NotBuilt{"parallel:\n  pipeline_model_parallel_size: 2\n",
                                                    "parallel.pipeline_model_parallel_size = 2"}),
                         [](const ::testing::TestParamInfo<NotBuilt>& info) {
                           return memtrain::testing::case_name(info.param.message, info.index);
                         });

// Checkpoints hold every optimizer's and compressor's state: checkpointing loads with each.
TEST(ConfigErrors, CheckpointsLoadWithEveryOptimizerAndCompressor) {
  ConfigFiles files;
  for (const char* extra : {"parallel:\n  zero_stage: 1\n", "compression:\n  method: powersgd\n",
                            "compression:\n  method: onebit\n", "training:\n  optimizer: onebit_adam\n"}) {
    const Config c = load_config(files.write("c.yaml", with(std::string("checkpoint:\n  interval: 5\n") + extra)), {});
    EXPECT_EQ(c.checkpoint.interval, 5) << extra;
  }
}

// checkpoint.*: loaded as given; out-of-range values name the key and the range.
TEST(ConfigErrors, CheckpointKeysLoadAndCheckTheirRanges) {
  ConfigFiles files;
  const Config c = load_config(
      files.write("c.yaml", with("checkpoint:\n  interval: 7\n  keep_last: 3\n  on_interrupt: true\n")), {});
  EXPECT_EQ(c.checkpoint.interval, 7);
  EXPECT_EQ(c.checkpoint.keep_last, 3);
  EXPECT_TRUE(c.checkpoint.on_interrupt);
  EXPECT_TRUE(contains(load_error(files.write("d.yaml", with("checkpoint:\n  interval: -1\n"))),
                       "checkpoint.interval = -1: out of range; expected an integer in [0, "));
  EXPECT_TRUE(contains(load_error(files.write("e.yaml", with("checkpoint:\n  keep_last: 0\n"))),
                       "checkpoint.keep_last = 0: out of range; expected an integer in [1, "));
}

// memory.limit and memory.reservation (issue 3, "Quotas, isolation and a device pool").
TEST(ConfigErrors, ReservationAboveLimitNamesBothKeys) {
  ConfigFiles files;
  const std::string path =
      files.write("c.yaml", with("memory:\n  capacity: 8GiB\n  limit: 1GiB\n  reservation: 2GiB\n"));
  EXPECT_TRUE(contains(load_error(path), path +
                                             ":11: memory.reservation = 2147483648: exceeds memory.limit = "
                                             "1073741824 (" +
                                             path + ":10); expected at most memory.limit"));
}

TEST(ConfigErrors, ReservationWithoutCapacityIsRefusedWithTheReason) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("memory:\n  reservation: 1GiB\n"));
  const std::string msg = load_error(path);
  EXPECT_TRUE(contains(msg, path + ":9: memory.reservation = 1073741824: needs memory.capacity"));
  EXPECT_TRUE(contains(msg, "expected memory.capacity set as well"));
}

TEST(ConfigErrors, ReservationAboveCapacity) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("memory:\n  capacity: 1GiB\n  reservation: 2GiB\n"))),
                       "memory.reservation = 2147483648: exceeds memory.capacity = 1073741824"));
}

TEST(ConfigErrors, LimitAboveCapacityWouldDoNothing) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("memory:\n  capacity: 1GiB\n  limit: 2GiB\n"))),
                       "memory.limit = 2147483648: exceeds memory.capacity = 1073741824"));
}

TEST(ConfigErrors, LimitThatIsNotASize) {
  ConfigFiles files;
  EXPECT_TRUE(
      contains(load_error(files.write("c.yaml", with("memory:\n  limit: lots\n"))), ":9: memory.limit = lots: "));
}

TEST(ConfigErrors, LimitAndReservationWithinCapacityLoad) {
  ConfigFiles files;
  const Config c =
      load_config(files.write("c.yaml", with("memory:\n  capacity: 4GiB\n  limit: 2GiB\n  reservation: 1GiB\n"
                                             "  garbage_collection_threshold: 0.5\n")),
                  {});
  EXPECT_EQ(c.memory.limit, 2ull << 30);
  EXPECT_EQ(c.memory.reservation, 1ull << 30);
  // A limit alone is a bound the collection threshold can be measured against.
  EXPECT_NO_THROW(
      load_config(files.write("d.yaml", with("memory:\n  limit: 2GiB\n  garbage_collection_threshold: 0.5\n")), {}));
}

TEST(ConfigErrors, NoCachePolicyWithMaxSplitSizeDoesNothing) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("memory:\n  policy: no_cache\n  max_split_size: 64MiB\n"));
  EXPECT_TRUE(contains(load_error(path), path + ":10: memory.max_split_size = 67108864: has no effect with "
                                                "memory.policy = no_cache"));
}

TEST(ConfigErrors, NoCachePolicyWithExpandableSegmentsDoesNothing) {
  ConfigFiles files;
  EXPECT_TRUE(
      contains(load_error(files.write("c.yaml", with("memory:\n  policy: no_cache\n  expandable_segments: true\n"))),
               "memory.expandable_segments = true: has no effect with memory.policy = no_cache"));
}

TEST(ConfigErrors, CollectionThresholdWithoutCapacityDoesNothing) {
  ConfigFiles files;
  const std::string path = files.write("c.yaml", with("memory:\n  garbage_collection_threshold: 0.8\n"));
  EXPECT_TRUE(contains(load_error(path), path + ":9: memory.garbage_collection_threshold = 0.8: has no effect "
                                                "without memory.capacity"));
}

TEST(ConfigErrors, MaxSplitSizeAtOrBelowTwentyMiB) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("memory:\n  max_split_size: 20MiB\n"))),
                       "memory.max_split_size = 20MiB: out of range; expected a size above 20MiB"));
}

TEST(ConfigErrors, MaxSplitSizeThatIsNotASize) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", with("memory:\n  max_split_size: lots\n"))),
                       "memory.max_split_size = lots: not a size"));
}

TEST(SetErrors, BadValueNamesTheArgument) {
  ConfigFiles files;
  EXPECT_EQ(
      load_error(files.write("c.yaml", kMinimalYaml), {"model.hidden_size=abc"}),
      "--set model.hidden_size=abc: model.hidden_size = abc: not an integer; expected an integer in [1, 1048576]");
}

TEST(SetErrors, UnknownKeySuggests) {
  ConfigFiles files;
  EXPECT_TRUE(
      contains(load_error(files.write("c.yaml", kMinimalYaml), {"training.max_step=5"}),
               "--set training.max_step=5: training.max_step = 5: unknown key (did you mean training.max_steps?)"));
}

TEST(SetErrors, MissingEquals) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {"training.max_steps"}),
                       "--set training.max_steps: no '='; expected section.key=value"));
}

TEST(SetErrors, SectionWithoutKey) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {"model=5"}),
                       "--set model=5: model is a section; expected section.key=value"));
}

TEST(SetErrors, EmptyKey) {
  ConfigFiles files;
  EXPECT_EQ(load_error(files.write("c.yaml", kMinimalYaml), {"="}),
            "--set =: empty key; expected section.key=value, e.g. training.max_steps=100");
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {" =5"}), ": empty key;"));
}

TEST(SetErrors, UnknownSectionIsNamedAsInAFile) {
  ConfigFiles files;
  EXPECT_EQ(load_error(files.write("c.yaml", kMinimalYaml), {"frob.x=1"}),
            "--set frob.x=1: frob: unknown section; expected one of device, model, data, training, precision, "
            "memory, parallel, compression, checkpoint, health");
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {"trainng.max_steps=1"}),
                       "--set trainng.max_steps=1: trainng: unknown section (did you mean training?)"));
}

TEST(SetErrors, CrossKeyRuleBlamesTheOverride) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {"model.num_attention_heads=5"}),
                       "--set model.num_attention_heads=5: model.num_attention_heads = 5: does not divide "
                       "model.hidden_size = 32"));
}

TEST(SetErrors, NotSupportedYetThroughSet) {
  ConfigFiles files;
  EXPECT_TRUE(contains(load_error(files.write("c.yaml", kMinimalYaml), {"compression.method=topk"}),
                       "--set compression.method=topk: compression.method = topk: not supported yet; expected one of "
                       "none, powersgd, onebit"));
}

}  // namespace
}  // namespace memtrain::train
