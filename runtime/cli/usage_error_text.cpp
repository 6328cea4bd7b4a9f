#include "runtime/cli/usage_error_text.hpp"

#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/core/printable.hpp"

namespace memtrain::cli {

std::string usage_error_text(const std::string& what, const std::string& verb) {
  std::smatch m;
  static const std::regex at_most("^(--?[A-Za-z0-9-]+): At Most 1 required but received ([0-9]+)$");
  if (std::regex_match(what, m, at_most)) {
    return m[1].str() + " is given " + m[2].str() + " times; expected it once";
  }
  static const std::regex missing("^(--?[A-Za-z0-9-]+): [0-9]+ required (.*) missing$");
  if (std::regex_match(what, m, missing)) {
    return m[1].str() + " needs a value; expected " + m[1].str() + " " + printable(m[2].str(), 80);
  }
  static const std::regex convert("^Could not convert: (--?[A-Za-z0-9-]+) = (.*)$");
  if (std::regex_match(what, m, convert)) {
    return m[1].str() + " = " + printable(m[2].str(), 80) +
           ": not a number of the option's type, or out of its range; expected a value as `memtrain " + verb +
           " --help` describes";
  }
  static const std::regex range("^(--?[A-Za-z0-9-]+): Value (.*) not in range (.*) to (.*)$");
  if (std::regex_match(what, m, range)) {
    return m[1].str() + " = " + printable(m[2].str(), 80) + ": out of range; expected an integer in [" + m[3].str() +
           ", " + m[4].str() + "]";
  }
  static const std::regex extra("^The following arguments? (?:was|were) not expected: (.*)$");
  if (std::regex_match(what, m, extra)) {
    // CLI11 lists the left-over words last first ("c b" for `verify a b c`): said in the order typed.
    std::istringstream words(m[1].str());
    std::vector<std::string> typed{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    std::string in_order;
    for (auto it = typed.rbegin(); it != typed.rend(); ++it) in_order += (in_order.empty() ? "" : " ") + *it;
    return (typed.size() > 1 ? "unexpected arguments " : "unexpected argument ") + printable(in_order, 80) +
           "; expected only the arguments `memtrain " + verb + " --help` lists";
  }
  if (what == "A subcommand is required") {
    return verb.empty() ? "no verb; expected train, plan, data, replay, checkpoint, eval, export-hf or supervise"
                        : "memtrain " + verb + " needs a sub-verb (see memtrain " + verb + " --help)";
  }
  if (what == "command is required" && verb == "supervise") {
    return "memtrain supervise needs the job to run after --; expected `memtrain supervise [options] -- mpirun "
           "-np N memtrain train --config F --run-dir D`";
  }
  return printable(what);
}

}  // namespace memtrain::cli
