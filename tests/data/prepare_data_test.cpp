// prepare_data: the tokenizer, the token files against the corpus text, and the cache
// (reuse, staleness, corruption, atomic build).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/core/errors.hpp"
#include "runtime/data/corpus.hpp"
#include "runtime/data/corpus_split.hpp"
#include "runtime/data/fill_mask_prompt.hpp"
#include "runtime/data/prepare_data.hpp"
#include "runtime/data/token_file.hpp"
#include "runtime/data/tokenizer.hpp"
#include "tests/data/data_test_support.hpp"

namespace memtrain::data {
namespace {

namespace fs = std::filesystem;
using testing::small_prepared;
using testing::TempDir;
using testing::write_file;

TEST(Tokenizer, SpecialTokensHaveFixedIds) {
  const Tokenizer tokenizer(small_prepared().prepared.tokenizer_model);
  const std::vector<std::string> pieces{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int id = 0; id < 5; ++id) EXPECT_EQ(tokenizer.id_to_piece(id), pieces[id]);
  EXPECT_EQ(tokenizer.special().mask, 4);
  EXPECT_EQ(tokenizer.vocab_size(), small_prepared().prepared.vocab_size);
  EXPECT_LE(tokenizer.vocab_size(), 300);
  EXPECT_THROW(tokenizer.id_to_piece(tokenizer.vocab_size()), ConfigError);
}

TEST(Tokenizer, DecodeInvertsEncodeForNormalizedText) {
  const Tokenizer tokenizer(small_prepared().prepared.tokenizer_model);
  for (const auto& text : testing::generated_sentences(50, /*seed=*/99)) {
    const auto ids = tokenizer.encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tokenizer.decode(ids), text);
  }
}

TEST(Tokenizer, MaskLiteralInTextEncodesToMaskId) {
  const Tokenizer tokenizer(small_prepared().prepared.tokenizer_model);
  const auto ids = tokenizer.encode("and the lord said [MASK] there");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tokenizer.special().mask), 1);
  EXPECT_EQ(tokenizer.decode(ids), "and the lord said [MASK] there");
}

TEST(FillMaskPrompt, MarksTheMaskPositionsOfTheText) {
  const Tokenizer tokenizer(small_prepared().prepared.tokenizer_model);
  const auto batch = fill_mask_prompt(tokenizer, "and the lord said [MASK] unto [MASK]", 64);
  const auto words = tokenizer.encode("and the lord said");
  ASSERT_EQ(batch.batch_size, 1);
  EXPECT_EQ(batch.input_ids.front(), kSpecialTokens.cls);
  EXPECT_EQ(batch.input_ids.back(), kSpecialTokens.sep);
  ASSERT_EQ(batch.masked_positions.size(), 2u);
  // [CLS] + the words before it: the first [MASK] sits right after them.
  EXPECT_EQ(batch.masked_positions[0], static_cast<int>(words.size()) + 1);
  EXPECT_EQ(batch.masked_positions[1], batch.seq_length - 2);
  EXPECT_THROW(fill_mask_prompt(tokenizer, "no mask here", 64), ConfigError);
  EXPECT_THROW(fill_mask_prompt(tokenizer, "and the lord said [MASK]", 4), ConfigError);
}

// Decoding each segment of the token files gives back the corpus lines of its split, where the
// split is recomputed from the generated text (not read from the cache).
TEST(PrepareData, TokenFilesDecodeToTheSplitText) {
  const auto& s = small_prepared();
  const Tokenizer tokenizer(s.prepared.tokenizer_model);
  Corpus corpus;
  corpus.source = "generated";
  append_text(corpus, testing::generated_corpus_text(40, 50, 11), "generated");
  const CorpusSplit split = split_corpus(corpus, s.config.validation_fraction);
  for (const bool validation : {false, true}) {
    const TokenizedSplit tokens = read_token_file(validation ? s.prepared.valid_tokens : s.prepared.train_tokens);
    const Corpus& expected = validation ? split.validation : split.train;
    ASSERT_EQ(tokens.num_segments(), expected.segments.size());
    ASSERT_EQ(tokens.num_documents(), expected.num_documents());
    for (std::size_t i = 0; i < expected.segments.size(); ++i) {
      const std::vector<std::int32_t> ids(tokens.tokens.begin() + tokens.segment_offsets[i],
                                          tokens.tokens.begin() + tokens.segment_offsets[i + 1]);
      ASSERT_EQ(tokenizer.decode(ids), expected.segments[i]) << "segment " << i;
    }
  }
  // 2,000 lines at 4%: 80 held out.
  EXPECT_EQ(split.validation.segments.size(), 80u);
}

TEST(PrepareData, SecondCallReusesTheCache) {
  const auto& s = small_prepared();
  const auto before = fs::last_write_time(s.prepared.train_tokens);
  std::ostringstream log;
  const PreparedData again = prepare_data(s.config, s.vocab_size, log);
  EXPECT_NE(log.str().find("reusing"), std::string::npos) << log.str();
  EXPECT_EQ(again.dir, s.prepared.dir);
  EXPECT_EQ(fs::last_write_time(again.train_tokens), before);
  EXPECT_EQ(again.vocab_size, s.prepared.vocab_size);
  EXPECT_EQ(cache_key_dir(s.config, s.vocab_size), s.prepared.dir);
}

// A fresh cache in its own directory, for tests that damage or change it.
struct OwnCache {
  TempDir dir;
  DataConfig config;
  OwnCache() {
    write_file(dir.file("corpus.txt"), testing::generated_corpus_text(8, 40, 5));
    config.corpus = dir.file("corpus.txt");
    config.cache_dir = dir.file("cache");
    config.validation_fraction = 0.05;
  }
  PreparedData prepare(int vocab_size, std::string* log_out = nullptr) {
    std::ostringstream log;
    PreparedData data = prepare_data(config, vocab_size, log);
    if (log_out) *log_out = log.str();
    return data;
  }
};

TEST(PrepareData, ChangedCorpusGetsANewKey) {
  OwnCache cache;
  const PreparedData first = cache.prepare(120);
  write_file(cache.config.corpus, testing::generated_corpus_text(8, 40, 6));
  std::string log;
  const PreparedData second = cache.prepare(120, &log);
  EXPECT_NE(second.dir, first.dir);
  EXPECT_EQ(log.find("reusing"), std::string::npos);
  // Other settings are part of the key too.
  EXPECT_NE(cache.prepare(130).dir, second.dir);
  cache.config.tokenizer_type = "unigram";
  EXPECT_NE(cache.prepare(120).dir, second.dir);
}

TEST(PrepareData, CorruptedTokenFileIsRebuilt) {
  OwnCache cache;
  const PreparedData first = cache.prepare(120);
  const auto good = read_token_file(first.train_tokens).tokens;
  {
    std::fstream f(first.train_tokens, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.put('\x7f');
  }
  std::string log;
  const PreparedData second = cache.prepare(120, &log);
  EXPECT_NE(log.find("stale"), std::string::npos) << log;
  EXPECT_NE(log.find("xxh64"), std::string::npos) << log;
  EXPECT_EQ(second.dir, first.dir);
  EXPECT_EQ(read_token_file(second.train_tokens).tokens, good);
}

TEST(PrepareData, MissingManifestIsRebuiltAndTemporaryDirsAreIgnored) {
  OwnCache cache;
  const PreparedData first = cache.prepare(120);
  fs::remove(fs::path(first.dir) / "manifest.json");
  // A crashed build's leftovers never count as a cache.
  fs::create_directories(cache.dir.path() / "cache" / ".tmp-leftover");
  std::string log;
  const PreparedData second = cache.prepare(120, &log);
  EXPECT_NE(log.find("no manifest"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(fs::path(second.dir) / "manifest.json"));
  // Nothing but the key directory and the old leftover remain in the cache dir.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(cache.dir.path() / "cache")) {
    ++entries;
  }
  EXPECT_EQ(entries, 2);
}

// Note [Temporary directories of dead prepares]: a prepare killed part-way left its .tmp-*
// directory in the cache forever. The next prepare removes those of processes of this host that
// are gone, and leaves a live process's and another host's alone.
TEST(PrepareData, TemporaryDirsOfDeadProcessesAreRemoved) {
  OwnCache cache;
  const PreparedData first = cache.prepare(120);
  // A pid that existed and is gone: a child that exited and was reaped.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const fs::path root = cache.dir.path() / "cache";
  const std::string key = fs::path(first.dir).filename().string();
  const fs::path dead_tmp = root / (".tmp-" + key + "-" + std::to_string(dead) + "@" + host + "-0-1");
  const fs::path dead_stale = root / (".stale-" + std::to_string(dead) + "@" + host + "-3-4");
  const fs::path live = root / (".tmp-" + key + "-1@" + std::string(host) + "-0-2");  // pid 1 lives
  const fs::path other_host = root / (".tmp-" + key + "-" + std::to_string(dead) + "@not-" + host + "-0-3");
  for (const auto& d : {dead_tmp, dead_stale, live, other_host}) fs::create_directories(d / "part");
  fs::remove(fs::path(first.dir) / "manifest.json");  // so that the next call prepares again
  std::string log;
  cache.prepare(120, &log);
  EXPECT_FALSE(fs::exists(dead_tmp)) << log;
  EXPECT_FALSE(fs::exists(dead_stale)) << log;
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other_host));
  EXPECT_NE(log.find("which is gone"), std::string::npos) << log;
}

TEST(PrepareData, ManifestRecordsHashesAndCounts) {
  const auto& s = small_prepared();
  std::ifstream in(fs::path(s.prepared.dir) / "manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  EXPECT_EQ(manifest.at("vocab_size").get<int>(), s.prepared.vocab_size);
  EXPECT_EQ(manifest.at("tokenizer_type"), "bpe");
  EXPECT_EQ(manifest.at("files").at("train.tokens").at("bytes").get<std::uint64_t>(),
            fs::file_size(s.prepared.train_tokens));
  EXPECT_EQ(manifest.at("files").at("train.tokens").at("xxh64").get<std::string>().size(), 16u);
  EXPECT_EQ(manifest.at("splits").at("valid").at("segments").get<int>(), 80);
}

// A cache directory below a file, and an empty one, are wrong settings (ConfigError, exit 2).
TEST(PrepareData, ACacheDirBelowAFileOrEmptyIsAConfigError) {
  OwnCache cache;
  write_file(cache.dir.file("a-file"), "not a directory");
  cache.config.cache_dir = cache.dir.file("a-file") + "/cache";
  EXPECT_THROW(cache.prepare(120), ConfigError);
  cache.config.cache_dir = "";
  EXPECT_THROW(cache.prepare(120), ConfigError);
}

TEST(PrepareData, UnigramTokenizerStopsAtWhatTheCorpusSupports) {
  OwnCache cache;
  cache.config.tokenizer_type = "unigram";
  const PreparedData data = cache.prepare(5000);
  EXPECT_LT(data.vocab_size, 5000);
  const Tokenizer tokenizer(data.tokenizer_model);
  EXPECT_EQ(tokenizer.vocab_size(), data.vocab_size);
  const std::string text = "the king went into the city.";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
}

// A character seen once in the corpus (like "(" in the KJV, 221 times in 4.4 MB) still gets a
// piece: no [UNK] in the encoding, and decode gives the text back.
TEST(PrepareData, RareCharactersAreNotUnknown) {
  OwnCache cache;
  const std::string rare = "the king (went) into the city; quoth he!";
  write_file(cache.config.corpus, rare + "\n" + testing::generated_corpus_text(8, 40, 5));
  const Tokenizer tokenizer(cache.prepare(200).tokenizer_model);
  const auto ids = tokenizer.encode(rare);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tokenizer.special().unk), 0);
  EXPECT_EQ(tokenizer.decode(ids), rare);
}

// Lines of one repeated character up to the sentence limit train, and longer ones are left out
// of the tokenizer's sample but still tokenized (Note [Longest training line]).
TEST(PrepareData, LongRepetitiveLinesTrainOrAreLeftOutOfTheSample) {
  OwnCache cache;
  const std::string text = std::string(16384, 'x') + "\n" + std::string(40000, 'x') + "\n" +
                           std::string(8192 * 2, 'a').replace(1, 1, "b") + "\n" +
                           testing::generated_corpus_text(8, 40, 5);
  write_file(cache.config.corpus, text);
  const PreparedData data = cache.prepare(200);
  EXPECT_GT(read_token_file(data.train_tokens).tokens.size() + read_token_file(data.valid_tokens).tokens.size(),
            40000u / 16);  // the 40,000-byte line is in the token files
}

TEST(PrepareData, BadSettingsAreConfigErrors) {
  OwnCache cache;
  using testing::expect_config_error;
  expect_config_error([&] { cache.prepare(5); }, {"model.vocab_size = 5"});
  // Fewer pieces than the corpus has characters: said in memtrain's settings (SentencePiece's
  // own advice names a command-line option memtrain does not have).
  expect_config_error(
      [&] { cache.prepare(10); },
      {"model.vocab_size = 10 is too small for this corpus: its training text has ",
       " distinct characters, and each gets a piece of its own; expected model.vocab_size well above "});
  try {
    cache.prepare(10);
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).find("--character_coverage"), std::string::npos) << e.what();
  }
  cache.config.tokenizer_type = "wordpiece";
  expect_config_error([&] { cache.prepare(120); }, {"data.tokenizer_type = 'wordpiece'"});
  cache.config.tokenizer_type = "bpe";
  cache.config.validation_fraction = 0.9;
  expect_config_error([&] { cache.prepare(120); }, {"data.validation_fraction"});
  cache.config.validation_fraction = 0.05;
  cache.config.corpus = cache.dir.file("absent.txt");
  expect_config_error([&] { cache.prepare(120); }, {"absent.txt", "not found"});
  write_file(cache.dir.file("empty.txt"), "\n\n");
  cache.config.corpus = cache.dir.file("empty.txt");
  expect_config_error([&] { cache.prepare(120); }, {"empty"});
  write_file(cache.dir.file("one.txt"), "a single line.\n");
  cache.config.corpus = cache.dir.file("one.txt");
  expect_config_error([&] { cache.prepare(120); }, {"at least 2"});
  // Lines all longer than SentencePiece's sentence limit (Note [Longest training line]) left it
  // nothing to train on, and its internal check came out as a runtime error (exit 1); at 40,000
  // bytes of one character its BPE trainer crashed.
  write_file(cache.dir.file("long.txt"),
             std::string(40000, 'x') + "\n" + std::string(40000, 'x') + "\n" + std::string(70000, 'c') + "\n");
  cache.config.corpus = cache.dir.file("long.txt");
  expect_config_error([&] { cache.prepare(120); }, {"data.corpus", "longer than SentencePiece's 16384-byte"});
  // A cache directory created for a corpus that is then refused is removed again.
  cache.config.cache_dir = cache.dir.file("fresh-cache");
  expect_config_error([&] { cache.prepare(120); }, {"data.corpus", "longer than SentencePiece's"});
  EXPECT_FALSE(fs::exists(cache.dir.file("fresh-cache")));
  // Nothing half-built was left behind by the failures.
  EXPECT_FALSE(fs::exists(cache.dir.path() / "cache") && !fs::is_empty(cache.dir.path() / "cache"));
}

}  // namespace
}  // namespace memtrain::data
