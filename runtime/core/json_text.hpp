#pragma once
// JSON text of a document that may hold strings from the file system or the command line.
#include <nlohmann/json.hpp>
#include <string>

namespace memtrain::core {

// Note [Paths that are not UTF-8]
// Linux paths are bytes: a run directory, config file or corpus named with bytes that are not
// UTF-8 (a Latin-1 file name) is valid, but nlohmann::json's dump() throws type_error 316 on
// such a string. run.json, metrics.jsonl's resumed_from line and the data cache's settings carry
// those paths only to tell a person where things are, so they are written with each invalid
// byte replaced by U+FFFD instead of failing the run halfway (it used to leave a run directory
// with config.yaml and no run.json, and a resume that always exited 1).

// j.dump(indent) with invalid UTF-8 in strings replaced by U+FFFD (error_handler_t::replace);
// never throws for a string's bytes.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
inline std::string json_text(const nlohmann::ordered_json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace memtrain::core
