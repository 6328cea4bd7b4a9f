#include "runtime/data/kjv.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "runtime/core/errors.hpp"

namespace memtrain::data {
namespace {

std::optional<std::string> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "/usr/bin:/bin";
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace

std::string run_bible_program() {
  const auto bible = find_on_path("bible");
  if (!bible) {
    throw ConfigError(
        "data.corpus = kjv needs the `bible` program, which is not on PATH; install the Debian "
        "package bible-kjv (scripts/install_deps.sh does) or name a UTF-8 text file or directory");
  }
  const std::string command = "'" + *bible + "' -f gen1:1-rev22:21 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw RuntimeError("data.corpus = kjv: cannot start " + *bible);
  std::string out;
  char buffer[1 << 16];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, got);
  const int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw RuntimeError("data.corpus = kjv: `" + *bible + " -f gen1:1-rev22:21` failed (status " +
                       std::to_string(status) + ")");
  }
  return out;
}

std::optional<VerseLine> split_verse_reference(std::string_view line) {
  std::size_t i = 0;
  const auto is_digit = [&](std::size_t k) {
    return k < line.size() && std::isdigit(static_cast<unsigned char>(line[k]));
  };
  const auto is_alpha = [&](std::size_t k) {
    return k < line.size() && std::isalpha(static_cast<unsigned char>(line[k]));
  };
  if (i < line.size() && line[i] >= '1' && line[i] <= '3' && is_alpha(i + 1)) ++i;
  const std::size_t letters = i;
  while (is_alpha(i)) ++i;
  if (i == letters) return std::nullopt;
  const std::size_t book_end = i;
  if (!is_digit(i)) return std::nullopt;
  while (is_digit(i)) ++i;
  if (i >= line.size() || line[i] != ':') return std::nullopt;
  ++i;
  if (!is_digit(i)) return std::nullopt;
  while (is_digit(i)) ++i;
  if (i >= line.size() || line[i] != ' ') return std::nullopt;
  return VerseLine{line.substr(0, book_end), line.substr(i + 1)};
}

}  // namespace memtrain::data
