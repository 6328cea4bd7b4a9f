#pragma once
// Data-parallel gradient synchronisation: each bucket's all-reduce starts on a communication
// thread as soon as backward has finished its gradients, while backward goes on (PyTorch DDP,
// Li et al. 2020, "PyTorch Distributed", section 3.2.3; Megatron-LM's overlap_grad_reduce).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_sync_stats.hpp"
#include "comms/gradient_compressor.hpp"
#include "comms/shard_layout.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::comms {

// all_reduce: every rank gets each bucket's sum (ZeRO stage 0). reduce_scatter: rank r gets
// the sum of its shard of each bucket only (ZeRO stage 1, Rajbhandari et al. 2020, section
// 5.1: P_os), elements [shard_begin(b), shard_begin(b) + shard_count(b)) of the bucket, as
// shard_counts splits it; the rest of the bucket is left undefined.
enum class GradientReduction { all_reduce, reduce_scatter };

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
// Note [The tied embedding's rows are summed in two parts]
// The tied word embedding holds most of a small model's gradient bytes (61 % of BERT-Base
// width with 2 layers), and the embedding lookup, the last stage of backward, writes it: as
// one bucket it is final only when backward is over, and its sum cannot overlap anything. But
// the lookup writes only the rows of the batch's tokens; every other row is final as soon as
// the decoder (the first stage) has written it. So an entry marked split_rows is announced
// twice: mark_rows_ready(key, rows) after the decoder, with the rows this rank's lookup will
// still write, then mark_ready(key) as any gradient. On the communication thread the first
// announcement sums a mask of those rows over the group (one float per row: the union of
// every rank's rows, the same on all ranks, so all issue the same collectives) and then sums
// every row outside the union, while backward goes on; the rows in the union go with the
// bucket's completion. Each element is still the sum of every rank's final value, only sent
// in other pieces: with two ranks the bits are those of one all-reduce of the whole bucket.
// PyTorch's sparse embedding gradients send only the batch's rows instead, but need a buffer
// of ranks x tokens rows, more than the table itself for BERT-Large's batches; the union needs
// a mask of the table's rows.
// The pieces are row ranges: one at least kInPlaceElements long is summed in place, shorter
// ones are packed into the staging buffer, summed there and copied back. Only f32 buckets
// under all_reduce with a communication thread split (a 16-bit lookup rewrites the whole
// table through its f32 view, and ZeRO-1's shards do not follow rows); elsewhere the first
// announcement is ignored. The mask and the staging buffer are allocated whenever a split can
// happen, overlap or not (Note [Communication buffers are allocated up front]).
//
// Note [16-bit gradients are summed in f32]
// f32 buckets are summed in place. f16 and bf16 buckets go through an f32 staging buffer of at
// most kStagingElements floats (tag communication, allocated by the constructor:
// Note [Communication buffers are allocated up front]): converted in, summed in f32, rounded
// back to nearest even, so the sum of N ranks is rounded once rather than at every hop.
//
// Note [16-bit gradients are compressed in f32]
// A compressor works on a whole bucket (its matrices and chunks span it) and keeps f32 state,
// so a 16-bit bucket is converted whole into an f32 staging buffer the size of the largest
// 16-bit bucket (tag communication, allocated by the constructor when compression is on),
// compressed and summed there against f32 error buffers, and rounded back to nearest even once.
// The uncompressed payload counts 4 bytes per element, as the plain 16-bit sum does. Under fp16
// the errors hold loss-scaled values; a change of scale leaves the carried error in the old
// scale for the steps it takes to decay (PyTorch's PowerSGD hook under GradScaler does the same).
//
// Note [Communication buffers are allocated up front]
// A buffer allocated inside the step by a communication path would make the allocation trace
// depend on when communication happens, and the dry run (which does not communicate) must
// reproduce the compute run's trace event for event (issue 4). With one rank or only f32
// gradients there is nothing to stage and nothing is allocated.
class GradientSynchronizer {
 public:
  static constexpr std::int64_t kStagingElements = std::int64_t{1} << 20;  // 4 MiB of f32
  // Note [The tied embedding's rows are summed in two parts]: a row range at least this long
  // is summed in place rather than through the staging buffer (256 KiB of f32).
  static constexpr std::int64_t kInPlaceElements = std::int64_t{1} << 16;

  // buckets: the model's gradient buckets (they must outlive the synchroniser, and keep their
  // layout); group: the data-parallel group, which every rank's synchroniser sums over with
  // the same buckets. overlap: run the sums on a communication thread during backward (see the
  // Note). In a dry run (ctx.dry_run()) nothing is communicated, and the staging buffer (and
  // the row mask of a split_rows entry) is allocated as in a compute run. Throws
  // memtrain::RuntimeError when two entries share a key, or when more than one entry, or one
  // without rows, is marked split_rows.
  // compression: a compressor (GradientCompressor, built by compression->make over these
  // buckets and the group's size: PowerSGD, Note [PowerSGD sums, it does not average], or
  // 1-bit, Note [1-bit sums in two stages], or any other the compressor registry holds) for
  // every bucket from iteration compression->start_iter on (plain sums before, as PyTorch's
  // hook); its state is allocated here (16-bit buckets: Note [16-bit gradients are compressed
  // in f32]), and not at all with one rank. It needs all_reduce, and turns the tied
  // embedding's early rows off (a compressor takes the table whole). Throws
  // memtrain::RuntimeError otherwise, or what compression->make throws.
  struct Compression {
    CompressorFactory make;  // null: plain sums, as without compression
    std::int64_t start_iter = 10;
  };
  GradientSynchronizer(std::vector<GradientBucket>& buckets, Communicator& group, core::Context& ctx,
                       bool overlap = true, GradientReduction reduction = GradientReduction::all_reduce,
                       const Compression* compression = nullptr);
  // Joins the communication thread: a sum in flight completes, buckets still queued (a step
  // that failed before finish) are dropped.
  ~GradientSynchronizer();
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  // Starts a step: every bucket waits for its gradients again. Call before the backward of the
  // step's last micro-batch (earlier micro-batches only accumulate). `iteration`: the
  // optimizer step, which decides whether compression has started.
  void begin_step(std::int64_t iteration = 0);
  // Gradient `key` is final for this step; its bucket is queued when it is the bucket's last
  // one. Throws memtrain::RuntimeError for an unknown key or a key announced twice in a step.
  void mark_ready(std::size_t key);
  // Gradient `key` (an entry marked split_rows, shape [rows, ...]) is final except its rows
  // `late_rows` (any order, repeats allowed), which this rank will still write before
  // mark_ready(key): Note [The tied embedding's rows are summed in two parts]. Every rank of
  // the group calls it for the same key in the same step, or none does. Ignored where the
  // entry cannot split (see the Note). Throws memtrain::RuntimeError for an unknown key, a key
  // not marked split_rows, one already announced, or a row outside [0, rows).
  void mark_rows_ready(std::size_t key, const std::vector<std::int32_t>& late_rows);
  // From optimizer step `iteration` on, every step keeps each rank's own gradients: nothing is
  // communicated and step_stats() stays zero (1-bit Adam after its freeze step synchronises the
  // momentum instead, runtime/train/onebit_adam.hpp). Takes effect at the next begin_step.
  void keep_local_from(std::int64_t iteration) { local_from_ = iteration; }
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
  // Bytes of the row mask of a split_rows entry (0 when it cannot split).
  std::size_t row_mask_bytes() const { return split_ ? split_->mask.nbytes() : 0; }
  bool overlaps() const { return worker_.joinable(); }
  // The compressor (null without compression or with one rank), for tests and byte counts.
  const GradientCompressor* compressor() const { return compressor_.get(); }
  GradientCompressor* compressor() { return compressor_.get(); }  // checkpoints restore its state
  // Bucket indices in the order this step queued them complete (for tests and the overlap
  // benchmark); the early rows of a split entry are not a bucket of their own.
  const std::vector<int>& queue_order() const { return queue_order_; }
  // Rows of the split entry summed ahead of its bucket in the last finished step (0 when it
  // did not split): the rows outside every rank's late rows.
  std::int64_t early_rows() const { return early_rows_; }

 private:
  // What a queued piece of work sums: a whole bucket; the early rows of the split entry; or
  // the rest of the split entry's bucket after them.
  enum class Part { whole, early_rows, rest };
  struct Item {
    int bucket = 0;
    Part part = Part::whole;
  };
  struct Range {
    std::int64_t begin = 0, count = 0;  // elements of a bucket's buffer
  };
  // The entry marked split_rows, when its bucket can split (f32, all_reduce, a group).
  struct RowSplit {
    int bucket = 0;
    std::size_t key = 0;
    std::int64_t offset = 0, rows = 0, cols = 0;  // in the bucket: elements, [rows, cols]
    core::Tensor mask;                            // [rows] f32, tag communication: 1 where this rank's lookup writes
    bool early_queued = false;                    // this step (training thread)
    std::vector<std::int64_t> late;               // the union's rows (communication thread)
  };

  void enqueue(int bucket);  // training thread: the bucket is complete
  void push(Item item);      // training thread
  void sum(Item item, GradientSyncStats& into);
  void sum_bucket(int bucket, GradientSyncStats& into);
  void sum_compressed(int bucket, GradientSyncStats& into);
  void sum_early_rows(GradientSyncStats& into);
  void sum_rest(GradientSyncStats& into);
  void sum_ranges(float* g, std::vector<Range> ranges, GradientSyncStats& into);
  void work();  // communication thread

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
  core::Tensor staging_;  // [min(kStagingElements, largest 16-bit bucket or split entry)] f32
  std::optional<RowSplit> split_;
  std::unique_ptr<GradientCompressor> compressor_;
  core::Tensor compress_staging_;  // [largest 16-bit bucket] f32, with compression only
  std::int64_t start_iter_ = 0, iteration_ = 0;
  std::int64_t local_from_ = std::numeric_limits<std::int64_t>::max();
  bool local_ = false;  // this step keeps local gradients (keep_local_from)
  std::int64_t early_rows_ = 0;
  std::unordered_map<std::size_t, std::pair<int, bool>> where_;  // key -> (bucket, announced)
  std::vector<std::int64_t> missing_;                            // per bucket: entries not announced yet this step
  std::vector<bool> queued_;
  std::vector<int> queue_order_;
  GradientSyncStats stats_;

  // Shared with the communication thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<Item> queue_;
  int in_flight_ = 0;  // queued or being summed
  bool stopping_ = false;
  std::exception_ptr error_;
  GradientSyncStats thread_stats_;
  std::thread worker_;
};

}  // namespace memtrain::comms
