#pragma once
// checkpoint.async: a checkpoint copied into a staging buffer at its step and written by a
// background thread while training goes on (docs/checkpoints.md, "Asynchronous checkpoints").
#include <cstdint>
#include <functional>
#include <future>
#include <string>

#include "comms/process_grid.hpp"
#include "runtime/checkpoint/durable_file.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"
#include "runtime/train/checkpoint_saver.hpp"

namespace memtrain::train {

// Note [An asynchronous checkpoint is committed by a vote]
// The staging copy is what makes the files equal to a synchronous checkpoint's: the writer
// thread reads only the copy taken after step S, so steps S+1, ... may change the parameters
// and moments under it. Rank 0 may commit (meta.json, manifest, rename, `latest`) only once
// every writer's files are on disk, and the background threads never call MPI (the
// communicator is not promised to be thread-safe, and a collective there would interleave
// with the training step's). So after every step, while a checkpoint is in flight, the main
// threads vote in one small all-reduce: "my part is still running" and "my part failed". All
// done: rank 0 starts the commit on its thread; the next vote learns when it has finished.
// A failure anywhere raises on every rank at that vote, as a synchronous save would. A new
// checkpoint, a rollback and the end of the run first wait for the one in flight, so at most
// one is ever pending and the staging buffer is reused. Killed while one is pending, the run
// loses that checkpoint only: it is still step-NNNNNNNN.tmp/, and the previous one is whole.

// Bytes a staging copy of this rank's checkpoint files needs (tensor_bytes of its rank_files):
// on data-parallel rank 0 every value, and a replicated optimizer state (AdamW's moments and
// masters); a sharded one (ZeroAdamW's) on every rank; plus the 8-byte step count wherever an
// optimizer file is written; and on every rank the compressors' state (`gradient_compressor`
// and the optimizer's own: checkpointed_compressors). Reads shapes only, so it works in a dry run.
std::int64_t checkpoint_staging_bytes(const std::vector<models::Parameter>& params, const Optimizer& optimizer,
                                      int dp_rank, const comms::GradientCompressor* gradient_compressor = nullptr);

// The staging buffer for checkpoint.async, allocated up front under tag "checkpoint" (so
// `memtrain plan` and the allocator statistics count it): checkpoint_staging_bytes on the ranks
// that write files, undefined elsewhere and when checkpoint.async is off or
// checkpoint.interval is 0. Throws memtrain::OutOfMemory.
core::Tensor allocate_checkpoint_staging(const Config& config, const std::vector<models::Parameter>& params,
                                         const Optimizer& optimizer,
                                         const comms::GradientCompressor* gradient_compressor,
                                         const comms::ProcessGrid& grid, core::Context& ctx);

class AsyncCheckpointer {
 public:
  // Told on rank 0 when a checkpoint is complete: its step, path, and seconds from its step.
  using SavedCallback = std::function<void(std::int64_t step, const std::string& path, double seconds)>;

  // `staging` from allocate_checkpoint_staging. Everything passed must outlive this object.
  AsyncCheckpointer(core::Tensor staging, comms::ProcessGrid& grid, std::string checkpoints_root,
                    checkpoint::WriteBudget* budget, SavedCallback on_saved);
  // Waits for the background work (its failure is then dropped: an exception is in flight).
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Collective. Waits for the checkpoint in flight (wait()), then begins `step`'s: rank 0
  // creates its .tmp directory, the writers copy their state into the staging buffer and a
  // background thread writes it. Throws memtrain::RuntimeError on every rank when any failed.
  void start(const CheckpointSource& source, std::int64_t step);
  // Collective; after every step. Advances the checkpoint in flight without waiting (Note [An
  // asynchronous checkpoint is committed by a vote]). Throws as start().
  void poll();
  // Collective: finishes the checkpoint in flight. Throws as start().
  void wait();
  bool pending() const { return phase_ != Phase::idle; }

 private:
  enum class Phase { idle, writing, committing };
  void advance(bool block);

  core::Tensor staging_;
  comms::ProcessGrid& grid_;
  std::string root_;
  checkpoint::WriteBudget* budget_;
  SavedCallback on_saved_;
  Phase phase_ = Phase::idle;
  std::int64_t step_ = 0;
  double started_at_s_ = 0;
  RootFiles root_files_;
  std::future<void> writing_;            // this rank's files (writers only)
  std::future<std::string> committing_;  // rank 0's commit; the final path
};

}  // namespace memtrain::train
