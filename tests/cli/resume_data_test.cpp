// A checkpoint records what its token ids mean (meta.json's data_key: the data cache's key, the
// corpus bytes' XXH64 with the tokenizer settings): a resume after the corpus changed, which
// trains a new tokenizer with other ids, is refused before the run directory is touched.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;
using testing::slurp;

// 400 lines of words drawn from a small list: enough for a 256-piece BPE tokenizer.
std::string corpus(const char* name_of_the_prophet) {
  const std::string words[] = {"and",  "the",  "lord",  "said",   "unto",  name_of_the_prophet,
                               "land", "of",   "egypt", "people", "went",  "out",
                               "into", "city", "house", "king",   "water", "light"};
  std::mt19937 rng(7);
  std::ostringstream out;
  for (int line = 0; line < 400; ++line) {
    const int n = 4 + static_cast<int>(rng() % 12);
    for (int w = 0; w < n; ++w) out << (w ? " " : "") << words[rng() % std::size(words)];
    out << ".\n";
  }
  return out.str();
}

// c.yaml: the tiny model on corpus.txt (the "moses" corpus), 256 pieces, cache in the scratch
// directory, a checkpoint every two steps.
void write_corpus_config(const Scratch& s) {
  std::string yaml = kTinyMockYaml;
  yaml.replace(yaml.find("  vocab_size: 64\n"), 17, "  vocab_size: 256\n");
  yaml.replace(yaml.find("  mock: true\n"), 13, "  corpus: corpus.txt\n  cache_dir: cache\n");
  yaml += "checkpoint:\n  interval: 2\n";
  s.write("c.yaml", yaml);
  s.write("corpus.txt", corpus("moses"));
}

// Trains c.yaml (write_corpus_config) into run/ and returns the data_key its checkpoint
// kCheckpoint records.
const std::string kCheckpoint = "run/checkpoints/step-00000002";
std::string train_on_corpus(const Scratch& s) {
  write_corpus_config(s);
  EXPECT_EQ(s.memtrain("train --config c.yaml --run-dir run --set training.lr_decay_steps=4").exit_code, 0);
  return nlohmann::json::parse(slurp(s.path(kCheckpoint + "/meta.json"))).at("data_key");
}

TEST(ResumeData, ACheckpointOfAnotherCorpusIsRefused) {
  Scratch s;
  write_corpus_config(s);
  const std::string first = "train --config c.yaml --run-dir run --set training.lr_decay_steps=4";
  ASSERT_EQ(s.memtrain(first).exit_code, 0);
  const auto meta = nlohmann::json::parse(slurp(s.path("run/checkpoints/step-00000002/meta.json")));
  const std::string key = meta.at("data_key");
  EXPECT_TRUE(key.starts_with("corpus_txt-bpe-256-")) << key;
  const std::string metrics = slurp(s.path("run/metrics.jsonl"));

  s.write("corpus.txt", corpus("aaron"));
  const auto r = s.memtrain(first + " --set training.max_steps=4");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain: config error: checkpoint run/checkpoints/step-00000002 was trained on data " +
                                  key + ", and this run's data is corpus_txt-bpe-256-"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "expected the data the checkpoint was trained on, or another --run-dir")) << r.err;
  EXPECT_EQ(slurp(s.path("run/metrics.jsonl")), metrics);

  // The corpus the checkpoint was trained on resumes.
  s.write("corpus.txt", corpus("moses"));
  const auto back = s.memtrain(first + " --set training.max_steps=4");
  EXPECT_EQ(back.exit_code, 0) << back.err;
  EXPECT_TRUE(contains(back.out + back.err, "resumed")) << back.out << back.err;
}

// After the corpus changed, export-hf copies the tokenizer of the checkpoint's own data (still
// in the cache), and eval on the validation split, which would be the new corpus's, is refused.
TEST(ResumeData, ExportAndEvalKeepToTheCheckpointsData) {
  Scratch s;
  const std::string key = train_on_corpus(s);
  const std::string ck = kCheckpoint;
  s.write("corpus.txt", corpus("aaron"));
  ASSERT_EQ(s.memtrain("data prepare --config c.yaml").exit_code, 0);  // the new corpus's cache beside the old

  const auto exported = s.memtrain("export-hf " + ck + " hf");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(slurp(s.path("hf/tokenizer.model")), slurp(s.path("cache/" + key + "/tokenizer.model")));

  const auto eval = s.memtrain("eval --checkpoint " + ck);
  EXPECT_EQ(eval.exit_code, 2) << eval.err;
  EXPECT_TRUE(contains(eval.err, "was trained on data " + key + ", and this run's data is corpus_txt-bpe-256-"))
      << eval.err;
  EXPECT_TRUE(contains(eval.err, "or `eval --input` with token ids")) << eval.err;
}

// eval on the validation split compares the corpus's key before preparing anything: refused,
// it leaves no new data cache (it used to train the new corpus's tokenizer first).
TEST(ResumeData, ARefusedEvalPreparesNoData) {
  Scratch s;
  const std::string key = train_on_corpus(s);
  const std::string ck = kCheckpoint;
  s.write("corpus.txt", corpus("aaron"));
  const auto eval = s.memtrain("eval --checkpoint " + ck);
  EXPECT_EQ(eval.exit_code, 2) << eval.err;
  EXPECT_TRUE(contains(eval.err, "was trained on data " + key)) << eval.err;
  std::vector<std::string> caches;
  for (const auto& e : std::filesystem::directory_iterator(s.path("cache"))) caches.push_back(e.path().filename());
  EXPECT_EQ(caches, std::vector<std::string>{key});
}

// The model needs no corpus: with the corpus gone (another machine, another working directory
// for a relative data.corpus), export-hf and eval --input work; eval on the validation split,
// which reads the corpus, says it is missing (exit 2).
TEST(ResumeData, ExportAndEvalInputNeedNoCorpus) {
  Scratch s;
  train_on_corpus(s);
  const std::string ck = kCheckpoint;
  std::filesystem::remove(s.path("corpus.txt"));
  const auto exported = s.memtrain("export-hf " + ck + " hf");
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(std::filesystem::exists(s.path("hf/model.safetensors")));
  s.write("in.json", R"({"input_ids": [[5, 6, 7, 8]], "labels": [[-100, 6, -100, -100]]})");
  const auto scored = s.memtrain("eval --checkpoint " + ck + " --input in.json");
  EXPECT_EQ(scored.exit_code, 0) << scored.err;
  EXPECT_TRUE(contains(scored.out, "\"loss\"")) << scored.out;
  const auto split = s.memtrain("eval --checkpoint " + ck);
  EXPECT_EQ(split.exit_code, 2) << split.err;
  EXPECT_TRUE(contains(split.err, "data.corpus = corpus.txt: no such file or directory")) << split.err;
}

// The success line names tokenizer.model when it was written; `--force` over an export of
// real data with one of mock data removes the earlier tokenizer.model, whose ids are another
// model's (it used to stay beside the new model).
TEST(ResumeData, ForcedExportLeavesNoOtherModelsTokenizer) {
  Scratch s;
  write_corpus_config(s);
  ASSERT_EQ(s.memtrain("train --config c.yaml --run-dir run --set training.lr_decay_steps=4").exit_code, 0);
  const auto first = s.memtrain("export-hf run/checkpoints/step-00000002 hf");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(contains(first.out, "(config.json, model.safetensors, TOKENIZER.md, tokenizer.model)")) << first.out;
  ASSERT_TRUE(std::filesystem::exists(s.path("hf/tokenizer.model")));
  const std::string first_tokenizer = slurp(s.path("hf/tokenizer.model"));

  s.write("mock.yaml", std::string(kTinyMockYaml) + "checkpoint:\n  interval: 2\n");
  ASSERT_EQ(s.memtrain("train --config mock.yaml --run-dir mock").exit_code, 0);
  const auto forced = s.memtrain("export-hf mock/checkpoints/step-00000002 hf --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(contains(forced.out, "(config.json, model.safetensors, TOKENIZER.md)\n")) << forced.out;
  EXPECT_FALSE(std::filesystem::exists(s.path("hf/tokenizer.model")));
  EXPECT_TRUE(contains(slurp(s.path("hf/TOKENIZER.md")), "data.mock"));

  // A symbolic link named tokenizer.model is replaced, never written through: the file it points
  // at keeps its bytes.
  s.write("precious.txt", "precious\n");
  std::filesystem::create_symlink(s.path("precious.txt"), s.path("hf/tokenizer.model"));
  const auto linked = s.memtrain("export-hf run/checkpoints/step-00000002 hf --force");
  ASSERT_EQ(linked.exit_code, 0) << linked.err;
  EXPECT_EQ(slurp(s.path("precious.txt")), "precious\n");
  EXPECT_FALSE(std::filesystem::is_symlink(s.path("hf/tokenizer.model")));
  EXPECT_EQ(slurp(s.path("hf/tokenizer.model")), first_tokenizer);
  // A directory there is not deleted, even with --force.
  std::filesystem::remove(s.path("hf/tokenizer.model"));
  std::filesystem::create_directories(s.path("hf/tokenizer.model/keep"));
  const auto dir = s.memtrain("export-hf run/checkpoints/step-00000002 hf --force");
  EXPECT_EQ(dir.exit_code, 2) << dir.err;
  EXPECT_TRUE(contains(dir.err, "tokenizer.model is a directory; expected the file of an earlier export")) << dir.err;
  EXPECT_TRUE(std::filesystem::is_directory(s.path("hf/tokenizer.model/keep")));
}

// A run directory given where a checkpoint belongs is a usage error naming a checkpoint in it,
// for eval and export-hf as for checkpoint verify.
TEST(ResumeData, ARunDirectoryForACheckpointIsAUsageError) {
  Scratch s;
  s.write("c.yaml", std::string(kTinyMockYaml) + "checkpoint:\n  interval: 2\n");
  ASSERT_EQ(s.memtrain("train --config c.yaml --run-dir run").exit_code, 0);
  for (const std::string command : {"eval --checkpoint run", "export-hf run hf", "checkpoint verify run"}) {
    const auto r = s.memtrain(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_TRUE(contains(r.err,
                         "checkpoint run: not a checkpoint directory (no manifest.json or meta.json); expected "
                         "one of its checkpoints, such as run/checkpoints/step-0000000"))
        << command << ": " << r.err;
  }
}

}  // namespace
}  // namespace memtrain::cli
