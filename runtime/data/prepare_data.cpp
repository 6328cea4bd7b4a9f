#include "runtime/data/prepare_data.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <xxhash.h>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"
#include "runtime/data/corpus.hpp"
#include "runtime/data/corpus_split.hpp"
#include "runtime/data/file_hash.hpp"
#include "runtime/data/token_file.hpp"
#include "runtime/data/tokenizer.hpp"
#include "runtime/data/tokenizer_trainer.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::data {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr int kFormatVersion = 1;
constexpr const char* kManifest = "manifest.json";
constexpr const char* kModel = "tokenizer.model";
constexpr const char* kTrain = "train.tokens";
constexpr const char* kValid = "valid.tokens";

void check_settings(const DataConfig& config, int vocab_size) {
  if (config.tokenizer_type != "bpe" && config.tokenizer_type != "unigram") {
    throw ConfigError("data.tokenizer_type = '" + config.tokenizer_type + "'; expected bpe or unigram");
  }
  if (vocab_size <= static_cast<int>(kSpecialPieces.size())) {
    throw ConfigError("model.vocab_size = " + std::to_string(vocab_size) + "; expected more than the 5 special tokens");
  }
  if (config.cache_dir.empty()) throw ConfigError("data.cache_dir is empty; expected a directory");
}

// The settings that decide the outputs, as recorded in (and compared with) the manifest.
json settings_json(const DataConfig& config, int vocab_size, const Corpus& corpus) {
  return json{{"format_version", kFormatVersion},    {"corpus", corpus.source},
              {"corpus_xxh64", hex64(corpus.xxh64)}, {"tokenizer_type", config.tokenizer_type},
              {"vocab_size_requested", vocab_size},  {"validation_fraction", config.validation_fraction}};
}

std::string corpus_label(const std::string& source) {
  std::string stem = source == "kjv" ? "kjv" : fs::path(source).filename().string();
  if (stem.empty()) stem = fs::path(source).parent_path().filename().string();
  std::string label;
  for (const char c : stem) {
    label += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  }
  return label.substr(0, 40);
}

std::string key_name(const DataConfig& config, int vocab_size, const Corpus& corpus) {
  const std::string settings = core::json_text(settings_json(config, vocab_size, corpus));
  return corpus_label(corpus.source) + "-" + config.tokenizer_type + "-" + std::to_string(vocab_size) + "-" +
         hex64(XXH64(settings.data(), settings.size(), 0));
}

PreparedData describe(const fs::path& dir, const json& manifest) {
  PreparedData data;
  data.dir = dir.string();
  data.tokenizer_model = (dir / kModel).string();
  data.train_tokens = (dir / kTrain).string();
  data.valid_tokens = (dir / kValid).string();
  data.vocab_size = manifest.at("vocab_size").get<int>();
  return data;
}

// Empty string when `dir` holds a complete cache for `settings`, else why not.
std::string why_stale(const fs::path& dir, const json& settings, json* manifest_out) {
  std::ifstream in(dir / kManifest);
  if (!in) return "no manifest";
  json manifest;
  try {
    manifest = json::parse(in);
    for (const auto& [key, value] : settings.items()) {
      if (manifest.at(key) != value) return "setting " + key + " differs";
    }
    for (const auto& [name, entry] : manifest.at("files").items()) {
      const fs::path file = dir / name;
      std::error_code ec;
      const auto size = fs::file_size(file, ec);
      if (ec) return name + " is missing";
      if (size != entry.at("bytes").get<std::uint64_t>()) return name + " has the wrong size";
      if (hex64(xxh64_file(file.string())) != entry.at("xxh64").get<std::string>()) {
        return name + " fails its xxh64 check";
      }
    }
    for (const char* needed : {kModel, kTrain, kValid}) {
      if (!manifest.at("files").contains(needed)) return std::string(needed) + " not listed";
    }
    manifest.at("vocab_size").get<int>();
  } catch (const json::exception& e) {
    return "unreadable manifest (" + json_error_text(e.what()) + ")";
  } catch (const RuntimeError& e) {
    return e.what();
  }
  if (manifest_out) *manifest_out = std::move(manifest);
  return {};
}

TokenizedSplit encode_split(const Corpus& part, const Tokenizer& tokenizer) {
  TokenizedSplit split;
  for (std::size_t d = 0; d < part.num_documents(); ++d) {
    for (std::size_t s = part.document_starts[d]; s < part.document_end(d); ++s) {
      const auto ids = tokenizer.encode(part.segments[s]);
      split.tokens.insert(split.tokens.end(), ids.begin(), ids.end());
      split.segment_offsets.push_back(split.tokens.size());
    }
    split.document_offsets.push_back(split.segment_offsets.size() - 1);
  }
  return split;
}

void write_file_synced(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw RuntimeError("cannot write " + path.string());
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    throw RuntimeError("cannot fsync " + path.string());
  }
  ::close(fd);
}

void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Removes the temporary directory unless it was renamed into place.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(fs::path path) : path_(std::move(path)) { fs::create_directories(path_); }
  ~TemporaryDirectory() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }
  void remove() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
    path_.clear();
  }

 private:
  fs::path path_;
};

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// "<prefix><pid>@<host>-<n>-<ticks>": the owner is named, so that a later prepare can tell
// the leftovers of a process that died (Note [Temporary directories of dead prepares]).
fs::path unique_sibling(const fs::path& dir, const std::string& prefix) {
  static std::atomic<unsigned> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return dir / (prefix + std::to_string(::getpid()) + "@" + host_name() + "-" + std::to_string(counter++) + "-" +
                std::to_string(ticks % 1000000));
}

// Note [Temporary directories of dead prepares]
// A prepare killed part-way (SIGKILL, a lost node) leaves its .tmp-* (or .stale-*) directory in
// the cache forever: tokens of a whole corpus, never read again. Each name carries its owner's
// pid and host, so a prepare removes the ones whose owner is a process of this host that no
// longer exists (kill(pid, 0) fails with ESRCH). Another host's, or a live process's, are left
// alone: a cache on a shared filesystem is prepared from several machines.
void remove_dead_temporaries(const fs::path& cache_dir, std::ostream& log) {
  const std::string host = host_name();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(".tmp-") && !name.starts_with(".stale-")) continue;
    const auto at = name.rfind('@');
    if (at == std::string::npos) continue;
    const auto pid_start = name.rfind('-', at);
    const auto tail = name.find('-', at);  // "-<n>-<ticks>" after the host
    if (pid_start == std::string::npos || tail == std::string::npos) continue;
    if (name.substr(at + 1, tail - at - 1) != host) continue;
    const std::string pid_text = name.substr(pid_start + 1, at - pid_start - 1);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(pid_text);
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code removed;
    fs::remove_all(e.path(), removed);
    if (!removed) log << "data: removed " << e.path().string() << " (left by process " << pid << ", which is gone)\n";
  }
}

json build(const DataConfig& config, int vocab_size, const Corpus& corpus, const json& settings, const fs::path& dir,
           std::ostream& log) {
  const CorpusSplit split = split_corpus(corpus, config.validation_fraction);
  log << "data: " << corpus.segments.size() << " segments in " << corpus.num_documents() << " documents; "
      << split.validation.segments.size() << " held out for validation in " << split.validation_ranges.size()
      << " ranges\n";

  TokenizerSettings tokenizer_settings;
  tokenizer_settings.type = config.tokenizer_type;
  tokenizer_settings.vocab_size = vocab_size;
  log << "data: training a " << config.tokenizer_type << " SentencePiece tokenizer (" << vocab_size
      << " pieces) on the training split\n";
  const int pieces = train_tokenizer(split.train.segments, tokenizer_settings, (dir / "tokenizer").string());
  if (pieces < vocab_size) {
    log << "data: the tokenizer stopped at " << pieces << " pieces (the corpus supports no more; "
        << "model.vocab_size = " << vocab_size << " rows stay unused)\n";
  }
  const Tokenizer tokenizer((dir / kModel).string());
  const TokenizedSplit train = encode_split(split.train, tokenizer);
  const TokenizedSplit valid = encode_split(split.validation, tokenizer);
  if (train.tokens.empty() || valid.tokens.empty()) {
    throw ConfigError("data.corpus: " + corpus.source + " gives " + std::to_string(train.tokens.size()) +
                      " training and " + std::to_string(valid.tokens.size()) +
                      " validation tokens; expected a corpus large enough for both");
  }
  write_token_file((dir / kTrain).string(), train);
  write_token_file((dir / kValid).string(), valid);
  log << "data: encoded " << train.tokens.size() << " training and " << valid.tokens.size() << " validation tokens\n";

  json manifest = settings;
  manifest["vocab_size"] = pieces;
  manifest["special"] = {{"pad", kSpecialTokens.pad},
                         {"unk", kSpecialTokens.unk},
                         {"cls", kSpecialTokens.cls},
                         {"sep", kSpecialTokens.sep},
                         {"mask", kSpecialTokens.mask}};
  manifest["validation_ranges"] = split.validation_ranges;
  const auto counts = [](const TokenizedSplit& s) {
    return json{{"documents", s.num_documents()}, {"segments", s.num_segments()}, {"tokens", s.tokens.size()}};
  };
  manifest["splits"] = {{"train", counts(train)}, {"valid", counts(valid)}};
  json files = json::object();
  for (const char* name : {kModel, "tokenizer.vocab", kTrain, kValid}) {
    const fs::path file = dir / name;
    files[name] = {{"bytes", fs::file_size(file)}, {"xxh64", hex64(xxh64_file(file.string()))}};
  }
  manifest["files"] = std::move(files);
  // The manifest is written last: its presence marks the directory complete.
  write_file_synced(dir / kManifest, core::json_text(manifest, 2) + "\n");
  fsync_directory(dir);
  return manifest;
}

}  // namespace

std::string cache_key_dir(const DataConfig& config, int vocab_size) {
  check_settings(config, vocab_size);
  const Corpus corpus = read_corpus(config.corpus);
  return (fs::path(config.cache_dir) / key_name(config, vocab_size, corpus)).string();
}

PreparedData prepare_data(const DataConfig& config, int vocab_size, std::ostream& log) {
  check_settings(config, vocab_size);
  if (config.mock) {
    throw ConfigError("data.mock = true uses no corpus or tokenizer; nothing to prepare");
  }
  const Corpus corpus = read_corpus(config.corpus);
  const json settings = settings_json(config, vocab_size, corpus);
  const fs::path cache_dir(config.cache_dir);
  const fs::path dir = cache_dir / key_name(config, vocab_size, corpus);

  remove_dead_temporaries(cache_dir, log);
  json manifest;
  const std::string reason = why_stale(dir, settings, &manifest);
  if (reason.empty()) {
    log << "data: reusing " << dir.string() << "\n";
    return describe(dir, manifest);
  }
  if (fs::exists(dir)) log << "data: cache " << dir.string() << " is stale (" << reason << ")\n";
  log << "data: preparing " << dir.string() << "\n";

  std::error_code ec;
  const bool cache_dir_existed = fs::exists(cache_dir, ec);
  fs::create_directories(cache_dir, ec);
  if (ec == std::errc::not_a_directory || ec == std::errc::file_exists) {
    // A file where the directory (or a parent of it) belongs: the setting is wrong, not the machine.
    throw ConfigError("data.cache_dir = " + printable(cache_dir.string(), 200) + ": cannot create it: " + ec.message() +
                      " (a part of the path is a file); expected a directory path");
  }
  if (ec) {
    throw RuntimeError("data.cache_dir: cannot create " + cache_dir.string() + ": " + ec.message());
  }
  TemporaryDirectory temporary(unique_sibling(cache_dir, ".tmp-" + dir.filename().string() + "-"));
  try {
    manifest = build(config, vocab_size, corpus, settings, temporary.path(), log);
  } catch (const ConfigError&) {
    // A corpus the tokenizer refuses leaves nothing behind: not its temporary directory (its
    // destructor), nor a cache directory this call created for it.
    temporary.remove();
    if (!cache_dir_existed) fs::remove(cache_dir, ec);  // only when empty
    throw;
  }

  // Another process may have finished the same key meanwhile: use its complete copy.
  json theirs;
  if (why_stale(dir, settings, &theirs).empty()) {
    log << "data: another process prepared " << dir.string() << " first; using it\n";
    return describe(dir, theirs);
  }
  if (fs::exists(dir)) {
    const fs::path stale = unique_sibling(cache_dir, ".stale-");
    fs::rename(dir, stale, ec);
    if (!ec) fs::remove_all(stale, ec);
  }
  fs::rename(temporary.path(), dir, ec);
  if (ec) {
    if (why_stale(dir, settings, &theirs).empty()) return describe(dir, theirs);
    throw RuntimeError("cannot move the prepared data into " + dir.string() + ": " + ec.message());
  }
  temporary.release();
  fsync_directory(cache_dir);
  log << "data: ready: " << manifest.at("vocab_size").get<int>() << " pieces in " << dir.string() << "\n";
  return describe(dir, manifest);
}

}  // namespace memtrain::data
