#include "runtime/train/checkpoint_loader.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"
#include "runtime/core/op_profile.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/config/component_registry.hpp"
#include "runtime/train/tensor_parallel_shards.hpp"

namespace memtrain::train {

using core::shape_text;
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw RuntimeError(file + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(file + ": not JSON (" + json_error_text(e.what()) + ")");
  }
}

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.is_object() || !j.contains(key)) throw RuntimeError(file + ": no field \"" + key + "\"");
  // nlohmann converts a float to an integer type without a word (1e300 became INT64_MIN).
  if constexpr (std::is_integral_v<T>) {
    const auto& v = j.at(key);
    const bool fits =
        v.is_number_unsigned()  ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
        : v.is_number_integer() ? v.get<std::int64_t>() >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                      static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.get<std::int64_t>())) <=
                                          static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                                : false;
    if (!fits) {
      throw RuntimeError(file + ": field \"" + key + "\" = " + v.dump() + "; expected an integer in [" +
                         std::to_string(std::numeric_limits<T>::min()) + ", " +
                         std::to_string(std::numeric_limits<T>::max()) + "]");
    }
  }
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    const char* expected = std::is_same_v<T, std::string> ? "a string"
                           : std::is_integral_v<T>        ? "an integer"
                                                          : "a number";
    throw RuntimeError(file + ": field \"" + key + "\" has the wrong type: " + printable(j.at(key).dump(), 80) +
                       "; expected " + expected);
  }
}

// One shard file's piece of a parameter: elements [offset, offset + length) of its flat order.
struct ShardPiece {
  std::int64_t offset = 0, length = 0;
  const core::HostArray* exp_avg = nullptr;
  const core::HostArray* exp_avg_sq = nullptr;
  const core::HostArray* master = nullptr;
  std::string file;
};

const core::HostArray* f32_piece(const std::map<std::string, core::HostArray>& arrays, const std::string& name,
                                 std::int64_t length, const std::string& file, bool required) {
  const auto it = arrays.find(name);
  if (it == arrays.end()) {
    if (required) throw RuntimeError(file + ": no tensor " + name);
    return nullptr;
  }
  if (it->second.dtype != "F32" || it->second.shape != std::vector<std::int64_t>{length}) {
    throw RuntimeError(file + ": tensor " + name + " is " + it->second.dtype + " " + shape_text(it->second.shape) +
                       ", its piece is F32 [" + std::to_string(length) + "]");
  }
  return &it->second;
}

// Note [ZeRO-1 checkpoints reshard by element ranges]
// A ZeRO-1 shard file records, per parameter, which range of its flat elements the shard's
// moments and masters cover (memtrain_zero_pieces). The ranks of another data-parallel size
// own other ranges, but every element is in exactly one shard of the writing run, so each
// rank fills its pieces from the overlaps of the old ones, and counts that every element came.
void load_zero_shards(const std::string& dir, const CheckpointMeta& meta, const comms::ProcessGrid& grid,
                      const std::vector<models::Parameter>& params, const OptimizerState& state, Optimizer& optimizer,
                      std::vector<std::map<std::string, core::HostArray>>& files) {
  if (meta.zero_stage != 1) {
    throw ConfigError("checkpoint " + dir + " was written with zero_stage " + std::to_string(meta.zero_stage) +
                      ", this run has 1; resume with the checkpoint's parallel.zero_stage");
  }
  std::map<std::string, std::vector<ShardPiece>> by_name;
  files.resize(static_cast<std::size_t>(meta.data_parallel_size));
  std::int64_t steps = -1;
  for (int r = 0; r < meta.data_parallel_size; ++r) {
    const std::string file = (fs::path(dir) / optimizer_file_name(grid.tp_rank(), r)).string();
    std::map<std::string, std::string> metadata;
    files[r] = core::read_safetensors(file, &metadata);
    const auto& arrays = files[r];
    nlohmann::json pieces;
    try {
      pieces = nlohmann::json::parse(metadata.at("memtrain_zero_pieces"));
    } catch (const std::exception&) {
      throw RuntimeError(file + ": no memtrain_zero_pieces metadata (a JSON object of [offset, length])");
    }
    if (!pieces.is_object()) throw RuntimeError(file + ": memtrain_zero_pieces is not a JSON object");
    for (auto it = pieces.begin(); it != pieces.end(); ++it) {
      ShardPiece sp;
      try {
        sp.offset = it.value().at(0).get<std::int64_t>();
        sp.length = it.value().at(1).get<std::int64_t>();
      } catch (const nlohmann::json::exception&) {
        throw RuntimeError(file + ": memtrain_zero_pieces[" + it.key() + "] is not [offset, length]");
      }
      sp.file = file;
      sp.exp_avg = f32_piece(arrays, it.key() + ".exp_avg", sp.length, file, true);
      sp.exp_avg_sq = f32_piece(arrays, it.key() + ".exp_avg_sq", sp.length, file, true);
      sp.master = f32_piece(arrays, it.key() + ".master", sp.length, file, state.masters);
      by_name[it.key()].push_back(sp);
    }
    const auto step = arrays.find("step");
    if (step == arrays.end() || step->second.dtype != "I64" || step->second.numel() != 1) {
      throw RuntimeError(file + ": no I64 scalar \"step\"");
    }
    std::memcpy(&steps, step->second.data.data(), sizeof steps);
  }
  for (const auto& pc : state.pieces) {
    const std::string& name = params[pc.param].name;
    std::int64_t covered = 0;
    for (const auto& sp : by_name[name]) {
      const std::int64_t lo = std::max(pc.param_offset, sp.offset);
      const std::int64_t hi = std::min(pc.param_offset + pc.length, sp.offset + sp.length);
      if (lo >= hi) continue;
      const auto copy = [&](float* dst, const core::HostArray* src) {
        if (dst && src) {
          std::memcpy(dst + (lo - pc.param_offset), src->data.data() + (lo - sp.offset) * 4,
                      static_cast<std::size_t>(hi - lo) * 4);
        }
      };
      copy(pc.exp_avg, sp.exp_avg);
      copy(pc.exp_avg_sq, sp.exp_avg_sq);
      copy(pc.master, sp.master);
      covered += hi - lo;
    }
    if (covered != pc.length) {
      throw RuntimeError("checkpoint " + dir + ": the ZeRO-1 shards cover " + std::to_string(covered) + " of " +
                         std::to_string(pc.length) + " elements of " + name + " from element " +
                         std::to_string(pc.param_offset) + " (a shard file is missing pieces)");
    }
  }
  optimizer.set_step_count(steps);
}

}  // namespace

void copy_array_into(core::Tensor& t, const std::map<std::string, core::HostArray>& arrays, const std::string& name,
                     const std::string& file) {
  const auto it = arrays.find(name);
  if (it == arrays.end()) throw RuntimeError(file + ": no tensor " + name + " (a checkpoint of another model?)");
  const core::HostArray& a = it->second;
  const std::string dtype = core::dtype_name(t.dtype());
  if (a.dtype != dtype || a.shape != t.shape()) {
    throw RuntimeError(file + ": tensor " + name + " is " + a.dtype + " " + shape_text(a.shape) + ", the model's is " +
                       dtype + " " + shape_text(t.shape()));
  }
  if (t.nbytes() == 0) return;
  t.copy_from_host(a.data.data());  // a memcpy on the CPU, a copy to the GPU's memory there
}

CheckpointMeta read_checkpoint_meta(const std::string& dir) {
  const std::string file = (fs::path(dir) / "meta.json").string();
  const nlohmann::json j = read_json(file);
  CheckpointMeta m;
  m.step = field<std::int64_t>(j, "step", file);
  m.tensor_model_parallel_size = field<int>(j, "tensor_model_parallel_size", file);
  m.data_parallel_size = field<int>(j, "data_parallel_size", file);
  m.lr_decay_steps = field<int>(j, "lr_decay_steps", file);
  m.dtype = field<std::string>(j, "dtype", file);
  const auto require = [&](bool ok, const char* key, std::int64_t value, const char* expected) {
    if (!ok) {
      throw RuntimeError(file + ": field \"" + key + "\" = " + std::to_string(value) + "; expected " + expected);
    }
  };
  require(m.step >= 0, "step", m.step, ">= 0");
  require(m.tensor_model_parallel_size >= 1, "tensor_model_parallel_size", m.tensor_model_parallel_size, ">= 1");
  require(m.data_parallel_size >= 1, "data_parallel_size", m.data_parallel_size, ">= 1");
  require(m.lr_decay_steps >= 0, "lr_decay_steps", m.lr_decay_steps, ">= 0");
  if (j.contains("zero_stage")) m.zero_stage = field<int>(j, "zero_stage", file);
  if (j.contains("data_key")) m.data_key = field<std::string>(j, "data_key", file);
  require(m.zero_stage == 0 || m.zero_stage == 1, "zero_stage", m.zero_stage, "0 or 1");
  if (j.contains("bf16_gemm")) {
    m.bf16_gemm = field<std::string>(j, "bf16_gemm", file);
    if (m.bf16_gemm != "native" && m.bf16_gemm != "fp32") {
      throw RuntimeError(file + ": field \"bf16_gemm\" = " + printable(m.bf16_gemm, 40) + "; expected native or fp32");
    }
  }
  if (j.contains("pool")) {
    const nlohmann::json& p = j.at("pool");
    const std::string where = file + ": field \"pool\"";
    if (!p.is_object()) throw RuntimeError(where + " = " + printable(p.dump(), 60) + "; expected an object");
    PoolRecord r;
    const auto trajectory = field<std::string>(p, "trajectory", where);
    if (trajectory != "bitwise" && trajectory != "within_rounding") {
      throw RuntimeError(where + ": field \"trajectory\" = " + printable(trajectory, 40) +
                         "; expected bitwise or within_rounding");
    }
    r.bitwise = trajectory == "bitwise";
    for (auto [key, count] :
         {std::pair{"shrinks", &r.shrinks}, std::pair{"grows", &r.grows}, std::pair{"preemptions", &r.preemptions}}) {
      *count = field<int>(p, key, where);
      if (*count < 0)
        throw RuntimeError(where + ": field \"" + key + "\" = " + std::to_string(*count) + "; expected >= 0");
    }
    r.waited_s = field<double>(p, "waited_s", where);
    if (!(r.waited_s >= 0)) {
      throw RuntimeError(where + ": field \"waited_s\" = " + p.at("waited_s").dump() + "; expected seconds >= 0");
    }
    m.pool = r;
  }
  return m;
}

namespace {

std::string compression_dp_message(const std::string& dir, int checkpoint_dp, int dp) {
  return "checkpoint " + dir + " holds the compression state of " + std::to_string(checkpoint_dp) +
         " data-parallel ranks, this run has " + std::to_string(dp) +
         "; error feedback is per rank: resume with the checkpoint's data-parallel size";
}

// Note [Resharding onto another tensor-parallel size]: what cannot be resharded.
void check_tensor_parallel_size(const std::string& dir, const CheckpointMeta& meta, int tp_size, bool zero,
                                bool compressed) {
  if (meta.tensor_model_parallel_size == tp_size) return;
  const std::string what = "checkpoint " + dir + " was written with tensor_model_parallel_size " +
                           std::to_string(meta.tensor_model_parallel_size) + ", this run has " +
                           std::to_string(tp_size) + "; ";
  if (zero || meta.zero_stage != 0) {
    throw ConfigError(what +
                      "ZeRO-1 shards are not resharded onto another tensor-parallel size: resume with the "
                      "checkpoint's tensor_model_parallel_size");
  }
  if (compressed) {
    throw ConfigError(what +
                      "compression state is per rank and bucket layout and is not resharded: resume with "
                      "the checkpoint's tensor_model_parallel_size");
  }
}

}  // namespace

void check_checkpoint_data(const std::string& dir, const CheckpointMeta& meta, const std::string& data_key,
                           const std::string& otherwise) {
  if (meta.data_key.empty() || data_key.empty() || meta.data_key == data_key) return;
  throw ConfigError("checkpoint " + dir + " was trained on data " + printable(meta.data_key, 80) +
                    ", and this run's data is " + printable(data_key, 80) +
                    " (data.corpus's contents, data.mock or the tokenizer settings differ: other token ids); "
                    "expected the data the checkpoint was trained on, or " +
                    otherwise);
}

void check_checkpoint_layout(const std::string& dir, const Config& config, int tp_size, int dp_size,
                             const std::string& data_key) {
  const CheckpointMeta meta = read_checkpoint_meta(dir);
  check_checkpoint_data(dir, meta, data_key, "another --run-dir");
  const bool compressed = keeps_per_rank_state(config);
  check_tensor_parallel_size(dir, meta, tp_size, config.parallel.zero_stage != 0, compressed);
  if (compressed && meta.data_parallel_size != dp_size) {
    throw ConfigError(compression_dp_message(dir, meta.data_parallel_size, dp_size));
  }
  if (meta.tensor_model_parallel_size != tp_size) {
    std::cerr << "memtrain: checkpoint " << dir << " was written with tensor_model_parallel_size "
              << meta.tensor_model_parallel_size << ": its shards are merged and cut for " << tp_size << "\n";
  }
}

void load_checkpoint(const std::string& dir, const comms::ProcessGrid& grid, std::vector<models::Parameter>& params,
                     Optimizer& optimizer, LossScaler& scaler, comms::GradientCompressor* gradient_compressor) {
  const CheckpointMeta meta = read_checkpoint_meta(dir);
  // Note [Optimizer state in checkpoints]
  const OptimizerState optimizer_state = optimizer.state();
  const auto compressors = checkpointed_compressors(gradient_compressor, optimizer_state);
  const bool compressed = !compressors.empty();
  if (compressed && meta.data_parallel_size != grid.dp_size()) {
    throw ConfigError(compression_dp_message(dir, meta.data_parallel_size, grid.dp_size()));
  }
  check_tensor_parallel_size(dir, meta, grid.tp_size(), optimizer_state.sharded, compressed);
  const bool reshard = meta.tensor_model_parallel_size != grid.tp_size();
  if (!optimizer_state.sharded && meta.zero_stage != 0) {
    throw ConfigError("checkpoint " + dir + " was written with zero_stage " + std::to_string(meta.zero_stage) +
                      ", this run has 0; resume with the checkpoint's parallel.zero_stage");
  }

  // The same tensor-parallel size reads this rank's files as they are; another one merges the
  // checkpoint's shards and cuts this rank's out (Note [Resharding onto another
  // tensor-parallel size]).
  MergedCheckpoint whole;
  if (reshard) whole = merge_tensor_parallel_checkpoint(dir, meta.tensor_model_parallel_size, !optimizer_state.sharded);
  const auto put = [&](core::Tensor& t, const models::Parameter& p,
                       const std::map<std::string, core::HostArray>& arrays, const std::string& name,
                       const std::string& file) {
    if (!reshard) return copy_array_into(t, arrays, name, file);
    const auto it = arrays.find(name);
    if (it == arrays.end()) throw RuntimeError(file + ": no tensor " + name + " (a checkpoint of another model?)");
    copy_shard_into(t, p.shard, it->second, name, file);
  };
  const std::string model_file = reshard ? "checkpoint " + dir + " (model, merged over its tensor-parallel ranks)"
                                         : (fs::path(dir) / model_file_name(grid.tp_rank())).string();
  const auto model = reshard ? std::move(whole.model) : core::read_safetensors(model_file);
  if (model.size() != params.size()) {
    throw RuntimeError(model_file + ": " + std::to_string(model.size()) + " tensors, the model has " +
                       std::to_string(params.size()) + " parameters (a checkpoint of another model?)");
  }
  for (auto& p : params) put(p.value, p, model, p.name, model_file);
  if (optimizer_state.sharded) {
    std::vector<std::map<std::string, core::HostArray>> shards;
    load_zero_shards(dir, meta, grid, params, optimizer_state, optimizer, shards);
  } else {
    const std::string optim_file = reshard ? "checkpoint " + dir + " (optimizer, merged over its tensor-parallel ranks)"
                                           : (fs::path(dir) / optimizer_file_name(grid.tp_rank())).string();
    const auto optim = reshard ? std::move(whole.optimizer) : core::read_safetensors(optim_file);
    for (const auto& st : optimizer_state.replicated) {
      core::Tensor t = st.tensor;  // a handle onto the live state
      const auto& p = params[st.param];
      put(t, p, optim, p.name + "." + st.suffix, optim_file);
    }
    const auto step = optim.find("step");
    if (step == optim.end() || step->second.dtype != "I64" || step->second.numel() != 1) {
      throw RuntimeError(optim_file + ": no I64 scalar \"step\"");
    }
    std::int64_t steps = 0;
    std::memcpy(&steps, step->second.data.data(), sizeof steps);
    optimizer.set_step_count(steps);
  }
  if (compressed) {
    const std::string file = (fs::path(dir) / compression_file_name(grid.tp_rank(), grid.dp_rank())).string();
    const auto arrays = core::read_safetensors(file);
    for (const auto& [prefix, compressor] : compressors) {
      comms::GradientCompressor::State st = compressor->state();
      for (auto& [name, t] : st.tensors) copy_array_into(t, arrays, prefix + "." + name, file);
      std::vector<std::int32_t> flags;
      const auto it = arrays.find(prefix + ".flags");
      if (it != arrays.end()) {
        if (it->second.dtype != "I32")
          throw RuntimeError(file + ": " + it->first + " is " + it->second.dtype + ", not I32");
        flags.resize(static_cast<std::size_t>(it->second.numel()));
        std::memcpy(flags.data(), it->second.data.data(), flags.size() * sizeof(std::int32_t));
      }
      try {
        compressor->set_flags(flags);
      } catch (const RuntimeError& e) {
        throw RuntimeError(file + ": " + e.what());
      }
    }
  }

  scaler.load(read_trainer_state(dir));
}

LossScaler::State read_trainer_state(const std::string& dir) {
  const std::string state_file = (fs::path(dir) / "trainer_state.json").string();
  const nlohmann::json state = read_json(state_file);
  const nlohmann::json ls =
      state.is_object() && state.contains("loss_scaler") ? state["loss_scaler"] : nlohmann::json();
  const std::string where = state_file + " loss_scaler";
  LossScaler::State s;
  s.scale = field<double>(ls, "scale", where);
  s.growth_tracker = field<int>(ls, "growth_tracker", where);
  s.consecutive_overflows = field<int>(ls, "consecutive_overflows", where);
  s.skipped_steps = field<std::int64_t>(ls, "skipped_steps", where);
  s.consecutive_overflows_at_min = field<int>(ls, "consecutive_overflows_at_min", where);
  return s;
}

}  // namespace memtrain::train
