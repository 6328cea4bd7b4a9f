#pragma once
// A text corpus as the data pipeline sees it: documents made of segments (verses or lines).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memtrain::data {

// Segments in corpus order; document d is segments [document_starts[d], document_starts[d+1])
// (the last one runs to the end). Documents never are empty.
struct Corpus {
  std::vector<std::string> segments;
  std::vector<std::size_t> document_starts;
  std::uint64_t xxh64 = 0;  // of the raw source bytes (and file names), keys the data cache
  std::string source;       // "kjv" or the path named in data.corpus, for messages

  std::size_t num_documents() const { return document_starts.size(); }
  std::size_t document_end(std::size_t d) const {
    return d + 1 < document_starts.size() ? document_starts[d + 1] : segments.size();
  }
};

// Reads data.corpus:
// - "kjv": the King James Bible printed by Debian's `bible` program (package bible-kjv,
//   `bible -f gen1:1-rev22:21`), one segment per verse with its reference (`Ge1:1 `) stripped,
//   one document per book: 31,102 segments, 66 documents.
// - a UTF-8 text file: one segment per non-blank line; blank lines separate documents.
// - a directory: its *.txt files (recursively, in path order), each read as above and
//   starting a new document.
// Throws ConfigError: corpus not found, `bible` missing, a directory without .txt files,
// non-UTF-8 bytes ("data.corpus: <file>:<line>: invalid UTF-8 at byte offset N"), no non-blank line at all.
// Throws RuntimeError when `bible` fails or prints a line without a verse reference.
Corpus read_corpus(const std::string& corpus);

// Appends the segments and documents of one UTF-8 text (a file's contents) to `corpus`.
// `name` names the source in error messages. A leading UTF-8 byte-order mark is skipped and
// "\r\n" line ends are accepted. Throws ConfigError on a non-UTF-8 byte.
void append_text(Corpus& corpus, std::string_view text, const std::string& name);

}  // namespace memtrain::data
