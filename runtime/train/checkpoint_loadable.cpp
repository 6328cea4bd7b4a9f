#include "runtime/train/checkpoint_loadable.hpp"

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "comms/process_grid.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/core/op_profile.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/checkpoint_loader.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/train/training_job.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

// More lines than this about one file say little more than the first ones.
constexpr std::size_t kLinesPerFile = 4;
// A layout of more ranks than this is not checked (meta.json edited to a huge size).
constexpr std::int64_t kMaxCheckedRanks = std::int64_t{1} << 16;

// "<file>: <what>", `what` without the "<dir>/<file>: " a reader starts its messages with.
std::string file_problem(const std::string& dir, const std::string& file, const std::string& what) {
  const std::string prefix = (fs::path(dir) / file).string() + ": ";
  return file + ": " + (what.starts_with(prefix) ? what.substr(prefix.size()) : what);
}

// The last component of `dir`, also when it ends with a slash.
std::string directory_name(const std::string& dir) {
  fs::path p(dir);
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

// The files the manifest names; empty when it cannot be read (verify_checkpoint reports that).
std::set<std::string> manifest_names(const std::string& dir) {
  std::set<std::string> names;
  try {
    std::ifstream in(fs::path(dir) / "manifest.json", std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    for (const auto& [name, digest] : checkpoint::parse_manifest(text.str())) names.insert(name);
  } catch (const std::exception&) {}
  return names;
}

bool is_shard_file(const std::string& name) {
  return name.ends_with(".safetensors") &&
         (name.starts_with("model-tp") || name.starts_with("optimizer-tp") || name.starts_with("compression-tp"));
}

std::string layout_text(const CheckpointMeta& meta) {
  return "tensor_model_parallel_size " + std::to_string(meta.tensor_model_parallel_size) + ", data_parallel_size " +
         std::to_string(meta.data_parallel_size) + ", zero_stage " + std::to_string(meta.zero_stage);
}

// A tensor as the saver writes it.
struct Expected {
  std::string dtype;
  std::vector<std::int64_t> shape;
};

// name -> dtype and shape of the tensors in `views` (whose bytes are not looked at).
std::map<std::string, Expected> expected_of(const std::map<std::string, core::TensorView>& views) {
  std::map<std::string, Expected> out;
  for (const auto& [name, v] : views) out[name] = Expected{v.dtype, v.shape};
  return out;
}

// Adds `lines` about `file` to `problems`, at most kLinesPerFile of them and a count of the rest.
void add_lines(const std::string& file, const std::vector<std::string>& lines, std::vector<std::string>& problems) {
  for (std::size_t i = 0; i < lines.size() && i < kLinesPerFile; ++i) problems.push_back(file + ": " + lines[i]);
  if (lines.size() > kLinesPerFile) {
    problems.push_back(file + ": and " + std::to_string(lines.size() - kLinesPerFile) + " more tensors that differ");
  }
}

// The tensor list of `file`'s safetensors header; nullopt, with the reason in `problems`, when
// it cannot be read.
std::optional<std::map<std::string, core::HostArray>> read_header(const std::string& dir, const std::string& file,
                                                                  std::vector<std::string>& problems) {
  try {
    return core::read_safetensors_header((fs::path(dir) / file).string());
  } catch (const std::exception& e) {
    problems.push_back(file_problem(dir, file, e.what()));
    return std::nullopt;
  }
}

// The header of `file` against the tensors the saver writes there (`expected`: name -> dtype
// and shape). `model` says whose tensors they are, for the messages.
void compare_header(const std::string& dir, const std::string& file, const std::map<std::string, Expected>& expected,
                    const std::string& model, std::vector<std::string>& problems) {
  const auto read = read_header(dir, file, problems);
  if (!read) return;
  const std::map<std::string, core::HostArray>& header = *read;
  std::vector<std::string> lines;
  for (const auto& [name, view] : expected) {
    const auto it = header.find(name);
    if (it == header.end()) {
      lines.push_back("no tensor " + name + ", which " + model + " has");
    } else if (it->second.dtype != view.dtype || it->second.shape != view.shape) {
      lines.push_back("tensor " + name + " is " + it->second.dtype + " " + core::shape_text(it->second.shape) + ", " +
                      model + " has " + view.dtype + " " + core::shape_text(view.shape));
    }
  }
  for (const auto& [name, array] : header) {
    if (!expected.count(name)) lines.push_back("tensor " + name + " is not one of " + model + " (renamed?)");
  }
  add_lines(file, lines, problems);
}

// A ZeRO-1 shard file: its pieces' element ranges are known only with values, so only their
// names and form are checked ("<parameter>.exp_avg" etc., [length] F32) and the step count.
void check_zero_shard(const std::string& dir, const std::string& file, const std::set<std::string>& parameters,
                      std::vector<std::string>& problems) {
  const auto read = read_header(dir, file, problems);
  if (!read) return;
  const std::map<std::string, core::HostArray>& header = *read;
  std::vector<std::string> lines;
  const auto step = header.find("step");
  if (step == header.end() || step->second.dtype != "I64" || step->second.numel() != 1) {
    lines.push_back("no I64 scalar \"step\"");
  }
  for (const auto& [name, array] : header) {
    if (name == "step") continue;
    const auto dot = name.rfind('.');
    const std::string suffix = dot == std::string::npos ? "" : name.substr(dot + 1);
    const bool known =
        (suffix == "exp_avg" || suffix == "exp_avg_sq" || suffix == "master") && parameters.count(name.substr(0, dot));
    if (!known) {
      lines.push_back("tensor " + name +
                      " is not a piece of the optimizer state of a parameter of the model (renamed?)");
    } else if (array.dtype != "F32" || array.shape.size() != 1) {
      lines.push_back("tensor " + name + " is " + array.dtype + " " + core::shape_text(array.shape) +
                      ", a piece is F32 [length]");
    }
  }
  add_lines(file, lines, problems);
}

}  // namespace

std::vector<std::string> verify_loadable(const std::string& dir) {
  std::vector<std::string> problems;
  CheckpointMeta meta;
  try {
    meta = read_checkpoint_meta(dir);
  } catch (const std::exception& e) {
    problems.push_back(file_problem(dir, "meta.json", e.what()));
    return problems;  // the rest is read by the layout it records
  }
  const std::string name = directory_name(dir);
  if (const auto named = checkpoint::parse_step_directory_name(name); named && *named != meta.step) {
    problems.push_back("meta.json: \"step\" is " + std::to_string(meta.step) + ", and the directory " + name +
                       " is the checkpoint of step " + std::to_string(*named) + " (renamed, or meta.json edited?)");
  }

  const int tp = meta.tensor_model_parallel_size;
  const int dp = meta.data_parallel_size;
  const std::int64_t ranks = std::int64_t{tp} * dp;
  if (ranks > kMaxCheckedRanks) {
    problems.push_back("meta.json: " + layout_text(meta) + " is " + std::to_string(ranks) + " ranks, more than " +
                       std::to_string(kMaxCheckedRanks) + " (edited?)");
    return problems;
  }

  // The shard files the layout needs, each in the manifest, and no shard file of another layout.
  const std::set<std::string> listed = manifest_names(dir);
  std::set<std::string> expected = {"config.yaml", "trainer_state.json"};
  for (int t = 0; t < tp; ++t) {
    expected.insert(model_file_name(t));
    if (meta.zero_stage == 1) {
      for (int d = 0; d < dp; ++d) expected.insert(optimizer_file_name(t, d));
    } else {
      expected.insert(optimizer_file_name(t));
    }
  }
  const auto check_files = [&](const std::set<std::string>& needed) {
    std::vector<std::string> missing;
    for (const auto& f : needed) {
      if (!listed.count(f)) missing.push_back(f);
    }
    for (std::size_t i = 0; i < missing.size() && i < kLinesPerFile; ++i) {
      problems.push_back(missing[i] + ": missing, and meta.json's layout (" + layout_text(meta) + ") needs it");
    }
    if (missing.size() > kLinesPerFile) {
      problems.push_back("meta.json: and " + std::to_string(missing.size() - kLinesPerFile) +
                         " more files of its layout missing");
    }
  };
  check_files(expected);

  Config config;
  bool have_config = false;
  try {
    config = load_config((fs::path(dir) / "config.yaml").string(), {}, CorpusCheck::skipped);
    have_config = true;
  } catch (const std::exception& e) {
    problems.push_back(file_problem(dir, "config.yaml", e.what()));
  }
  try {
    read_trainer_state(dir);
  } catch (const std::exception& e) {
    problems.push_back(file_problem(dir, "trainer_state.json", e.what()));
  }

  // The job config.yaml describes, on paper, in meta.json's layout: what its saver writes.
  std::map<std::string, std::map<std::string, Expected>> written;  // file -> tensors
  bool built = false;       // the job could be built: `written` and `compressed` are known
  bool compressed = false;  // its ranks write compression files
  std::set<std::string> parameter_names;
  if (have_config) {
    if (config.precision.dtype != meta.dtype) {
      problems.push_back("meta.json: \"dtype\" is " + meta.dtype + ", and config.yaml has precision.dtype " +
                         config.precision.dtype);
    }
    if (config.parallel.tensor_model_parallel_size != tp) {
      problems.push_back("meta.json: \"tensor_model_parallel_size\" is " + std::to_string(tp) +
                         ", and config.yaml has parallel.tensor_model_parallel_size " +
                         std::to_string(config.parallel.tensor_model_parallel_size));
    }
    if (config.parallel.zero_stage != meta.zero_stage) {
      problems.push_back("meta.json: \"zero_stage\" is " + std::to_string(meta.zero_stage) +
                         ", and config.yaml has parallel.zero_stage " + std::to_string(config.parallel.zero_stage));
    }
    try {
      Config c = config;
      c.parallel.tensor_model_parallel_size = tp;
      c.parallel.zero_stage = meta.zero_stage;
      if (c.memory.recompute == "auto") c.memory.recompute = "none";  // parameters are the same
      c.memory.capacity = 0;  // nothing is reserved on paper, and no ledger is joined
      c.memory.limit = 0;
      c.memory.reservation = 0;
      c.memory.trace = false;
      auto grid = comms::ProcessGrid::simulated(static_cast<int>(ranks), tp);
      std::ostringstream discard;
      const TrainingJob job(
          c, grid, JobPlacement{SimulatedDevice{std::size_t{1} << 50, "checkpoint check"}, nullptr, {}}, discard);
      const CheckpointSource source{c,
                                    job.model.parameters(),
                                    *job.optimizer,
                                    job.scaler,
                                    "",
                                    "",
                                    job.gradient_sync.compressor(),
                                    /*data_key=*/"",
                                    /*trusted=*/true,
                                    /*bf16_gemm=*/""};
      const RankFiles files = rank_files(source, 0, 0);
      for (int t = 0; t < tp; ++t) {
        written[model_file_name(t)] = expected_of(files.model);
        if (meta.zero_stage == 0) written[optimizer_file_name(t)] = expected_of(files.optimizer);
      }
      compressed = !files.compression_name.empty();  // the saver writes one exactly then
      for (const auto& p : job.model.parameters()) parameter_names.insert(p.name);
      built = true;
    } catch (const std::exception& e) {
      problems.push_back("config.yaml: its model cannot be built in meta.json's layout (" + layout_text(meta) +
                         "): " + e.what());
    }
  }
  if (compressed) {
    std::set<std::string> compression;
    for (int t = 0; t < tp; ++t) {
      for (int d = 0; d < dp; ++d) compression.insert(compression_file_name(t, d));
    }
    check_files(compression);
    expected.insert(compression.begin(), compression.end());
  }
  for (const auto& f : listed) {
    // Without the job it is unknown whether compression files belong: they are not named then.
    if (is_shard_file(f) && !expected.count(f) && (built || !f.starts_with("compression-tp"))) {
      problems.push_back(f + ": not a file of meta.json's layout (" + layout_text(meta) + ")");
    }
  }

  // Every tensor against the model, file by file.
  const std::string model = "the model of config.yaml (tensor_model_parallel_size " + std::to_string(tp) + ")";
  for (const auto& [file, tensors] : written) {
    if (listed.count(file)) compare_header(dir, file, tensors, model, problems);
  }
  if (meta.zero_stage == 1 && !parameter_names.empty()) {
    for (int t = 0; t < tp; ++t) {
      for (int d = 0; d < dp; ++d) {
        const std::string file = optimizer_file_name(t, d);
        if (listed.count(file)) check_zero_shard(dir, file, parameter_names, problems);
      }
    }
  }
  return problems;
}

}  // namespace memtrain::train
