#pragma once
// Data-parallel gradient synchronisation: each bucket's all-reduce starts on a communication
// thread as soon as backward has finished its gradients, while backward goes on (PyTorch DDP,
// Li et al. 2020, "PyTorch Distributed", section 3.2.3; Megatron-LM's overlap_grad_reduce).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/shard_layout.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::comms {

// all_reduce: every rank gets each bucket's sum (ZeRO stage 0). reduce_scatter: rank r gets
// the sum of its shard of each bucket only (ZeRO stage 1, Rajbhandari et al. 2020, section
// 5.1: P_os), elements [shard_begin(b), shard_begin(b) + shard_count(b)) of the bucket, as
// shard_counts splits it; the rest of the bucket is left undefined.
enum class GradientReduction { all_reduce, reduce_scatter };

// What one step's synchronisation did on this rank.
struct GradientSyncStats {
  // Payload bytes handed to collectives: n x 4 per all-reduce of n f32 elements (16-bit
  // gradients travel as f32, Note [16-bit gradients are summed in f32]), whatever algorithm
  // MPI picks. metrics.jsonl comm_bytes.
  std::int64_t bytes = 0;
  std::int64_t calls = 0;  // collectives
  // Seconds inside the collectives (on the communication thread when it overlaps backward).
  double comm_s = 0;
  // Seconds finish() waited: the communication backward did not hide (all of it without
  // overlap). metrics.jsonl time_comm_exposed_s.
  double exposed_s = 0;
};

// Note [Buckets overlap backward]
// Backward produces gradients from the last layer to the first, so the buckets are laid out in
// that order (make_gradient_buckets) and the model announces each gradient when it is final
// (BertForMaskedLM's gradient-ready hook). The bucket whose last gradient is announced goes to a
// queue; one communication thread sums the queued buckets in order over the group, while the
// training thread computes the next layers' gradients. finish() queues whatever was not
// announced, waits for the queue to drain and rethrows a failure of the thread. One thread and
// FIFO order mean every rank issues the same collectives in the same order (MPI requires it),
// and one staging buffer is enough.
//
// The overlap needs MPI to accept calls from the communication thread while the training
// thread calls too, which happens only under tensor parallelism (its collectives run inside
// backward): there MPI_THREAD_MULTIPLE is needed (Communicator::allows_concurrent_calls). Without
// it, or with overlap = false, finish() sums every bucket on the calling thread, in the same
// order, to the same bits.
//
// Note [16-bit gradients are summed in f32]
// f32 buckets are summed in place. f16 and bf16 buckets go through an f32 staging buffer of at
// most kStagingElements floats (tag communication, allocated by the constructor:
// Note [Communication buffers are allocated up front]): converted in, summed in f32, rounded
// back to nearest even, so the sum of N ranks is rounded once rather than at every hop.
//
// Note [Communication buffers are allocated up front]
// A buffer allocated inside the step by a communication path would make the allocation trace
// depend on when communication happens, and the dry run (which does not communicate) must
// reproduce the compute run's trace event for event (issue 4). With one rank or only f32
// gradients there is nothing to stage and nothing is allocated.
class GradientSynchronizer {
 public:
  static constexpr std::int64_t kStagingElements = std::int64_t{1} << 20;  // 4 MiB of f32

  // buckets: the model's gradient buckets (they must outlive the synchroniser, and keep their
  // layout); group: the data-parallel group, which every rank's synchroniser sums over with
  // the same buckets. overlap: run the sums on a communication thread during backward (see the
  // Note). In a dry run (ctx.dry_run()) nothing is communicated, and the staging buffer is
  // allocated as in a compute run. Throws memtrain::RuntimeError when two entries share a key.
  GradientSynchronizer(std::vector<GradientBucket>& buckets, Communicator& group,
                       core::Context& ctx, bool overlap = true,
                       GradientReduction reduction = GradientReduction::all_reduce);
  // Joins the communication thread: a sum in flight completes, buckets still queued (a step
  // that failed before finish) are dropped.
  ~GradientSynchronizer();
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  // Starts a step: every bucket waits for its gradients again. Call before the backward of the
  // step's last micro-batch (earlier micro-batches only accumulate).
  void begin_step();
  // Gradient `key` is final for this step; its bucket is queued when it is the bucket's last
  // one. Throws memtrain::RuntimeError for an unknown key or a key announced twice in a step.
  void mark_ready(std::size_t key);
  // Queues the buckets not queued yet (in bucket order), waits until every bucket is summed,
  // and fills step_stats(). Throws memtrain::RuntimeError when a collective failed (on the
  // communication thread or here): the gradients are then not a sum and must not be used.
  void finish();

  // ZeRO-1, after the optimizer updated this rank's shards: every rank's shard of every bucket
  // lands in every rank's bucket (in-place all-gather over the group). The bucket holds
  // parameter values now, `value_dtype` elements at the gradients' offsets (a 16-bit value
  // takes the first half of an f32 gradient's bytes): the caller packed its shard there and
  // unpacks the rest. Adds its bytes to step_stats(). No-op with one rank or in a dry run.
  // Throws memtrain::RuntimeError for a failed collective or a value type wider than the
  // gradients'.
  void all_gather_shards(core::DType value_dtype);
  // This rank's shard of bucket b under GradientReduction::reduce_scatter (the whole bucket
  // under all_reduce): its first element and element count.
  std::int64_t shard_begin(std::size_t b) const { return shards_[b].begin; }
  std::int64_t shard_count(std::size_t b) const { return shards_[b].counts[rank_]; }
  GradientReduction reduction() const { return reduction_; }

  const GradientSyncStats& step_stats() const { return stats_; }
  // Bytes of the staging buffer (0 when none is needed).
  std::size_t staging_bytes() const { return staging_.defined() ? staging_.nbytes() : 0; }
  bool overlaps() const { return worker_.joinable(); }
  // Bucket indices in the order this step queued them (for tests and the overlap benchmark).
  const std::vector<int>& queue_order() const { return queue_order_; }

 private:
  void enqueue(int bucket);   // training thread
  void sum_bucket(int bucket, GradientSyncStats& into);
  void work();                // communication thread

  struct Shards {
    std::vector<std::int64_t> counts;  // per rank
    std::int64_t begin = 0;            // of this rank's block
  };
  void reduce_scatter_half(int b, GradientSyncStats& into);

  std::vector<GradientBucket>& buckets_;
  Communicator& group_;
  GradientReduction reduction_;
  std::size_t rank_;
  std::vector<Shards> shards_;
  bool active_;  // more than one rank and not a dry run
  bool fail_injected_;
  core::Tensor staging_;  // [min(kStagingElements, largest 16-bit bucket)] f32
  std::unordered_map<std::size_t, std::pair<int, bool>> where_;  // key -> (bucket, announced)
  std::vector<std::int64_t> missing_;  // per bucket: entries not announced yet this step
  std::vector<bool> queued_;
  std::vector<int> queue_order_;
  GradientSyncStats stats_;

  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<int> queue_;
  int in_flight_ = 0;  // queued or being summed
  bool stopping_ = false;
  std::exception_ptr error_;
  GradientSyncStats thread_stats_;
  std::thread worker_;
};

}  // namespace memtrain::comms
