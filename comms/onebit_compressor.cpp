#include "comms/onebit_compressor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <limits>
#include <string>

#include "kernels/cpu/half_convert.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::comms {
namespace {

constexpr std::int64_t kBitsPerWord = 16;
constexpr int kCodesPerWord = 4;  // 4-bit block codes
constexpr int kZeroCode = 15;     // a block of zeros

// Elements of chunk c of an entry that are real rather than padding.
std::int64_t real_count(const OneBitCompressor::Entry& e, std::int64_t c) {
  return std::clamp<std::int64_t>(e.numel - c * e.chunk, 0, e.chunk);
}

void put_scale(std::uint16_t* words, float s) { words[0] = kernels::float_to_bf16(s); }
float get_scale(const std::uint16_t* words) { return kernels::bf16_to_float(words[0]); }

// Block b's 4-bit code among the codes that follow a chunk's scale word.
int get_code(const std::uint16_t* codes, std::int64_t b) {
  return (codes[b / kCodesPerWord] >> (4 * (b % kCodesPerWord))) & 0xF;
}

// The scale block code k stands for under the chunk's scale S: S 2^(-k/2), 0 for kZeroCode.
// The encoder's error feedback and every decoder use this one function, so they agree bitwise.
float code_value(float S, int k) {
  static const auto steps = [] {
    std::array<float, kZeroCode> t{};
    for (int i = 0; i < kZeroCode; ++i) t[i] = static_cast<float>(std::exp2(-0.5 * i));
    return t;
  }();
  return k == kZeroCode ? 0.0f : S * steps[k];
}

// The code whose value is nearest s in ratio, round(2 log2(S / s)), up to kZeroCode: a block
// more than 2^7 below the chunk's largest is sent as zeros and left to the error feedback,
// which carries it until it is large enough to send (sending it at S 2^-7 instead, up to 128
// times its size, ended 6.5 % above uncompressed training rather than 1.1 %).
int code_of(float S, float s) {
  if (s == 0.0f || S == 0.0f) return kZeroCode;
  const long k = std::lround(2.0 * std::log2(static_cast<double>(S) / static_cast<double>(s)));
  return static_cast<int>(std::clamp<long>(k, 0, kZeroCode));
}

// +1 or -1 from bit j of a chunk's words.
float sign_at(const std::uint16_t* bits, std::int64_t j) {
  return ((bits[j / kBitsPerWord] >> (j % kBitsPerWord)) & 1u) != 0 ? -1.0f : 1.0f;
}

// f(j, +1 or -1) for j in [0, n), a word at a time (the inner loop of 16 vectorises).
template <class F>
void for_each_sign(const std::uint16_t* bits, std::int64_t n, F&& f) {
  const std::int64_t full = n / kBitsPerWord;
  for (std::int64_t w = 0; w < full; ++w) {
    const unsigned b = bits[w];
    for (int k = 0; k < kBitsPerWord; ++k) f(w * kBitsPerWord + k, ((b >> k) & 1u) != 0 ? -1.0f : 1.0f);
  }
  for (std::int64_t j = full * kBitsPerWord; j < n; ++j) f(j, sign_at(bits, j));
}

// mean |x_j| or ||x||_2 / sqrt(count), accumulated in double; 0 for count 0, non-finite when x is.
float block_scale(const float* x, std::int64_t count, OneBitScale kind) {
  if (count == 0) return 0.0f;
  double sum = 0;
  if (kind == OneBitScale::mean_abs) {
    for (std::int64_t j = 0; j < count; ++j) sum += std::fabs(double{x[j]});
    return static_cast<float>(sum / static_cast<double>(count));
  }
  for (std::int64_t j = 0; j < count; ++j) sum += double{x[j]} * x[j];
  return static_cast<float>(std::sqrt(sum / static_cast<double>(count)));
}

// Signs and scales of x [count] (a chunk's real elements) into `out`: the chunk's k / 16 words
// of signs, the chunk's scale S (bf16, the largest block scale), then a 4-bit code per block
// when there is more than one (Note [1-bit scales per block, by the mean magnitude]).
// `scales`: [blocks] scratch. False when a scale is not finite (S is then NaN).
bool compress_chunk(const OneBitCompressor::Entry& en, const float* x, std::int64_t count, OneBitScale kind,
                    float* scales, std::uint16_t* out) {
  const std::int64_t words = en.chunk / kBitsPerWord;
  std::fill(out, out + words + en.scale_words, std::uint16_t{0});  // padding bits: +1
  pack_signs(x, count, out);
  bool finite = true;
  float largest = 0.0f;
  for (std::int64_t b = 0; b < en.blocks; ++b) {
    const std::int64_t lo = b * en.block;
    scales[b] = block_scale(x + lo, std::clamp<std::int64_t>(count - lo, 0, en.block), kind);
    finite = finite && std::isfinite(scales[b]);
    largest = std::max(largest, scales[b]);
  }
  if (!finite) {
    put_scale(out + words, std::numeric_limits<float>::quiet_NaN());
    return false;
  }
  const float S = kernels::bf16_to_float(kernels::float_to_bf16(largest));
  put_scale(out + words, S);
  if (en.blocks > 1) {
    std::uint16_t* codes = out + words + 1;
    for (std::int64_t b = 0; b < en.blocks; ++b) {
      codes[b / kCodesPerWord] |= static_cast<std::uint16_t>(code_of(S, scales[b]) << (4 * (b % kCodesPerWord)));
    }
  }
  return true;
}

// f(j, scale of j's block x sign_j) for j in [0, count) of a compressed chunk.
template <class F>
void for_each_value(const OneBitCompressor::Entry& en, const std::uint16_t* in, std::int64_t count, F&& f) {
  const std::int64_t words = en.chunk / kBitsPerWord;
  const float S = get_scale(in + words);
  for (std::int64_t b = 0; b < en.blocks; ++b) {
    const std::int64_t lo = b * en.block;
    const std::int64_t n = std::clamp<std::int64_t>(count - lo, 0, en.block);
    const float s = en.blocks > 1 ? code_value(S, get_code(in + words + 1, b)) : S;
    for_each_sign(in + lo / kBitsPerWord, n, [&](std::int64_t j, float sign) { f(lo + j, s * sign); });
  }
}

// A chunk whose scale S is a NaN (Note [A non-finite step leaves 1-bit's state untouched]).
void put_nan_scale(const OneBitCompressor::Entry& en, std::uint16_t* out) {
  put_scale(out + en.chunk / kBitsPerWord, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace

std::int64_t packed_words(std::int64_t n) { return (n + kBitsPerWord - 1) / kBitsPerWord; }

void pack_signs(const float* x, std::int64_t n, std::uint16_t* words) {
  const std::int64_t full = n / kBitsPerWord;
  for (std::int64_t w = 0; w < full; ++w) {
    unsigned b = 0;
    for (int k = 0; k < kBitsPerWord; ++k) b |= static_cast<unsigned>(x[w * kBitsPerWord + k] < 0.0f) << k;
    words[w] = static_cast<std::uint16_t>(b);
  }
  if (full * kBitsPerWord < n) {
    unsigned b = 0;
    for (std::int64_t j = full * kBitsPerWord; j < n; ++j) {
      b |= static_cast<unsigned>(x[j] < 0.0f) << (j % kBitsPerWord);
    }
    words[full] = static_cast<std::uint16_t>(b);
  }
}

void unpack_signs(const std::uint16_t* words, std::int64_t n, float scale, float* out) {
  for_each_sign(words, n, [=](std::int64_t j, float sign) { out[j] = scale * sign; });
}

OneBitCompressor::OneBitCompressor(const std::vector<GradientBucket>& buckets, int world, core::Context& ctx,
                                   OneBitOptions options)
    : world_(world), options_(options) {
  if (world < 1) {
    throw RuntimeError("OneBitCompressor: world = " + std::to_string(world) + "; expected >= 1");
  }
  if (options.block_size < 0 || options.block_size % kBitsPerWord != 0) {
    throw RuntimeError("OneBitCompressor: block_size = " + std::to_string(options.block_size) +
                       "; expected 0 (one scale per chunk) or a positive multiple of 16");
  }
  const std::int64_t multiple = padding_multiple();
  std::int64_t max_words = 0, max_chunk = 0, max_blocks = 0;
  for (const auto& layout : buckets) {
    Bucket bucket;
    std::int64_t server = 0;
    for (const auto& entry : layout.entries) {
      Entry e;
      e.offset = entry.offset;
      e.numel = entry.numel;
      const std::int64_t padded = (entry.numel + multiple - 1) / multiple * multiple;
      e.chunk = padded / world;
      e.block = options.block_size > 0 ? std::min(options.block_size, e.chunk) : e.chunk;
      e.blocks = (e.chunk + e.block - 1) / e.block;
      e.word = bucket.words;
      e.server_offset = server;
      e.scale_words = e.blocks > 1 ? 1 + (e.blocks + kCodesPerWord - 1) / kCodesPerWord : 1;
      bucket.words += e.chunk / kBitsPerWord + e.scale_words;
      max_blocks = std::max(max_blocks, e.blocks);
      server += e.chunk;
      max_chunk = std::max(max_chunk, e.chunk);
      bucket.entries.push_back(e);
    }
    const auto comm = core::tags().communication;
    bucket.worker_error = core::Tensor::zeros(ctx, {layout.buffer.numel()}, core::DType::f32, comm);
    bucket.server_error = core::Tensor::zeros(ctx, {std::max<std::int64_t>(server, 1)}, core::DType::f32, comm);
    state_bytes_ += static_cast<std::int64_t>(bucket.worker_error.nbytes() + bucket.server_error.nbytes());
    max_words = std::max(max_words, bucket.words);
    buckets_.push_back(std::move(bucket));
  }
  if (max_words > 0) {
    // 16-bit words of packed signs and scales; bf16 is only the storage type of the words.
    const auto comm = core::tags().communication;
    const std::int64_t all = max_words * world;
    send_ = core::Tensor::empty(ctx, {all}, core::DType::bf16, comm);
    recv_ = core::Tensor::empty(ctx, {all}, core::DType::bf16, comm);
    gather_send_ = core::Tensor::empty(ctx, {max_words}, core::DType::bf16, comm);
    gather_recv_ = core::Tensor::empty(ctx, {all}, core::DType::bf16, comm);
    state_bytes_ += (3 * all + max_words) * 2;
    x_ = core::Tensor::empty(ctx, {max_chunk}, core::DType::f32, comm);
    scales_ = core::Tensor::empty(ctx, {max_blocks}, core::DType::f32, comm);
    state_bytes_ += (max_chunk + max_blocks) * 4;
  }
}

bool OneBitCompressor::scales_finite(const Bucket& bucket, const std::uint16_t* blocks) const {
  for (std::int64_t i = 0; i < world_; ++i) {
    for (const Entry& en : bucket.entries) {
      if (!std::isfinite(get_scale(blocks + i * bucket.words + en.word + en.chunk / kBitsPerWord))) return false;
    }
  }
  return true;
}

std::int64_t OneBitCompressor::alltoall_bytes(std::size_t b) const { return buckets_.at(b).words * world_ * 2; }
std::int64_t OneBitCompressor::allgather_bytes(std::size_t b) const { return buckets_.at(b).words * 2; }

void OneBitCompressor::sum(std::size_t b, float* data, Communicator& group, std::int64_t iteration,
                           GradientSyncStats& into) {
  (void)iteration;  // 1-bit keeps no per-step draw
  sum_entries(b, data, group, into, nullptr);
}

void OneBitCompressor::sum_entries(std::size_t b, float* data, Communicator& group, GradientSyncStats& into,
                                   const std::vector<bool>* skip) {
  Bucket& bucket = buckets_.at(b);
  if (group.size() != world_) {
    throw RuntimeError("OneBitCompressor: built for " + std::to_string(world_) + " ranks, summed over " +
                       std::to_string(group.size()));
  }
  const std::int64_t W = bucket.words;                        // per chunk block
  std::uint16_t* send = send_.data<std::uint16_t>();          // [world, W]
  std::uint16_t* recv = recv_.data<std::uint16_t>();          // [world, W]
  std::uint16_t* gsend = gather_send_.data<std::uint16_t>();  // [W]
  std::uint16_t* grecv = gather_recv_.data<std::uint16_t>();  // [world, W]
  float* e = bucket.worker_error.data<float>();               // [numel]
  float* es = bucket.server_error.data<float>();              // [sum k]
  const int me = group.rank();
  if (W == 0) return;
  if (skip != nullptr && skip->size() != bucket.entries.size()) {
    throw RuntimeError("OneBitCompressor::sum_entries: " + std::to_string(skip->size()) +
                       " skip flags for a bucket of " + std::to_string(bucket.entries.size()) + " entries");
  }
  auto skipped = [&](std::size_t t) { return skip != nullptr && (*skip)[t]; };

  // 1. Worker: x = data + e, compressed chunk by chunk into block c of send; data and e stay
  // as they were until the all-gather has shown every scale finite.
  float* x = x_.data<float>();            // [k]
  float* scales = scales_.data<float>();  // [blocks]
  bool finite = true;
  for (std::size_t t = 0; t < bucket.entries.size(); ++t) {
    const Entry& en = bucket.entries[t];
    const std::int64_t words = en.chunk / kBitsPerWord;
    for (std::int64_t c = 0; c < world_; ++c) {
      std::uint16_t* block = send + c * W + en.word;
      if (skipped(t)) {
        std::fill(block, block + words + en.scale_words, std::uint16_t{0});
        continue;
      }
      const std::int64_t count = real_count(en, c);
      const std::int64_t first = en.offset + c * en.chunk;
      for (std::int64_t j = 0; j < count; ++j) x[j] = data[first + j] + e[first + j];
      finite = compress_chunk(en, x, count, options_.scale, scales, block) && finite;
    }
  }
  if (!finite) {
    // Note [A non-finite step leaves 1-bit's state untouched]
    for (std::int64_t c = 0; c < world_; ++c) {
      for (const Entry& en : bucket.entries) put_nan_scale(en, send + c * W + en.word);
    }
  }
  group.alltoall(send, recv, W);
  into.bytes += W * world_ * 2;
  ++into.calls;

  // 2. Server: the chunk this rank owns, summed over ranks in rank order, plus the server
  // error, compressed into gsend.
  const bool all_finite = scales_finite(bucket, recv);
  for (std::size_t t = 0; t < bucket.entries.size(); ++t) {
    const Entry& en = bucket.entries[t];
    const std::int64_t count = real_count(en, me);
    const std::int64_t words = en.chunk / kBitsPerWord;
    std::uint16_t* out = gsend + en.word;
    if (skipped(t)) {
      std::fill(out, out + words + en.scale_words, std::uint16_t{0});
      continue;
    }
    if (!all_finite) {
      std::fill(out, out + words + en.scale_words, std::uint16_t{0});
      put_nan_scale(en, out);
      continue;
    }
    float* z = es + en.server_offset;  // [k]: z = y + e_server, then the new server error
    for (std::int64_t i = 0; i < world_; ++i) {
      // y accumulates into z in rank order, starting from e_server: (e + y_0) + y_1 ...
      for_each_value(en, recv + i * W + en.word, count, [=](std::int64_t j, float v) { z[j] += v; });
    }
    compress_chunk(en, z, count, options_.scale, scales, out);
    for_each_value(en, out, count, [=](std::int64_t j, float v) { z[j] -= v; });
  }
  group.allgather(gsend, grecv, W);
  into.bytes += W * 2;
  ++into.calls;

  // 3. Every chunk's compressed sum; this rank's error from what it sent.
  if (!scales_finite(bucket, grecv)) {
    const std::int64_t n = bucket.worker_error.numel();
    group.allreduce_sum(data, n);
    into.bytes += n * 4;
    ++into.calls;
    return;
  }
  for (std::size_t t = 0; t < bucket.entries.size(); ++t) {
    const Entry& en = bucket.entries[t];
    if (skipped(t)) continue;
    for (std::int64_t c = 0; c < world_; ++c) {
      const std::int64_t count = real_count(en, c);
      const std::int64_t first = en.offset + c * en.chunk;
      float* ef = e + first;
      const float* df = data + first;
      for_each_value(en, send + c * W + en.word, count, [=](std::int64_t j, float v) { ef[j] = (df[j] + ef[j]) - v; });
      float* out = data + first;
      for_each_value(en, grecv + c * W + en.word, count, [=](std::int64_t j, float v) { out[j] = v; });
    }
  }
}

GradientCompressor::State OneBitCompressor::state() const {
  State st;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::string bucket = "bucket" + std::to_string(b);
    st.tensors.emplace_back(bucket + ".worker_error", buckets_[b].worker_error);
    st.tensors.emplace_back(bucket + ".server_error", buckets_[b].server_error);
  }
  return st;
}

void OneBitCompressor::set_flags(const std::vector<std::int32_t>& flags) {
  if (!flags.empty()) throw RuntimeError("1-bit state: " + std::to_string(flags.size()) + " flags; it keeps none");
}

CompressorFactory onebit_factory(const OneBitOptions& options) {
  return [options](const std::vector<GradientBucket>& buckets, int world, core::Context& ctx) {
    return std::unique_ptr<GradientCompressor>(std::make_unique<OneBitCompressor>(buckets, world, ctx, options));
  };
}

}  // namespace memtrain::comms
