#pragma once
// CLI11's parse errors in the words of memtrain's other messages.
#include <string>

namespace memtrain::cli {

// Rewrites the CLI11 (2.3) messages that name the library's counting rather than the user's
// mistake into "what was wrong; expected what" form, e.g.
//   "--progress: At Most 1 required but received 2" -> "--progress is given 2 times; expected it once"
//   "--progress: 1 required auto|live|lines missing" -> "--progress needs a value; expected auto|live|lines"
//   "Could not convert: --max-restarts = abc"       -> "--max-restarts = abc: not a number of the option's
//                                                       type (or out of its range); expected ..."
//   "--min-ranks: Value 0 not in range 1 to 1048576" -> "--min-ranks = 0: out of range; expected an
//                                                       integer in [1, 1048576]"
//   "A subcommand is required", "command is required" -> what `verb` needs
// Any other text is returned printable (memory/printable) and otherwise unchanged.
std::string usage_error_text(const std::string& what, const std::string& verb);

}  // namespace memtrain::cli
