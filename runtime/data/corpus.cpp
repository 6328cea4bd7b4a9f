#include "runtime/data/corpus.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "runtime/core/errors.hpp"
#include "runtime/data/kjv.hpp"
#include "runtime/data/utf8.hpp"

namespace memtrain::data {
namespace fs = std::filesystem;
namespace {

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; });
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("data.corpus: cannot read " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

void check_utf8(std::string_view text, const std::string& name) {
  if (const auto bad = first_invalid_utf8(text)) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(text[*bad]));
    // The line as an editor counts it, the offset for tools such as `cmp` and `xxd -s`.
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*bad), '\n');
    throw ConfigError("data.corpus: " + name + ":" + std::to_string(line) + ": invalid UTF-8 at byte offset " +
                      std::to_string(*bad) + " (byte " + hex + "); expected UTF-8 text");
  }
}

Corpus read_kjv() {
  const std::string text = run_bible_program();
  check_utf8(text, "bible -f gen1:1-rev22:21");
  Corpus corpus;
  corpus.source = "kjv";
  corpus.xxh64 = XXH64(text.data(), text.size(), /*seed=*/0);
  std::string_view rest = text;
  std::string_view book;
  std::size_t line_number = 0;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    ++line_number;
    if (is_blank(line)) continue;
    const auto verse = split_verse_reference(line);
    if (!verse) {
      throw RuntimeError(
          "data.corpus = kjv: line " + std::to_string(line_number) +
          " of `bible -f` output has no verse reference (like `Ge1:1 `): " + std::string(line.substr(0, 40)));
    }
    if (corpus.segments.empty() || verse->book != book) {
      corpus.document_starts.push_back(corpus.segments.size());
      book = verse->book;
    }
    corpus.segments.emplace_back(verse->text);
  }
  return corpus;
}

}  // namespace

void append_text(Corpus& corpus, std::string_view text, const std::string& name) {
  check_utf8(text, name);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  bool new_document = true;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (is_blank(line)) {
      new_document = true;
      continue;
    }
    if (new_document) corpus.document_starts.push_back(corpus.segments.size());
    new_document = false;
    corpus.segments.emplace_back(line);
  }
}

Corpus read_corpus(const std::string& spec) {
  Corpus corpus;
  if (spec == "kjv") {
    corpus = read_kjv();
  } else {
    const fs::path root(spec);
    std::error_code ec;
    const auto status = fs::status(root, ec);
    if (ec || !fs::exists(status)) {
      throw ConfigError("data.corpus: " + spec +
                        " not found; expected kjv, a UTF-8 text file or a directory of .txt files");
    }
    corpus.source = spec;
    const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> hasher(XXH64_createState(), &XXH64_freeState);
    XXH64_state_t* state = hasher.get();
    XXH64_reset(state, 0);
    const auto add = [&](const fs::path& file, const std::string& relative) {
      const std::string text = read_file(file);
      // Names enter the hash too: renaming or reordering files changes the corpus.
      XXH64_update(state, relative.data(), relative.size() + 1);
      const std::uint64_t size = text.size();
      XXH64_update(state, &size, sizeof size);
      XXH64_update(state, text.data(), text.size());
      append_text(corpus, text, file.string());
    };
    if (fs::is_directory(status)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file() && entry.path().extension() == ".txt") {
          files.push_back(entry.path());
        }
      }
      if (files.empty()) {
        throw ConfigError("data.corpus: directory " + spec +
                          " contains no .txt files; expected a directory of UTF-8 .txt files");
      }
      std::sort(files.begin(), files.end());
      for (const auto& file : files) add(file, fs::relative(file, root).generic_string());
    } else {
      add(root, "");
    }
    corpus.xxh64 = XXH64_digest(state);
  }
  if (corpus.segments.empty()) {
    throw ConfigError("data.corpus: " + spec + " is empty (no non-blank line); expected UTF-8 text to train on");
  }
  return corpus;
}

}  // namespace memtrain::data
