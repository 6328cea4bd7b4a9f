#include "runtime/train/checkpoint_saver.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/safetensors.hpp"
#include "runtime/train/root_only.hpp"

namespace memtrain::train {
namespace {

namespace fs = std::filesystem;

// A copy of a tensor's bytes as a safetensors array of its stored dtype.
core::HostArray host_copy(const core::Tensor& t) {
  core::HostArray a{core::dtype_name(t.dtype()), t.shape(), {}};
  a.data.resize(t.nbytes());
  if (t.nbytes() == 0) return a;
  const void* src = t.dtype() == core::DType::f32   ? static_cast<const void*>(t.data<float>())
                    : t.dtype() == core::DType::i32 ? static_cast<const void*>(t.data<std::int32_t>())
                                                    : static_cast<const void*>(t.data<std::uint16_t>());
  std::memcpy(a.data.data(), src, a.data.size());
  return a;
}

std::string tp_suffix(int tp_rank) {
  char s[16];
  std::snprintf(s, sizeof s, "tp%02d", tp_rank);
  return s;
}

const char* sharding_name(models::Sharding s) {
  switch (s) {
    case models::Sharding::replicated: return "replicated";
    case models::Sharding::dim0: return "dim0";
    case models::Sharding::dim1: return "dim1";
  }
  return "?";
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

void write_rank_files(const CheckpointSource& src, const std::string& dir, int tp_rank,
                      checkpoint::WriteBudget* budget) {
  const auto* adamw = dynamic_cast<const AdamW*>(&src.optimizer);
  if (!adamw) throw RuntimeError("checkpoints of this optimizer are not built (AdamW only)");
  std::map<std::string, core::HostArray> model, optim;
  nlohmann::ordered_json layout = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < src.params.size(); ++i) {
    const auto& p = src.params[i];
    model[p.name] = host_copy(p.value);
    optim[p.name + ".exp_avg"] = host_copy(adamw->exp_avg(i));
    optim[p.name + ".exp_avg_sq"] = host_copy(adamw->exp_avg_sq(i));
    if (p.master.defined()) optim[p.name + ".master"] = host_copy(p.master);
    if (p.sharded()) {
      layout[p.name] = {{"sharding", sharding_name(p.shard.sharding)},
                        {"offset", p.shard.offset},
                        {"full_extent", p.shard.full_extent},
                        {"valid_extent", p.shard.valid_extent}};
    }
  }
  const std::int64_t step = adamw->step_count();
  core::HostArray step_array{"I64", {}, std::vector<std::byte>(sizeof step)};
  std::memcpy(step_array.data.data(), &step, sizeof step);
  optim["step"] = std::move(step_array);
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"memtrain_tp_rank", std::to_string(tp_rank)}, {"memtrain_shards", layout.dump()}};
  const std::string suffix = tp_suffix(tp_rank);
  const auto model_bytes = core::encode_safetensors(model, metadata);
  checkpoint::write_file_durably((fs::path(dir) / ("model-" + suffix + ".safetensors")).string(),
                                 model_bytes, budget);
  const auto optim_bytes = core::encode_safetensors(optim, {{"memtrain_tp_rank", std::to_string(tp_rank)}});
  checkpoint::write_file_durably((fs::path(dir) / ("optimizer-" + suffix + ".safetensors")).string(),
                                 optim_bytes, budget);
}

}  // namespace

std::string save_checkpoint(const CheckpointSource& src, comms::ProcessGrid& grid,
                            const std::string& root, std::int64_t step, checkpoint::WriteBudget* budget) {
  comms::Communicator& world = grid.world();
  std::string dir;  // rank 0 creates it; the others know its name
  run_on_root(world, "starting checkpoint " + std::to_string(step),
              [&] { checkpoint::begin_checkpoint(root, step); });
  dir = (fs::path(root) / (checkpoint::step_directory_name(step) + ".tmp")).string();
  run_where(world, grid.dp_rank() == 0, "writing checkpoint " + std::to_string(step), "another rank",
            [&] { write_rank_files(src, dir, grid.tp_rank(), budget); });
  run_on_root(world, "completing checkpoint " + std::to_string(step), [&] {
    const LossScaler::State s = src.scaler.state();
    nlohmann::ordered_json trainer;
    trainer["loss_scaler"] = {{"enabled", src.scaler.enabled()},
                              {"scale", s.scale},
                              {"growth_tracker", s.growth_tracker},
                              {"consecutive_overflows", s.consecutive_overflows},
                              {"skipped_steps", s.skipped_steps},
                              {"consecutive_overflows_at_min", s.consecutive_overflows_at_min}};
    checkpoint::write_file_durably((fs::path(dir) / "trainer_state.json").string(),
                                   bytes_of(trainer.dump(2) + "\n"), budget);
    checkpoint::write_file_durably((fs::path(dir) / "config.yaml").string(),
                                   bytes_of(src.canonical_config_yaml), budget);
    nlohmann::ordered_json meta;
    meta["format"] = "memtrain-checkpoint";
    meta["version"] = 1;
    meta["memtrain_version"] = MEMTRAIN_CHECKPOINT_VERSION;
    meta["step"] = step;
    meta["consumed_samples"] = step * static_cast<std::int64_t>(src.config.training.global_batch_size);
    meta["config_hash"] = src.config_hash;
    meta["tensor_model_parallel_size"] = grid.tp_size();
    meta["data_parallel_size"] = grid.dp_size();
    meta["dtype"] = src.config.precision.dtype;
    meta["lr_decay_steps"] = effective_lr_decay_steps(src.config.training);
    meta["created_at_unix_s"] = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    checkpoint::commit_checkpoint(root, step, std::move(meta),
                                               src.config.checkpoint.keep_last, budget);
  });
  return (fs::path(root) / checkpoint::step_directory_name(step)).string();
}

}  // namespace memtrain::train
