#include "comms/powersgd_compressor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <string>

#include <xxhash.h>

#include "kernels/cpu/matmul.hpp"
#include "kernels/philox.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::comms {
namespace {

// Note [Gram-Schmidt twice, and an epsilon]
// P = (sum M) Q has rank below r whenever the summed gradient does (a zero gradient, r above
// its rank, rows that repeat): its extra columns are rounding noise, and normalising noise
// gives a unit vector that one Gram-Schmidt pass in float leaves far from orthogonal to the
// others, so that P^ P^^T is no projection and the sum comes out wrong (found with
// sinusoidal gradients of rank 2 at r = 5). Each column is therefore orthogonalised twice
// ("twice is enough", Giraud et al. 2005) with sums in double, and a column whose remainder is
// at most kEpsilon of its norm (an all-zero column among them) is set to zeros rather than
// normalised: it carries no direction that the other columns lack, and 0 / 0 never happens.
void orthonormalize_columns(float* p, std::int64_t n, std::int64_t r) {
  constexpr double kEpsilon = 1e-4;
  std::vector<bool> zero(static_cast<std::size_t>(r), false);
  auto column_norm = [&](std::int64_t j) {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += double{p[i * r + j]} * p[i * r + j];
    return std::sqrt(s);
  };
  for (std::int64_t j = 0; j < r; ++j) {
    const double before = column_norm(j);
    for (int pass = 0; pass < 2; ++pass) {
      for (std::int64_t k = 0; k < j; ++k) {
        if (zero[static_cast<std::size_t>(k)]) continue;
        double dot = 0;
        for (std::int64_t i = 0; i < n; ++i) dot += double{p[i * r + j]} * p[i * r + k];
        for (std::int64_t i = 0; i < n; ++i) p[i * r + j] -= static_cast<float>(dot * p[i * r + k]);
      }
    }
    const double after = column_norm(j);
    const bool drop = !(after > kEpsilon * before);  // also for before = 0
    zero[static_cast<std::size_t>(j)] = drop;
    const double scale = drop ? 0.0 : 1.0 / after;
    for (std::int64_t i = 0; i < n; ++i) p[i * r + j] = static_cast<float>(p[i * r + j] * scale);
  }
}

bool all_finite(const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

// A stable id of an entry for the Q draw: xxHash of its name.
std::uint32_t name_id(const std::string& name) { return XXH32(name.data(), name.size(), 0); }

}  // namespace

PowerSgdCompressor::PowerSgdCompressor(const std::vector<GradientBucket>& buckets, const PowerSgdOptions& options,
                                       core::Context& ctx)
    : options_(options), layouts_(buckets) {
  if (options_.rank < 1) {
    throw RuntimeError("PowerSgdCompressor: rank = " + std::to_string(options_.rank) + "; expected an integer >= 1");
  }
  if (!(options_.min_compression_rate > 0)) {
    throw RuntimeError("PowerSgdCompressor: min_compression_rate = " + std::to_string(options_.min_compression_rate) +
                       "; expected a number > 0");
  }
  std::int64_t max_p = 0, max_uncompressed = 0;
  for (const auto& layout : buckets) {
    Bucket bucket;
    std::int64_t q_elements = 0;
    for (std::size_t e = 0; e < layout.entries.size(); ++e) {
      const auto& entry = layout.entries[e];
      const std::int64_t n = entry.shape.size() >= 2 ? entry.shape[0] : 0;
      const std::int64_t m = n > 0 ? entry.numel / n : 0;
      const std::int64_t r = std::min<std::int64_t>({options_.rank, n, m});
      const bool compress = n > 0 && m > 0 &&
                            static_cast<double>((n + m) * r) <
                                static_cast<double>(n) * static_cast<double>(m) / options_.min_compression_rate;
      if (!compress) {
        bucket.uncompressed.push_back(Range{entry.offset, entry.numel});
        bucket.uncompressed_elements += entry.numel;
        continue;
      }
      Matrix mat;
      mat.entry = e;
      mat.offset = entry.offset;
      mat.n = n;
      mat.m = m;
      mat.r = r;
      mat.p_offset = bucket.p_elements;
      mat.q_offset = q_elements;
      mat.error = core::Tensor::zeros(ctx, {n, m}, core::DType::f32, core::tags().communication);
      state_bytes_ += n * m * 4;
      bucket.p_elements += n * r;
      q_elements += m * r;
      bucket.matrices.push_back(std::move(mat));
    }
    if (q_elements > 0) {
      bucket.q = core::Tensor::zeros(ctx, {q_elements}, core::DType::f32, core::tags().communication);
      state_bytes_ += q_elements * 4;
    }
    max_p = std::max(max_p, bucket.p_elements);
    max_uncompressed = std::max(max_uncompressed, bucket.uncompressed_elements);
    buckets_.push_back(std::move(bucket));
  }
  if (max_p > 0) {
    p_scratch_ = core::Tensor::empty(ctx, {max_p}, core::DType::f32, core::tags().communication);
    state_bytes_ += max_p * 4;
  }
  if (max_uncompressed > 0) {
    uncompressed_scratch_ = core::Tensor::empty(ctx, {max_uncompressed}, core::DType::f32, core::tags().communication);
    state_bytes_ += max_uncompressed * 4;
  }
}

// Standard normal entries (Box-Muller over Philox uniforms) keyed by (seed, iteration or 0,
// entry name): the same Q on every rank.
void PowerSgdCompressor::draw_q(std::size_t b, Matrix& mat, std::int64_t iteration) {
  Bucket& bucket = buckets_[b];
  const auto& entry_name = layouts_[b].entries[mat.entry].name;
  const kernels::RngKey key{options_.seed, options_.warm_start ? 0u : static_cast<std::uint64_t>(iteration),
                            name_id(entry_name), /*site=*/0x9053u, 0};
  const kernels::PhiloxStream stream(key);
  float* q = bucket.q.data<float>() + mat.q_offset;
  const std::int64_t count = mat.m * mat.r;
  for (std::int64_t i = 0; i < count; i += 2) {
    const double u1 = 1.0 - stream.uniform(0, static_cast<std::uint64_t>(i));  // (0, 1]
    const double u2 = stream.uniform(0, static_cast<std::uint64_t>(i + 1));
    const double radius = std::sqrt(-2.0 * std::log(u1));
    q[i] = static_cast<float>(radius * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < count) q[i + 1] = static_cast<float>(radius * std::sin(2.0 * std::numbers::pi * u2));
  }
  // Orthonormal starting columns, as PyTorch's hook makes them: P = M Q is then no worse
  // conditioned than M.
  orthonormalize_columns(q, mat.m, mat.r);
  mat.q_drawn = true;
}

void PowerSgdCompressor::sum(std::size_t b, float* grad, Communicator& group, std::int64_t iteration,
                             GradientSyncStats& into) {
  Bucket& bucket = buckets_.at(b);
  auto all_reduce = [&](float* data, std::int64_t n) {
    if (n == 0) return;
    group.allreduce_sum(data, n);
    into.bytes += n * 4;
    ++into.calls;
  };
  // The uncompressed entries, packed: one all-reduce.
  if (bucket.uncompressed_elements > 0) {
    float* stage = uncompressed_scratch_.data<float>();
    std::int64_t at = 0;
    for (const Range& u : bucket.uncompressed) {
      std::memcpy(stage + at, grad + u.begin, sizeof(float) * static_cast<std::size_t>(u.count));
      at += u.count;
    }
    all_reduce(stage, at);
    at = 0;
    for (const Range& u : bucket.uncompressed) {
      std::memcpy(grad + u.begin, stage + at, sizeof(float) * static_cast<std::size_t>(u.count));
      at += u.count;
    }
  }
  if (bucket.matrices.empty()) return;

  // P = (g + e) Q without writing M (Note [A non-finite step leaves PowerSGD's state untouched]).
  float* p_all = p_scratch_.data<float>();
  float* q_all = bucket.q.data<float>();
  for (Matrix& mat : bucket.matrices) {
    if (!options_.warm_start || !mat.q_drawn) draw_q(b, mat, iteration);
    const int n = static_cast<int>(mat.n), m = static_cast<int>(mat.m), r = static_cast<int>(mat.r);
    float* p = p_all + mat.p_offset;                                                    // [n, r]
    const float* q = q_all + mat.q_offset;                                              // [m, r]
    kernels::matmul(p, grad + mat.offset, q, n, r, m, false, false);                    // g Q
    kernels::matmul(p, mat.error.data<float>(), q, n, r, m, false, false, 1.0f, 1.0f);  // + e Q
  }
  all_reduce(p_all, bucket.p_elements);
  if (!all_finite(p_all, bucket.p_elements)) {
    for (const Matrix& mat : bucket.matrices) all_reduce(grad + mat.offset, mat.n * mat.m);
    return;
  }
  for (Matrix& mat : bucket.matrices) {
    const int n = static_cast<int>(mat.n), m = static_cast<int>(mat.m), r = static_cast<int>(mat.r);
    float* p = p_all + mat.p_offset;     // [n, r]
    float* q = q_all + mat.q_offset;     // [m, r]
    float* e = mat.error.data<float>();  // [n, m]: M = g + e from here on
    const float* g = grad + mat.offset;  // [n, m]
    for (std::int64_t i = 0; i < mat.n * mat.m; ++i) e[i] += g[i];
    orthonormalize_columns(p, mat.n, mat.r);
    kernels::matmul(q, e, p, m, r, n, /*trans_a=*/true, false);  // Q = M^T P^
  }
  all_reduce(q_all, bucket.q.numel());
  const float share = 1.0f / static_cast<float>(group.size());
  for (Matrix& mat : bucket.matrices) {
    const int n = static_cast<int>(mat.n), m = static_cast<int>(mat.m), r = static_cast<int>(mat.r);
    const float* p = p_all + mat.p_offset;  // [n, r]
    const float* q = q_all + mat.q_offset;  // [m, r]
    float* g = grad + mat.offset;           // [n, m]: the compressed sum P^ Q^T
    float* e = mat.error.data<float>();     // [n, m]
    kernels::matmul(g, p, q, n, m, r, false, /*trans_b=*/true);
    for (std::int64_t i = 0; i < mat.n * mat.m; ++i) e[i] -= share * g[i];
  }
}

GradientCompressor::State PowerSgdCompressor::state() const {
  State st;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::string bucket = "bucket" + std::to_string(b);
    if (buckets_[b].q.defined()) st.tensors.emplace_back(bucket + ".q", buckets_[b].q);
    for (std::size_t k = 0; k < buckets_[b].matrices.size(); ++k) {
      const Matrix& mat = buckets_[b].matrices[k];
      st.tensors.emplace_back(bucket + ".matrix" + std::to_string(k) + ".error", mat.error);
      st.flags.push_back(mat.q_drawn ? 1 : 0);
    }
  }
  return st;
}

void PowerSgdCompressor::set_flags(const std::vector<std::int32_t>& flags) {
  std::size_t i = 0;
  for (auto& bucket : buckets_) i += bucket.matrices.size();
  if (flags.size() != i) {
    throw RuntimeError("PowerSGD state: " + std::to_string(flags.size()) + " q_drawn flags for " + std::to_string(i) +
                       " matrices");
  }
  i = 0;
  for (auto& bucket : buckets_) {
    for (auto& mat : bucket.matrices) mat.q_drawn = flags[i++] != 0;
  }
}

CompressorFactory powersgd_factory(const PowerSgdOptions& options) {
  return [options](const std::vector<GradientBucket>& buckets, int /*world*/, core::Context& ctx) {
    return std::unique_ptr<GradientCompressor>(std::make_unique<PowerSgdCompressor>(buckets, options, ctx));
  };
}

}  // namespace memtrain::comms
