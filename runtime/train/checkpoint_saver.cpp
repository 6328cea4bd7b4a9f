#include "runtime/train/checkpoint_saver.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/f32_access.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/root_only.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

// A tensor's bytes where they are, as a safetensors entry of its stored dtype: the file is
// written straight from the parameters and moments, with no copy of the state in between. A
// tensor in GPU memory is first copied into host bytes that `f` owns.
core::TensorView view_of(const core::Tensor& t, RankFiles& f) {
  if (t.device() != kernels::Device::cpu && t.nbytes() > 0 && !t.dry_run()) {
    auto& bytes = f.owned.emplace_back(t.nbytes());
    t.copy_to_host(bytes.data());
    return core::TensorView{core::dtype_name(t.dtype()), t.shape(), std::span<const std::byte>(bytes)};
  }
  const void* src = t.nbytes() == 0 ? nullptr : models::raw_bytes(t);
  return core::TensorView{core::dtype_name(t.dtype()), t.shape(),
                          std::span<const std::byte>(static_cast<const std::byte*>(src), t.nbytes())};
}

// header, then each view's bytes in name order: the pieces of one safetensors file.
void write_safetensors_durably(const std::string& path, const std::map<std::string, core::TensorView>& tensors,
                               const std::map<std::string, std::string>& metadata, checkpoint::WriteBudget* budget) {
  const std::vector<std::byte> header = core::safetensors_header(tensors, metadata);
  std::vector<std::span<const std::byte>> pieces{header};
  for (const auto& [name, v] : tensors) pieces.push_back(v.data);
  checkpoint::write_file_durably(path, pieces, budget);
}

const char* sharding_name(models::Sharding s) {
  switch (s) {
    case models::Sharding::replicated:
      return "replicated";
    case models::Sharding::dim0:
      return "dim0";
    case models::Sharding::dim1:
      return "dim1";
  }
  return "?";
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

std::string model_file_name(int tp_rank) {
  char s[40];
  std::snprintf(s, sizeof s, "model-tp%02d.safetensors", tp_rank);
  return s;
}

std::string optimizer_file_name(int tp_rank, int dp_rank) {
  char s[48];
  if (dp_rank < 0) {
    std::snprintf(s, sizeof s, "optimizer-tp%02d.safetensors", tp_rank);
  } else {
    std::snprintf(s, sizeof s, "optimizer-tp%02d-dp%02d.safetensors", tp_rank, dp_rank);
  }
  return s;
}

RankFiles rank_files(const CheckpointSource& src, int tp_rank, int dp_rank) {
  // Note [Optimizer state in checkpoints]
  const OptimizerState state = src.optimizer.state();
  RankFiles f;
  nlohmann::ordered_json layout = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < src.params.size(); ++i) {
    const auto& p = src.params[i];
    f.model[p.name] = view_of(p.value, f);
    if (p.sharded()) {
      layout[p.name] = {{"sharding", sharding_name(p.shard.sharding)},
                        {"offset", p.shard.offset},
                        {"full_extent", p.shard.full_extent},
                        {"valid_extent", p.shard.valid_extent}};
    }
  }
  if (!state.sharded) {
    for (const auto& t : state.replicated)
      f.optimizer[src.params[t.param].name + "." + t.suffix] = view_of(t.tensor, f);
  }
  f.optimizer_metadata = {{"memtrain_tp_rank", std::to_string(tp_rank)}};
  if (state.sharded) {
    nlohmann::ordered_json pieces = nlohmann::ordered_json::object();
    const auto piece_view = [](const float* data, std::int64_t n) {
      return core::TensorView{
          "F32",
          {n},
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), static_cast<std::size_t>(n) * 4)};
    };
    for (const auto& pc : state.pieces) {
      const std::string& name = src.params[pc.param].name;
      f.optimizer[name + ".exp_avg"] = piece_view(pc.exp_avg, pc.length);
      f.optimizer[name + ".exp_avg_sq"] = piece_view(pc.exp_avg_sq, pc.length);
      if (pc.master) f.optimizer[name + ".master"] = piece_view(pc.master, pc.length);
      pieces[name] = {pc.param_offset, pc.length};
    }
    f.optimizer_metadata["memtrain_dp_rank"] = std::to_string(dp_rank);
    f.optimizer_metadata["memtrain_zero_pieces"] = pieces.dump();
  }
  const std::int64_t step = src.optimizer.step_count();
  f.step_bytes.resize(sizeof step);
  std::memcpy(f.step_bytes.data(), &step, sizeof step);
  f.optimizer["step"] = core::TensorView{"I64", {}, std::span<const std::byte>(f.step_bytes)};
  f.model_metadata = {
      {"format", "pt"}, {"memtrain_tp_rank", std::to_string(tp_rank)}, {"memtrain_shards", layout.dump()}};
  if (dp_rank != 0) f.model.clear();  // the replicas are equal: data-parallel rank 0 writes it
  f.model_name = dp_rank == 0 ? model_file_name(tp_rank) : std::string();
  f.optimizer_name = state.sharded  ? optimizer_file_name(tp_rank, dp_rank)
                     : dp_rank == 0 ? optimizer_file_name(tp_rank)
                                    : std::string();
  if (f.optimizer_name.empty()) f.optimizer.clear();

  // Note [Compression state in checkpoints]: every rank's own.
  for (const auto& [prefix, compressor] : checkpointed_compressors(src.gradient_compressor, state)) {
    const comms::GradientCompressor::State st = compressor->state();
    for (const auto& [name, t] : st.tensors) f.compression[prefix + "." + name] = view_of(t, f);
    if (!st.flags.empty()) {
      auto& bytes = f.owned.emplace_back(st.flags.size() * sizeof(std::int32_t));
      std::memcpy(bytes.data(), st.flags.data(), bytes.size());
      f.compression[prefix + ".flags"] =
          core::TensorView{"I32", {static_cast<std::int64_t>(st.flags.size())}, std::span<const std::byte>(bytes)};
    }
  }
  if (!f.compression.empty()) {
    f.compression_name = compression_file_name(tp_rank, dp_rank);
    f.compression_metadata = {{"memtrain_tp_rank", std::to_string(tp_rank)},
                              {"memtrain_dp_rank", std::to_string(dp_rank)}};
  }
  return f;
}

std::vector<std::pair<std::string, comms::GradientCompressor*>> checkpointed_compressors(
    const comms::GradientCompressor* gradient_compressor, const OptimizerState& state) {
  std::vector<std::pair<std::string, comms::GradientCompressor*>> out;
  // The loader writes through these handles, as through the optimizer's (Note [Optimizer state
  // in checkpoints]); the synchroniser's compressor is handed in const by the saver.
  if (gradient_compressor)
    out.emplace_back("gradient_sync", const_cast<comms::GradientCompressor*>(gradient_compressor));
  for (const auto& c : state.compressors) {
    if (c.second) out.push_back(c);
  }
  return out;
}

std::int64_t tensor_bytes(const RankFiles& f) {
  std::int64_t n = 0;
  for (const auto* m : {&f.model, &f.optimizer, &f.compression})
    for (const auto& [name, v] : *m) n += static_cast<std::int64_t>(v.data.size());
  return n;
}

RankFiles copy_into(const RankFiles& f, std::span<std::byte> staging) {
  const std::int64_t need = tensor_bytes(f);
  if (static_cast<std::int64_t>(staging.size()) < need) {
    throw RuntimeError("checkpoint staging buffer holds " + std::to_string(staging.size()) +
                       " bytes; the state needs " + std::to_string(need));
  }
  RankFiles out;
  out.model_name = f.model_name;
  out.optimizer_name = f.optimizer_name;
  out.compression_name = f.compression_name;
  out.compression_metadata = f.compression_metadata;
  out.model_metadata = f.model_metadata;
  out.optimizer_metadata = f.optimizer_metadata;
  std::size_t at = 0;
  for (auto [from, to] : {std::pair{&f.model, &out.model}, std::pair{&f.optimizer, &out.optimizer},
                          std::pair{&f.compression, &out.compression}}) {
    for (const auto& [name, v] : *from) {
      if (!v.data.empty()) std::memcpy(staging.data() + at, v.data.data(), v.data.size());
      (*to)[name] = core::TensorView{v.dtype, v.shape, staging.subspan(at, v.data.size())};
      at += v.data.size();
    }
  }
  return out;
}

void write_rank_files(const RankFiles& f, const std::string& dir, checkpoint::WriteBudget* budget) {
  if (!f.model_name.empty()) {
    write_safetensors_durably((fs::path(dir) / f.model_name).string(), f.model, f.model_metadata, budget);
  }
  if (!f.optimizer_name.empty()) {
    write_safetensors_durably((fs::path(dir) / f.optimizer_name).string(), f.optimizer, f.optimizer_metadata, budget);
  }
  if (!f.compression_name.empty()) {
    write_safetensors_durably((fs::path(dir) / f.compression_name).string(), f.compression, f.compression_metadata,
                              budget);
  }
}

RootFiles root_files(const CheckpointSource& src, const comms::ProcessGrid& grid, std::int64_t step) {
  RootFiles r;
  const LossScaler::State s = src.scaler.state();
  nlohmann::ordered_json trainer;
  trainer["loss_scaler"] = {
      {"enabled", src.scaler.enabled()},    {"scale", s.scale},
      {"growth_tracker", s.growth_tracker}, {"consecutive_overflows", s.consecutive_overflows},
      {"skipped_steps", s.skipped_steps},   {"consecutive_overflows_at_min", s.consecutive_overflows_at_min}};
  r.trainer_state_json = core::json_text(trainer, 2) + "\n";
  r.config_yaml = src.canonical_config_yaml;
  auto& meta = r.meta;
  meta["format"] = "memtrain-checkpoint";
  meta["version"] = 1;
  meta["memtrain_version"] = MEMTRAIN_CHECKPOINT_VERSION;
  meta["step"] = step;
  meta["consumed_samples"] = step * static_cast<std::int64_t>(src.config.training.global_batch_size);
  meta["config_hash"] = src.config_hash;
  meta["trusted"] = src.trusted;
  if (!src.data_key.empty()) meta["data_key"] = src.data_key;
  meta["tensor_model_parallel_size"] = grid.tp_size();
  meta["data_parallel_size"] = grid.dp_size();
  meta["dtype"] = src.config.precision.dtype;
  if (!src.bf16_gemm.empty()) meta["bf16_gemm"] = src.bf16_gemm;
  if (src.pool) meta["pool"] = src.pool->to_json();
  meta["zero_stage"] = src.config.parallel.zero_stage;
  meta["lr_decay_steps"] = effective_lr_decay_steps(src.config.training);
  meta["created_at_unix_s"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  r.keep_last = src.config.checkpoint.keep_last;
  return r;
}

std::string commit_root_files(const std::string& root, std::int64_t step, RootFiles r,
                              checkpoint::WriteBudget* budget) {
  const fs::path dir = fs::path(root) / (checkpoint::step_directory_name(step) + ".tmp");
  checkpoint::write_file_durably((dir / "trainer_state.json").string(), bytes_of(r.trainer_state_json), budget);
  checkpoint::write_file_durably((dir / "config.yaml").string(), bytes_of(r.config_yaml), budget);
  return checkpoint::commit_checkpoint(root, step, std::move(r.meta), r.keep_last, budget);
}

std::string compression_file_name(int tp_rank, int dp_rank) {
  char s[48];
  std::snprintf(s, sizeof s, "compression-tp%02d-dp%02d.safetensors", tp_rank, dp_rank);
  return s;
}

std::string save_checkpoint(const CheckpointSource& src, comms::ProcessGrid& grid, const std::string& root,
                            std::int64_t step, checkpoint::WriteBudget* budget) {
  comms::Communicator& world = grid.world();
  run_on_root(world, "starting checkpoint " + std::to_string(step), [&] { checkpoint::begin_checkpoint(root, step); });
  const std::string dir = (fs::path(root) / (checkpoint::step_directory_name(step) + ".tmp")).string();
  run_where(world, true, "writing checkpoint " + std::to_string(step), "another rank",
            [&] { write_rank_files(rank_files(src, grid.tp_rank(), grid.dp_rank()), dir, budget); });
  run_on_root(world, "completing checkpoint " + std::to_string(step),
              [&] { commit_root_files(root, step, root_files(src, grid, step), budget); });
  return (fs::path(root) / checkpoint::step_directory_name(step)).string();
}

}  // namespace memtrain::train
