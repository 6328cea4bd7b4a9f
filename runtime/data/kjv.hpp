#pragma once
// The default corpus: the King James Bible from Debian's bible-kjv package.
#include <optional>
#include <string>
#include <string_view>

namespace memtrain::data {

// Everything `bible -f gen1:1-rev22:21` prints (about 4.4 MB, one verse per line).
// Throws ConfigError when the `bible` program is not on PATH (install bible-kjv), RuntimeError
// when it fails.
std::string run_bible_program();

// A line of `bible -f` output split into its verse reference and text: "Ge1:1 In the..." ->
// book "Ge", text "In the...". The reference is [1-3]?<letters><chapter>:<verse> and one space
// (e.g. "1Sm3:4 ", "SSol1:1 "). nullopt when the line does not start with one.
struct VerseLine {
  std::string_view book;
  std::string_view text;
};
std::optional<VerseLine> split_verse_reference(std::string_view line);

}  // namespace memtrain::data
