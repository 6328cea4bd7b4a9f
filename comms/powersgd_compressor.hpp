#pragma once
// PowerSGD gradient compression with error feedback (Vogels, Karimireddy and Jaggi, "PowerSGD:
// Practical Low-Rank Gradient Compression for Distributed Optimization", NeurIPS 2019,
// Algorithm 1), with PyTorch's DDP communication hook (torch.distributed.algorithms.
// ddp_comm_hooks.powerSGD_hook) as the reference behaviour, over buckets of f32 gradients.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_compressor.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_sync_stats.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tensor.hpp"

namespace memtrain::comms {

struct PowerSgdOptions {
  int rank = 4;                       // r, clipped to min(n, m) per matrix
  double min_compression_rate = 2.0;  // compress only if (n + m) r < n m / rate
  bool warm_start = true;             // reuse last step's Q (else a fresh draw each step)
  std::uint64_t seed = 0;             // of the initial Q: the same on every rank
};

// Note [PowerSGD sums, it does not average]
// memtrain's ranks hold gradients already scaled by one over the global token count, so the
// synchronisation sums them (Note [Buckets overlap backward]). PowerSGD's power step is linear
// in the gradients: with M_i = g_i + e_i on rank i, P = sum_i M_i Q = (sum M) Q, P^ its
// orthonormal basis, Q' = sum_i M_i^T P^ = (sum M)^T P^, and P^ Q'^T = P^ P^^T sum M is the
// projection of the summed matrix: the compressed sum. Each rank keeps the error of its share,
// e_i = M_i - P^ Q'^T / N, so that sum_i e_i is exactly what the sum lost (PyTorch averages and
// keeps M_i - mean, the same rule). With r = min(n, m) the projection is the identity and
// the compressed sum is the all-reduce, up to rounding (P^ is built by Note [Gram-Schmidt
// twice, and an epsilon], powersgd_compressor.cpp).
//
// Note [A non-finite step leaves PowerSGD's state untouched]
// An fp16 step whose gradients overflowed is skipped by the optimizer, and must not feed its
// inf or NaN into the error buffers or Q. P is computed as g Q + e Q without writing M, so
// nothing is modified before P is summed; a non-finite element anywhere in any rank's M makes
// the summed P non-finite on every rank (inf x 0 is NaN), every rank then sums the matrices
// uncompressed (so all see the non-finite sum and skip) and leaves e and Q as they were.

// Per-matrix state and the power step for the buckets of a GradientSynchronizer. Each entry of
// two or more dimensions, viewed as n x m (its first dimension by the rest), is compressed when
// (n + m) r < n m / min_compression_rate with r = min(rank, n, m); one-dimensional entries and
// those that fail the test are summed uncompressed, all of a bucket's in one all-reduce. State
// is keyed by the bucket layout: entry name and shape (PowerSgdCompressor::matrices).
//
// Buffers, all f32, tag communication, allocated by the constructor (Note [Communication
// buffers are allocated up front]): per compressed matrix an error [n, m] and Q [m, r] (each
// bucket's Qs side by side, so that one all-reduce sums them); shared scratch for one bucket's
// Ps and one bucket's uncompressed entries. The values summed are f32 whatever the buckets'
// dtype (only their layout is used: Note [16-bit gradients are compressed in f32],
// gradient_synchronizer.hpp). Throws memtrain::RuntimeError for rank < 1 or
// min_compression_rate <= 0.
class PowerSgdCompressor final : public GradientCompressor {
 public:
  PowerSgdCompressor(const std::vector<GradientBucket>& buckets, const PowerSgdOptions& options, core::Context& ctx);

  // Replaces bucket b's gradients (`grad`, [numel of the bucket] f32, this rank's) by the
  // compressed sum over `group` (Note [PowerSGD sums, it does not average]) and updates the
  // errors and Qs, or, when the summed P is not finite, by the plain sum with the state left
  // as it was (Note [A non-finite step leaves PowerSGD's state untouched]). `iteration` keys a
  // fresh Q draw when warm_start is off (and the first draw otherwise). Collective over group:
  // every rank calls it for the same buckets in the same order. Adds the payload bytes (the
  // uncompressed entries, then sum (n_k + m_k) r_k floats) to `into`.
  void sum(std::size_t b, float* grad, Communicator& group, std::int64_t iteration, GradientSyncStats& into) override;

  // One compressed matrix: entry `entry` of its bucket, [n, m] at element `offset`, rank r.
  struct Matrix {
    std::size_t entry = 0;
    std::int64_t offset = 0, n = 0, m = 0, r = 0;
    std::int64_t p_offset = 0, q_offset = 0;  // in the bucket's P scratch and Q buffer
    core::Tensor error;                       // [n, m] f32
    bool q_drawn = false;
  };
  const std::vector<Matrix>& matrices(std::size_t b) const { return buckets_[b].matrices; }
  // Bytes of the errors, Qs and scratch.
  std::int64_t state_bytes() const override { return state_bytes_; }
  // "bucket<B>.q" and "bucket<B>.matrix<K>.error"; flags: q_drawn per matrix, in bucket order.
  State state() const override;
  void set_flags(const std::vector<std::int32_t>& flags) override;

 private:
  struct Range {
    std::int64_t begin = 0, count = 0;
  };
  struct Bucket {
    std::vector<Matrix> matrices;
    std::vector<Range> uncompressed;
    std::int64_t p_elements = 0, uncompressed_elements = 0;
    core::Tensor q;  // [sum m_k r_k] f32
  };
  void draw_q(std::size_t b, Matrix& mat, std::int64_t iteration);

  PowerSgdOptions options_;
  const std::vector<GradientBucket>& layouts_;
  std::vector<Bucket> buckets_;
  core::Tensor p_scratch_;             // [max p_elements] f32
  core::Tensor uncompressed_scratch_;  // [max uncompressed_elements] f32
  std::int64_t state_bytes_ = 0;
};

// A PowerSgdCompressor with `options` for the synchroniser (GradientSynchronizer::Compression).
CompressorFactory powersgd_factory(const PowerSgdOptions& options);

}  // namespace memtrain::comms
