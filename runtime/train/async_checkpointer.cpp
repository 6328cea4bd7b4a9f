#include "runtime/train/async_checkpointer.hpp"

#include <chrono>
#include <exception>
#include <filesystem>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/train/root_only.hpp"

namespace memtrain::train {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool ready(const std::future<void>& f) {
  return !f.valid() || f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}
bool ready(const std::future<std::string>& f) {
  return !f.valid() || f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

std::int64_t checkpoint_staging_bytes(const std::vector<models::Parameter>& params, const Optimizer& optimizer,
                                      int dp_rank, const comms::GradientCompressor* gradient_compressor) {
  // What rank_files writes (Note [Optimizer state in checkpoints]): the compressors' state()
  // (f32 tensors and 4-byte flags), the model on data-parallel rank 0, the optimizer's state
  // and its 8-byte step.
  const OptimizerState state = optimizer.state();
  std::int64_t n = 0;
  for (const auto& [prefix, c] : checkpointed_compressors(gradient_compressor, state)) {
    const auto st = c->state();
    n += static_cast<std::int64_t>(st.flags.size()) * 4;
    for (const auto& [name, t] : st.tensors) n += static_cast<std::int64_t>(t.nbytes());
  }
  if (dp_rank == 0) {
    for (const auto& p : params) n += static_cast<std::int64_t>(p.value.nbytes());
  }
  if (state.sharded) return n + state.shard_elements * (state.masters ? 12 : 8) + 8;  // f32 moments (+ master)
  if (dp_rank != 0) return n;
  for (const auto& t : state.replicated) n += static_cast<std::int64_t>(t.tensor.nbytes());
  return n + 8;
}

core::Tensor allocate_checkpoint_staging(const Config& config, const std::vector<models::Parameter>& params,
                                         const Optimizer& optimizer,
                                         const comms::GradientCompressor* gradient_compressor,
                                         const comms::ProcessGrid& grid, core::Context& ctx) {
  if (!config.checkpoint.async || config.checkpoint.interval == 0) return {};
  const std::int64_t bytes = checkpoint_staging_bytes(params, optimizer, grid.dp_rank(), gradient_compressor);
  if (bytes == 0) return {};
  return core::Tensor::empty(ctx, {(bytes + 3) / 4}, core::DType::f32,
                             core::tags().checkpoint);  // [bytes / 4] raw bytes
}

AsyncCheckpointer::AsyncCheckpointer(core::Tensor staging, comms::ProcessGrid& grid, std::string root,
                                     checkpoint::WriteBudget* budget, SavedCallback on_saved)
    : staging_(std::move(staging)),
      grid_(grid),
      root_(std::move(root)),
      budget_(budget),
      on_saved_(std::move(on_saved)) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (writing_.valid()) writing_.wait();
  if (committing_.valid()) committing_.wait();
}

void AsyncCheckpointer::start(const CheckpointSource& src, std::int64_t step) {
  wait();
  comms::Communicator& world = grid_.world();
  const std::string what = "writing checkpoint " + std::to_string(step);
  started_at_s_ = now_s();
  step_ = step;
  run_on_root(world, "starting checkpoint " + std::to_string(step), [&] { checkpoint::begin_checkpoint(root_, step); });
  const std::string dir = (std::filesystem::path(root_) / (checkpoint::step_directory_name(step) + ".tmp")).string();
  run_where(world, true, what, "another rank", [&] {
    RankFiles files = rank_files(src, grid_.tp_rank(), grid_.dp_rank());
    if (files.model_name.empty() && files.optimizer_name.empty() && files.compression_name.empty()) return;
    if (!staging_.defined()) throw RuntimeError("checkpoint.async has no staging buffer on this rank");
    std::span<std::byte> buffer(reinterpret_cast<std::byte*>(staging_.data<float>()), staging_.nbytes());
    RankFiles copy = copy_into(files, buffer);
    writing_ =
        std::async(std::launch::async, [this, copy = std::move(copy), dir] { write_rank_files(copy, dir, budget_); });
  });
  if (world.rank() == 0) root_files_ = root_files(src, grid_, step);
  phase_ = Phase::writing;
}

void AsyncCheckpointer::poll() { advance(false); }

void AsyncCheckpointer::wait() {
  while (pending()) advance(true);
}

void AsyncCheckpointer::advance(bool block) {
  if (phase_ == Phase::idle) return;
  comms::Communicator& world = grid_.world();
  const bool root = world.rank() == 0;
  if (phase_ == Phase::writing) {
    if (block && writing_.valid()) writing_.wait();
    std::int64_t running = ready(writing_) ? 0 : 1;
    world.allreduce_sum(&running, 1);
    if (running > 0) return;
    phase_ = Phase::idle;  // whatever happens next, this checkpoint's write is over
    run_where(world, writing_.valid(), "writing checkpoint " + std::to_string(step_), "another rank",
              [&] { writing_.get(); });
    if (root) {
      committing_ = std::async(std::launch::async, [this, files = std::move(root_files_)]() mutable {
        return commit_root_files(root_, step_, std::move(files), budget_);
      });
    }
    phase_ = Phase::committing;
    return;
  }
  if (block && committing_.valid()) committing_.wait();
  std::int64_t running = ready(committing_) ? 0 : 1;
  world.allreduce_sum(&running, 1);
  if (running > 0) return;
  phase_ = Phase::idle;
  std::string path;
  run_on_root(world, "completing checkpoint " + std::to_string(step_), [&] { path = committing_.get(); });
  if (root && on_saved_) on_saved_(step_, path, now_s() - started_at_s_);
}

}  // namespace memtrain::train
