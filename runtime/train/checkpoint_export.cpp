#include "runtime/train/checkpoint_export.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/cpu/half_convert.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/core/context.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/core/atomic_file.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/json_text.hpp"
#include "runtime/data/prepare_data.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/train/tensor_parallel_shards.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

// 0.1 rather than 0.10000000149011612: the float as its shortest decimal, as config.yaml has it.
double shortest(float f) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(f));
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(text, nullptr) == f) break;
  }
  return std::strtod(text, nullptr);
}

}  // namespace

std::map<std::string, core::HostArray> merged_model_tensors(const std::string& dir) {
  return merge_tensor_parallel_checkpoint(dir, read_checkpoint_meta(dir).tensor_model_parallel_size, false).model;
}

Config checkpoint_model_config(const std::string& dir) {
  // The model needs no corpus: export-hf and eval --input work where the corpus is not (another
  // machine, a relative data.corpus read from another directory, `bible` not installed).
  Config c = load_config((fs::path(dir) / "config.yaml").string(), {}, CorpusCheck::skipped);
  c.parallel.tensor_model_parallel_size = 1;
  c.parallel.sequence_parallel = false;
  return c;
}

namespace {

// Note [An export appears whole or not at all]
// export-hf writes four files; written one by one into OUT, a full disk or a kill between two
// left a new config.json beside the old model.safetensors (found by a hostile trial), a model
// that loads and is wrong. So the export is written into a staging directory beside OUT (the
// same filesystem), which first gets hard links to OUT's other entries (a user's README stays),
// and is then put in OUT's place in one step: rename(2) for a new OUT, renameat2's
// RENAME_EXCHANGE for an existing one, whose old contents are removed after. OUT is therefore
// the old export or the new one at every moment, and a failed export leaves nothing behind.
class StagingDirectory {
 public:
  explicit StagingDirectory(const std::string& out) {
    const fs::path o = fs::path(out).lexically_normal();
    const fs::path name = o.filename().empty() ? o.parent_path().filename() : o.filename();
    const fs::path parent = o.filename().empty() ? o.parent_path().parent_path() : o.parent_path();
    std::string hidden = ".";
    hidden += name.string();
    hidden += ".export-";
    hidden += std::to_string(::getpid());
    path_ = (parent.empty() ? fs::path(".") : parent) / hidden;
    std::error_code ec;
    fs::remove_all(path_, ec);
    fs::create_directories(path_, ec);
    if (ec) throw RuntimeError("export-hf: cannot create " + path_.string() + ": " + ec.message());
  }
  ~StagingDirectory() {
    std::error_code ec;
    fs::remove_all(path_, ec);  // after a failure; after success it holds the old OUT, or nothing
  }
  const fs::path& path() const { return path_; }

  // Hard links (symbolic links copied as links, folders recreated) of OUT's entries that are not
  // export files, so that the exchange keeps them.
  void link_other_entries(const fs::path& from, const fs::path& to, bool top) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(from, ec)) {
      const std::string name = e.path().filename().string();
      if (top && std::find(kHfExportFiles.begin(), kHfExportFiles.end(), name) != kHfExportFiles.end()) continue;
      const auto status = fs::symlink_status(e.path(), ec);
      if (status.type() == fs::file_type::symlink) {
        fs::copy_symlink(e.path(), to / name, ec);
      } else if (status.type() == fs::file_type::directory) {
        fs::create_directory(to / name, ec);
        if (!ec) link_other_entries(e.path(), to / name, false);
      } else {
        fs::create_hard_link(e.path(), to / name, ec);
      }
      if (ec) throw RuntimeError("export-hf: cannot keep " + e.path().string() + " in the new export: " + ec.message());
    }
    if (ec) throw RuntimeError("export-hf: cannot list " + from.string() + ": " + ec.message());
  }

  // Puts the staged export in OUT's place in one step.
  void publish(const std::string& out) {
    std::error_code ec;
    if (!fs::exists(out, ec)) {
      fs::create_directories(fs::path(out).lexically_normal().parent_path(), ec);
      fs::rename(path_, out, ec);
      if (ec) throw RuntimeError("export-hf: cannot rename " + path_.string() + " to " + out + ": " + ec.message());
    } else if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) != 0) {
      throw RuntimeError("export-hf: cannot put the export in place of " + out + ": " + std::strerror(errno));
    }
    core::sync_path(path_.parent_path().string());
  }

 private:
  fs::path path_;
};

}  // namespace

void export_hf(const std::string& dir, const std::string& final_out, bool fp32) {
  const Config c = checkpoint_model_config(dir);
  auto tensors = merged_model_tensors(dir);
  // The tensors must be the ones config.json will describe: every parameter of the model that
  // config builds, by name, dtype and shape, and nothing else (as eval and --resume require;
  // an export of a damaged checkpoint is refused rather than written inconsistent).
  {
    core::Context ctx(make_model_allocator(MemoryConfig{}));
    models::BertForMaskedLM model(c.model, ctx, model_options(c), tensor_parallel(c, nullptr));
    const std::string what = "checkpoint " + dir + " (merged model)";
    for (auto& p : model.parameters()) copy_array_into(p.value, tensors, p.name, what);
    if (tensors.size() != model.parameters().size()) {
      throw RuntimeError(what + ": " + std::to_string(tensors.size()) + " tensors, the model of its config.yaml has " +
                         std::to_string(model.parameters().size()) + " parameters");
    }
  }
  if (fp32) {
    for (auto& [name, a] : tensors) {
      if (a.dtype != "F16" && a.dtype != "BF16") continue;
      std::vector<std::uint16_t> half(static_cast<std::size_t>(a.numel()));
      std::memcpy(half.data(), a.data.data(), a.data.size());
      std::vector<float> f(half.size());
      kernels::convert_half_to_float(f.data(), half.data(), a.numel(),
                                     a.dtype == "F16" ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16);
      a = core::host_array_f32(f.data(), a.shape);
    }
  }
  std::error_code ec;
  StagingDirectory staging(final_out);  // Note [An export appears whole or not at all]
  if (fs::is_directory(final_out, ec)) staging.link_other_entries(final_out, staging.path(), true);
  const std::string out = staging.path().string();
  const std::string dtype = fp32 || c.precision.dtype == "fp32" ? "float32"
                            : c.precision.dtype == "fp16"       ? "float16"
                                                                : "bfloat16";
  nlohmann::ordered_json j;
  j["architectures"] = {"BertForMaskedLM"};
  j["model_type"] = "bert";
  j["vocab_size"] = c.model.vocab_size;
  j["hidden_size"] = c.model.hidden_size;
  j["num_hidden_layers"] = c.model.num_hidden_layers;
  j["num_attention_heads"] = c.model.num_attention_heads;
  j["intermediate_size"] = c.model.intermediate_size;
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = shortest(c.model.hidden_dropout_prob);
  j["attention_probs_dropout_prob"] = shortest(c.model.attention_probs_dropout_prob);
  j["max_position_embeddings"] = c.model.max_position_embeddings;
  j["type_vocab_size"] = c.model.type_vocab_size;
  j["initializer_range"] = shortest(c.model.initializer_range);
  j["layer_norm_eps"] = shortest(c.model.layer_norm_eps);
  j["position_embedding_type"] = "absolute";
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = dtype;
  core::write_file_atomically((fs::path(out) / "config.json").string(),
                              [&](std::ostream& o) { o << core::json_text(j, 2) << "\n"; });
  const auto bytes = core::encode_safetensors(tensors, {{"format", "pt"}});
  core::write_file_atomically((fs::path(out) / "model.safetensors").string(), [&](std::ostream& o) {
    o.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  });
  std::string note = "# Tokenizer\n\n";
  if (c.data.mock) {
    note +=
        "This model was trained on data.mock: uniform random token ids in [0, vocab_size), with no "
        "tokenizer. Feed it ids directly.\n";
  } else {
    // The SentencePiece model of the run's data cache, when this machine has it: the cache the
    // checkpoint was trained on (meta.json's data_key), not the one the corpus as it is now
    // would key, whose tokenizer may give other ids. A data_key that is not a plain directory
    // name (hand-edited) is not followed.
    std::string model;
    const std::string key = read_checkpoint_meta(dir).data_key;
    const bool plain_key =
        !key.empty() && key != "." && key != ".." &&
        key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
    if (plain_key) {
      model = (fs::path(c.data.cache_dir) / key / "tokenizer.model").string();
    } else if (key.empty()) {  // a checkpoint from before data_key: the corpus's current key
      try {
        model = (fs::path(data::cache_key_dir(c.data, c.model.vocab_size)) / "tokenizer.model").string();
      } catch (const std::exception&) {
        model.clear();  // the corpus is not here: the note says where the model lives
      }
    }
    // `--force` over an earlier export: its tokenizer.model (another model's ids, or a symbolic
    // link that copy_file would write through) is not carried into the staging directory, so
    // the exchange replaces it (Note [An export appears whole or not at all]).
    const bool copied =
        !model.empty() && fs::is_regular_file(model, ec) && fs::copy_file(model, fs::path(out) / "tokenizer.model", ec);
    note += "The ids come from memtrain's SentencePiece model (data.tokenizer_type: " + c.data.tokenizer_type +
            ", vocab_size " + std::to_string(c.model.vocab_size) + "), " +
            (copied ? std::string("copied here as tokenizer.model")
                    : "trained by `memtrain data prepare` into data.cache_dir (" + c.data.cache_dir +
                          "; not found on the machine that exported)") +
            ". Tokenize with sentencepiece.SentencePieceProcessor(model_file=\"tokenizer.model\").encode(text) "
            "and wrap each sequence as [CLS] ids [SEP], as memtrain's data pipeline does; the special "
            "tokens' ids are those of runtime/data/special_tokens.hpp.\n";
  }
  core::write_file_atomically((fs::path(out) / "TOKENIZER.md").string(), [&](std::ostream& o) { o << note; });
  staging.publish(final_out);
}

}  // namespace memtrain::train
