#include "runtime/train/checkpoint_eval.hpp"

#include <algorithm>
#include <set>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "comms/communicator.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/config/config_validate.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"
#include "runtime/train/checkpoint_export.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/training_data.hpp"

namespace memtrain::train {
namespace {

// [B, T] integers of `key`; empty when absent and not required.
std::vector<std::vector<std::int64_t>> rows_of(const nlohmann::json& j, const char* key, bool required,
                                               const std::string& file) {
  std::vector<std::vector<std::int64_t>> rows;
  if (!j.contains(key)) {
    if (required)
      throw ConfigError(file + ": no \"" + key + "\"; expected {\"input_ids\": [[...]], \"labels\": [[...]]}");
    return rows;
  }
  const auto& a = j[key];
  if (!a.is_array() || a.empty()) throw ConfigError(file + ": " + key + " must be a non-empty list of rows");
  for (std::size_t r = 0; r < a.size(); ++r) {
    if (!a[r].is_array()) throw ConfigError(file + ": " + key + "[" + std::to_string(r) + "] is not a list");
    std::vector<std::int64_t> row;
    for (std::size_t t = 0; t < a[r].size(); ++t) {
      const auto& v = a[r][t];
      const auto at = [&] {
        return file + ": " + key + "[" + std::to_string(r) + "][" + std::to_string(t) +
               "] = " + printable(v.dump(), 40);
      };
      if (!v.is_number_integer()) throw ConfigError(at() + " is not an integer");
      // Ids are 32-bit: a larger value is refused as written, never wrapped (to -100 or else).
      const bool fits = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= std::uint64_t{INT32_MAX}
                            : v.get<std::int64_t>() >= INT32_MIN && v.get<std::int64_t>() <= INT32_MAX;
      if (!fits) throw ConfigError(at() + " is outside the 32-bit integer range");
      row.push_back(v.get<std::int64_t>());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

struct LoadedModel {
  Config config;
  std::unique_ptr<core::Context> ctx;
  std::unique_ptr<models::BertForMaskedLM> model;
  CheckpointMeta meta;  // meta.json, read once: its step and data_key
};

LoadedModel load_model(const std::string& dir, std::ostream& log) {
  const checkpoint::VerifyReport report = checkpoint::verify_checkpoint(dir);
  if (!report.ok()) {
    std::string m = "checkpoint " + dir + " does not verify:";
    for (const auto& p : report.problems) m += "\n  " + p;
    throw RuntimeError(m);
  }
  LoadedModel l;
  l.config = checkpoint_model_config(dir);
  l.config.model.hidden_dropout_prob = 0.0f;  // evaluation: no dropout (evaluate() runs none either)
  l.config.model.attention_probs_dropout_prob = 0.0f;
  l.meta = read_checkpoint_meta(dir);
  l.ctx = std::make_unique<core::Context>(make_model_allocator(MemoryConfig{}));
  l.model = std::make_unique<models::BertForMaskedLM>(l.config.model, *l.ctx, model_options(l.config),
                                                      tensor_parallel(l.config, nullptr));
  const auto tensors = merged_model_tensors(dir);
  for (auto& p : l.model->parameters()) copy_array_into(p.value, tensors, p.name, dir + " (merged model)");
  log << "memtrain: evaluating checkpoint " << dir << " (step " << l.meta.step << ")\n";
  return l;
}

}  // namespace

EvalInput parse_eval_input(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(path + ": is a directory; expected a JSON file of token ids");
  }
  // A FIFO without a writer would block the open forever, and a device (/dev/zero) never ends.
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(path +
                      ": is not a regular file (a pipe, device or special file); expected a JSON file of "
                      "token ids");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot be read; expected a JSON file of token ids");
  std::stringstream text;
  text << in.rdbuf();
  // nlohmann::json keeps the last of two equal keys without a word; a file that names
  // "labels" twice is refused instead, as the config's YAML refuses a duplicate key.
  std::set<std::string> top_keys;
  std::string duplicate;
  const nlohmann::json::parser_callback_t note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                          nlohmann::json& parsed) {
    // The file is {"key": [[id, ...], ...]}: values sit at depth 3 at most. Deeper nesting is
    // refused as it is read (100,000 nested lists once overflowed the stack).
    if (depth > 3) {
      throw ConfigError(path +
                        ": lists nested deeper than rows of ids; expected {\"input_ids\": [[...]], "
                        "\"labels\": [[...]]}");
    }
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed.is_string() &&
        !top_keys.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  const std::string bytes = text.str();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes, note_keys);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte: the 1-based index of the byte where parsing stopped (nlohmann's documented field).
    const std::size_t at = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, bytes.size());
    const auto line = 1 + std::count(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    const std::size_t line_start = bytes.rfind('\n', at == 0 ? 0 : at - 1);
    const std::size_t column = line_start == std::string::npos || at == 0 ? at + 1 : at - line_start;
    std::ostringstream where;  // (not a chain of string +: GCC 12 warns falsely on it, -Wrestrict)
    where << path << ':' << line << ':' << column << ": not valid JSON here; expected a JSON object of token ids";
    throw ConfigError(where.str());
  } catch (const nlohmann::json::out_of_range&) {  // 406: a number such as 3e400 overflows a double
    throw ConfigError(path +
                      ": a number too large to read (beyond a double's range); expected token ids, integers "
                      "of the vocabulary");
  }
  if (!j.is_object()) throw ConfigError(path + ": not a JSON object");
  if (!duplicate.empty()) throw ConfigError(path + ": key \"" + duplicate + "\" appears twice; expected each key once");
  // A misspelt key ("attention_masks") would otherwise be a silent default.
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "input_ids" && it.key() != "labels" && it.key() != "attention_mask" &&
        it.key() != "token_type_ids") {
      throw ConfigError(path + ": unknown key \"" + it.key() +
                        "\"; expected input_ids, labels, attention_mask or token_type_ids");
    }
  }
  const auto ids = rows_of(j, "input_ids", true, path);
  const auto labels = rows_of(j, "labels", true, path);
  const auto mask = rows_of(j, "attention_mask", false, path);
  const auto types = rows_of(j, "token_type_ids", false, path);
  EvalInput e;
  e.source = path;
  e.batch_size = static_cast<int>(ids.size());
  e.seq_length = static_cast<int>(ids[0].size());
  if (e.seq_length == 0) throw ConfigError(path + ": input_ids[0] is empty");
  const auto check = [&](const std::vector<std::vector<std::int64_t>>& rows, const char* key) {
    if (rows.empty()) return;
    if (rows.size() != ids.size()) {
      throw ConfigError(path + ": " + key + " has " + std::to_string(rows.size()) + " rows, input_ids " +
                        std::to_string(ids.size()));
    }
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].size() != static_cast<std::size_t>(e.seq_length)) {
        throw ConfigError(path + ": " + key + "[" + std::to_string(r) + "] has " + std::to_string(rows[r].size()) +
                          " values, input_ids[0] has " + std::to_string(e.seq_length));
      }
    }
  };
  check(ids, "input_ids");
  check(labels, "labels");
  check(mask, "attention_mask");
  check(types, "token_type_ids");
  const std::size_t n = static_cast<std::size_t>(e.batch_size) * static_cast<std::size_t>(e.seq_length);
  e.input_ids.resize(n);
  e.labels.resize(n);
  e.attention_mask.assign(n, 1.0f);
  e.token_type_ids.assign(n, 0);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    for (int t = 0; t < e.seq_length; ++t) {
      const std::size_t i = r * static_cast<std::size_t>(e.seq_length) + static_cast<std::size_t>(t);
      e.input_ids[i] = static_cast<std::int32_t>(ids[r][t]);
      e.labels[i] = static_cast<std::int32_t>(labels[r][t]);
      if (!types.empty()) e.token_type_ids[i] = static_cast<std::int32_t>(types[r][t]);
      if (!mask.empty()) {
        if (mask[r][t] != 0 && mask[r][t] != 1) {
          throw ConfigError(path + ": attention_mask[" + std::to_string(r) + "][" + std::to_string(t) +
                            "] = " + std::to_string(mask[r][t]) + "; expected 0 or 1");
        }
        e.attention_mask[i] = static_cast<float>(mask[r][t]);
      }
    }
  }
  return e;
}

TokenEval evaluate_tokens(const std::string& dir, const EvalInput& in, std::ostream& log) {
  LoadedModel l = load_model(dir, log);
  const auto& m = l.config.model;
  if (in.seq_length > m.max_position_embeddings) {
    throw ConfigError(in.source + ": rows of " + std::to_string(in.seq_length) +
                      " tokens exceed model.max_position_embeddings = " + std::to_string(m.max_position_embeddings));
  }
  const auto where = [&](std::size_t i) {  // "[row][t]" (a stream: GCC 12 warns falsely on a + chain here)
    std::ostringstream o;
    o << '[' << i / static_cast<std::size_t>(in.seq_length) << "][" << i % static_cast<std::size_t>(in.seq_length)
      << ']';
    return o.str();
  };
  for (std::size_t i = 0; i < in.input_ids.size(); ++i) {
    if (in.input_ids[i] < 0 || in.input_ids[i] >= m.vocab_size) {
      throw ConfigError(in.source + ": input_ids" + where(i) + " = " + std::to_string(in.input_ids[i]) +
                        " is outside the vocabulary [0, " + std::to_string(m.vocab_size) + ")");
    }
    if (in.token_type_ids[i] < 0 || in.token_type_ids[i] >= m.type_vocab_size) {
      throw ConfigError(in.source + ": token_type_ids" + where(i) + " = " + std::to_string(in.token_type_ids[i]) +
                        " is outside [0, " + std::to_string(m.type_vocab_size) + ")");
    }
    if (in.labels[i] == -100) continue;
    if (in.labels[i] < 0 || in.labels[i] >= m.vocab_size) {
      throw ConfigError(in.source + ": labels" + where(i) + " = " + std::to_string(in.labels[i]) +
                        "; expected -100 or an id in [0, " + std::to_string(m.vocab_size) + ")");
    }
  }
  if (std::all_of(in.labels.begin(), in.labels.end(), [](std::int32_t y) { return y == -100; })) {
    throw ConfigError(in.source + ": no labelled position (every label is -100)");
  }
  // The rows go through the model a micro-batch at a time (the checkpoint's
  // training.micro_batch_size), so a file of any length needs the memory of one training
  // micro-batch's forward: a 5000-row file in one batch once took all of the host's 24 GB.
  // Positions are scored in file order, so the loss sums them in the same order.
  const int rows_per_batch = std::max(1, l.config.training.micro_batch_size);
  const std::size_t T = static_cast<std::size_t>(in.seq_length), V = static_cast<std::size_t>(m.vocab_size);
  TokenEval out;
  out.step = l.meta.step;
  double sum = 0;
  std::size_t scored = 0;
  for (int r0 = 0; r0 < in.batch_size; r0 += rows_per_batch) {
    const int rows = std::min(rows_per_batch, in.batch_size - r0);
    const std::size_t first = static_cast<std::size_t>(r0) * T, n = static_cast<std::size_t>(rows) * T;
    core::MlmBatch batch;
    batch.batch_size = rows;
    batch.seq_length = in.seq_length;
    batch.input_ids.assign(in.input_ids.begin() + first, in.input_ids.begin() + first + n);                 // [rows, T]
    batch.token_type_ids.assign(in.token_type_ids.begin() + first, in.token_type_ids.begin() + first + n);  // [rows, T]
    batch.attention_mask.assign(in.attention_mask.begin() + first, in.attention_mask.begin() + first + n);  // [rows, T]
    for (std::size_t i = 0; i < n; ++i) {
      if (in.labels[first + i] == -100) continue;
      batch.masked_positions.push_back(static_cast<std::int32_t>(i));
      batch.masked_labels.push_back(in.labels[first + i]);
    }
    if (batch.masked_positions.empty()) continue;
    const std::vector<float> log_probs = l.model->predict_log_probs(batch, batch.masked_positions);  // [P, V]
    for (std::size_t p = 0; p < batch.masked_positions.size(); ++p) {
      const float* row = log_probs.data() + p * V;
      sum -= row[static_cast<std::size_t>(batch.masked_labels[p])];
      out.argmax.push_back(static_cast<std::int32_t>(std::max_element(row, row + V) - row));
    }
    scored += batch.masked_positions.size();
  }
  out.loss = sum / static_cast<double>(scored);
  return out;
}

EvalResult evaluate_checkpoint(const std::string& dir, std::int64_t* step, std::ostream& log) {
  LoadedModel l = load_model(dir, log);
  if (step) *step = l.meta.step;
  auto world = comms::make_world_communicator();
  // The validation split of another corpus would be scored with this checkpoint's token ids.
  // Its key (the corpus's XXH64 and the tokenizer settings) is compared before anything is
  // prepared: a refused eval used to train a tokenizer and leave a new data cache first.
  validate_corpus(l.config);
  check_checkpoint_data(dir, l.meta, data_key_of(l.config), "`eval --input` with token ids");
  TrainingData data = load_training_data(l.config, *world, log);
  return evaluate_model(*l.model, *data.validation, *world, l.config.training.micro_batch_size,
                        l.config.training.eval_steps);
}

}  // namespace memtrain::train
