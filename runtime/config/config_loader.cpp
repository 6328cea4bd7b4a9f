#include "runtime/config/config_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"
#include "runtime/config/config_alloc_conf.hpp"
#include "runtime/config/config_schema.hpp"
#include "runtime/config/config_validate.hpp"
#include "runtime/config/config_value.hpp"

namespace memtrain::train {

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& key, const std::string& value,
                       const std::string& what, const std::string& expected) {
  throw ConfigError(printable(where) + ": " + printable(key) + " = " + printable(value) + ": " + what + "; expected " +
                    expected);
}

std::string sections_list() {
  std::string s = "device";
  for (const auto& name : config_sections()) s += ", " + name;
  return s;
}

// A node as one line of text for messages: the scalar itself, or flow-style YAML, shortened.
std::string shown(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) return "(empty)";
  YAML::Emitter out;
  out << YAML::Flow << node;
  std::string s = out.c_str();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

bool is_section(const std::string& name) {
  return std::find(config_sections().begin(), config_sections().end(), name) != config_sections().end();
}

// The same words for a mistyped section in a file and in --set.
[[noreturn]] void unknown_section(const std::string& where, const std::string& name) {
  std::string near;
  std::size_t best = 3;  // at most two edits away counts as a typo
  for (const auto& known : config_sections()) {
    if (const auto d = edit_distance(name, known); d < best) {
      best = d;
      near = known;
    }
  }
  throw ConfigError(printable(where) + ": " + printable(name) + ": unknown section" +
                    (near.empty() ? std::string() : " (did you mean " + near + "?)") + "; expected one of " +
                    sections_list());
}

std::string line_of(const std::string& path, const YAML::Mark& mark) {
  return path + ":" + std::to_string(mark.line + 1);
}

// Sets one key from its text; every source (file, environment, --set) goes through here.
void apply(Config& c, const std::string& key, const std::string& text, const std::string& shown_value,
           const std::string& where) {
  if (auto why = not_built_key(key)) {
    fail(where, key, shown_value, "not supported yet", "the key left out (" + *why + ")");
  }
  const KeySpec* spec = find_key(key);
  if (spec == nullptr && (key == "<<" || key.ends_with(".<<"))) {
    // yaml-cpp reads a merge key as a plain key named "<<" (it does not implement merges).
    fail(where, key, shown_value, "a YAML merge key, which memtrain's config does not support",
         "the keys written out in the section");
  }
  if (spec == nullptr) {
    const std::string near = closest_key(key);
    fail(where, key, shown_value, near.empty() ? "unknown key" : "unknown key (did you mean " + near + "?)",
         "a key listed in docs/config.md");
  }
  try {
    spec->set(c, text);
  } catch (const ValueError& e) {
    fail(where, key, shown_value, e.what(), spec->expected);
  }
  c.origin[key] = where;
}

// A YAML value: scalars are parsed by the key's parser; an empty value, a list or a mapping is a
// type error reported with the key's expectation.
void apply_node(Config& c, const std::string& key, const YAML::Node& value, const std::string& where) {
  if (value.IsScalar()) {
    apply(c, key, value.Scalar(), value.Scalar(), where);
    return;
  }
  // Let unknown and not-built keys say so first: that is the more useful message.
  if (not_built_key(key) || find_key(key) == nullptr) apply(c, key, "", shown(value), where);
  const char* what = value.IsNull() ? "has no value" : value.IsSequence() ? "is a list" : "is a mapping";
  fail(where, key, shown(value), what, find_key(key)->expected);
}

std::string read_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw ConfigError(path + ": config file not found; expected a YAML file such as configs/tiny.yaml");
  }
  if (fs::is_directory(status)) {
    throw ConfigError(path + ": is a directory; expected a YAML file such as configs/tiny.yaml");
  }
  // A FIFO without a writer would block the open forever, and /proc or device files are not
  // configs: only a regular file (or a link to one) is read.
  if (!fs::is_regular_file(status)) {
    throw ConfigError(path +
                      ": is not a regular file (a pipe, device or special file); expected a YAML file "
                      "such as configs/tiny.yaml");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(path + ": cannot read config file (" + std::strerror(errno) + "); expected a readable YAML file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// True when `key` is a nested group of keys (precision.loss_scale), not a key itself.
bool is_subsection(const std::string& key) {
  const std::string prefix = key + ".";
  return std::any_of(config_keys().begin(), config_keys().end(),
                     [&](const KeySpec& k) { return k.name.starts_with(prefix); });
}

// A key's name; a list, mapping, null or "" as a key names nothing to set or suggest.
std::string key_name(const std::string& path, const YAML::Node& key) {
  if (!key.IsScalar() || key.Scalar().empty()) {
    const std::string what = key.IsSequence() ? "key " + printable(shown(key)) + " is a list"
                             : key.IsMap()    ? "key " + printable(shown(key)) + " is a mapping"
                                              : std::string("a key is empty");
    throw ConfigError(line_of(path, key.Mark()) + ": " + what +
                      "; expected a non-empty string (a section or key name)");
  }
  return key.Scalar();
}

// The keys of a section (prefix "training") or of a nested group (prefix "precision.loss_scale").
void load_mapping(Config& c, const std::string& path, const std::string& prefix, const YAML::Node& mapping) {
  std::map<std::string, int> seen_keys;
  for (const auto& kv : mapping) {
    const std::string key = prefix + "." + key_name(path, kv.first);
    if (auto [it, fresh] = seen_keys.emplace(key, kv.first.Mark().line + 1); !fresh) {
      fail(line_of(path, kv.first.Mark()), key, shown(kv.second),
           "duplicate key (first at line " + std::to_string(it->second) + ")", "each key once");
    }
    if (is_subsection(key)) {
      if (kv.second.IsNull()) continue;  // "loss_scale:" with nothing under it
      if (!kv.second.IsMap()) {
        fail(line_of(path, kv.second.Mark()), key, shown(kv.second), "not a mapping",
             "a mapping of " + key + ".* keys");
      }
      load_mapping(c, path, key, kv.second);
      continue;
    }
    const YAML::Mark mark = kv.second.IsNull() ? kv.first.Mark() : kv.second.Mark();
    apply_node(c, key, kv.second, line_of(path, mark));
  }
}

void load_file(Config& c, const std::string& path) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(read_file(path));
  } catch (const YAML::Exception& e) {
    throw ConfigError(line_of(path, e.mark) + ": not valid YAML (" + printable(e.msg) +
                      "); expected a YAML mapping of sections (" + sections_list() + ")");
  }
  // Note [One document per config]
  // A later document after `---` would otherwise be ignored without a word, and an empty file
  // would train BERT-Base on every default: both are almost surely mistakes, so both are refused.
  if (documents.size() > 1) {
    throw ConfigError(line_of(path, documents[1].Mark()) +
                      ": a second YAML document; expected one document per config file");
  }
  const YAML::Node root = documents.empty() ? YAML::Node() : documents.front();
  if (root.IsNull()) {
    std::string sections;
    for (const auto& name : config_sections()) sections += (sections.empty() ? "" : ", ") + name;
    throw ConfigError(path + ": config file is empty; expected a YAML mapping with sections " + sections);
  }
  if (!root.IsMap()) {
    throw ConfigError(line_of(path, root.Mark()) + ": the document is a " + (root.IsSequence() ? "list" : "scalar") +
                      "; expected a YAML mapping of sections (" + sections_list() + ")");
  }
  std::map<std::string, int> seen_sections;
  for (const auto& entry : root) {
    const std::string name = key_name(path, entry.first);
    const std::string where = line_of(path, entry.first.Mark());
    if (auto [it, fresh] = seen_sections.emplace(name, entry.first.Mark().line + 1); !fresh) {
      throw ConfigError(where + ": " + name + ": duplicate section (first at line " + std::to_string(it->second) +
                        "); expected each section once");
    }
    const bool known = is_section(name);
    if (!known && entry.second.IsMap()) unknown_section(where, name);
    if (!known) {
      // A top-level key: "device", or a section-less typo of some section's key.
      apply_node(c, name, entry.second, line_of(path, entry.second.Mark()));
      continue;
    }
    const YAML::Node& section = entry.second;
    if (section.IsNull()) continue;  // "health:" with nothing under it
    if (!section.IsMap()) {
      fail(where, name, shown(section), "not a mapping", "a mapping of " + name + ".* keys");
    }
    load_mapping(c, path, name, section);
  }
}

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

void apply_override(Config& c, const std::string& arg) {
  const std::string where = "--set " + arg;
  const auto eq = arg.find('=');
  if (eq == std::string::npos) {
    throw ConfigError(where + ": no '='; expected section.key=value, e.g. training.max_steps=100");
  }
  const std::string key = trimmed(std::string_view(arg).substr(0, eq));
  std::string value = trimmed(std::string_view(arg).substr(eq + 1));
  // Quotes a shell passed through, as YAML would read them; unquoted, a '#' after a space starts
  // a comment, as it does in the file.
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  } else if (const auto hash = value.find_first_of('#');
             hash != std::string::npos && (hash == 0 || value[hash - 1] == ' ' || value[hash - 1] == '\t')) {
    value = trimmed(std::string_view(value).substr(0, hash));
  }
  if (key.empty()) {
    throw ConfigError(printable(where) + ": empty key; expected section.key=value, e.g. training.max_steps=100");
  }
  if (const auto dot = key.find('.'); dot != std::string::npos && !is_section(key.substr(0, dot))) {
    unknown_section(where, key.substr(0, dot));
  }
  if (is_section(key) || is_subsection(key)) {
    throw ConfigError(where + ": " + key + " is a section; expected section.key=value, e.g. " + key + "." +
                      "<key>=value");
  }
  apply(c, key, value, value, where);
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides, CorpusCheck corpus) {
  Config c;
  c.path = path;
  c.name = std::filesystem::path(path).stem().string();
  load_file(c, path);
  if (const char* conf = std::getenv("MEMTRAIN_ALLOC_CONF"); conf != nullptr && *conf != '\0') {
    apply_alloc_conf(c, conf);
  }
  for (const auto& arg : overrides) apply_override(c, arg);
  validate_config(c, corpus);
  return c;
}

void check_tensor_parallel_world(const Config& c, int world_size) {
  const int tp = c.parallel.tensor_model_parallel_size;
  if (world_size >= 1 && world_size % tp == 0) return;
  fail(where_set(c, "parallel.tensor_model_parallel_size"), "parallel.tensor_model_parallel_size", std::to_string(tp),
       "does not divide the world of " + std::to_string(world_size) + (world_size == 1 ? " rank" : " ranks"),
       "a divisor of the number of ranks (world = tensor_model_parallel_size x data-parallel "
       "size; launch a multiple of " +
           std::to_string(tp) + " ranks)");
}

void check_data_parallel_size(const Config& c, int data_parallel_size) {
  const long long step = static_cast<long long>(c.training.micro_batch_size) * data_parallel_size;
  if (data_parallel_size < 1 || c.training.global_batch_size % step != 0) {
    fail(where_set(c, "training.global_batch_size"), "training.global_batch_size",
         std::to_string(c.training.global_batch_size),
         "not a multiple of training.micro_batch_size x data-parallel size = " +
             std::to_string(c.training.micro_batch_size) + " x " + std::to_string(data_parallel_size) + " = " +
             std::to_string(step),
         "a multiple of " + std::to_string(step) + " (global = micro x accumulation steps x data-parallel ranks)");
  }
}

}  // namespace memtrain::train
