#include "kernels/cpu/embedding.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {
namespace {

void check_ids(const std::int32_t* ids, int B, int T, int limit, const char* what) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const std::int32_t id = ids[static_cast<std::int64_t>(b) * T + t];
      if (id < 0 || id >= limit) {
        throw std::out_of_range(std::string("bert_embeddings_forward: ") + what + "[b=" + std::to_string(b) +
                                ", t=" + std::to_string(t) + "] = " + std::to_string(id) +
                                "; expected a value in [0, " + std::to_string(limit) + ")");
      }
    }
  }
}

}  // namespace

template <class Scalar>
void bert_embeddings_forward(Scalar* out, const std::int32_t* ids, const std::int32_t* type_ids, const Scalar* word,
                             const Scalar* pos, const Scalar* type, int B, int T, int C, int V, int TV) {
  // Validate before writing: an exception cannot leave an OpenMP loop.
  check_ids(ids, B, T, V, "input_ids");
  if (type_ids != nullptr) check_ids(type_ids, B, T, TV, "token_type_ids");
  const std::int64_t rows = static_cast<std::int64_t>(B) * T;
  detail::parallel_for(rows, rows >= 64, [=](std::int64_t r) {
    const int t = static_cast<int>(r % T);
    const Scalar* w = word + static_cast<std::int64_t>(ids[r]) * C;
    const Scalar* p = pos + static_cast<std::int64_t>(t) * C;
    const Scalar* ty = type + static_cast<std::int64_t>(type_ids ? type_ids[r] : 0) * C;
    Scalar* o = out + r * C;  // [C]
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = w[c] + p[c] + ty[c];
  });
}

template <class Scalar>
void bert_embeddings_backward(NoDeduce<Scalar>* dword, NoDeduce<Scalar>* dpos, NoDeduce<Scalar>* dtype,
                              const Scalar* dout, const std::int32_t* ids, const std::int32_t* type_ids, int B, int T,
                              int C) {
  // Repeated ids scatter into the same table row, so threads split columns, not rows
  // (Note [Column-block parallel reductions]).
  detail::for_column_blocks(B * T, C, [=](int c0, int c1) {
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const std::int64_t r = static_cast<std::int64_t>(b) * T + t;
        const Scalar* g = dout + r * C;
        if (dword != nullptr) {
          Scalar* w = dword + static_cast<std::int64_t>(ids[r]) * C;
#pragma omp simd
          for (int c = c0; c < c1; ++c) w[c] += g[c];
        }
        if (dpos != nullptr) {
          Scalar* p = dpos + static_cast<std::int64_t>(t) * C;
#pragma omp simd
          for (int c = c0; c < c1; ++c) p[c] += g[c];
        }
        if (dtype != nullptr) {
          Scalar* ty = dtype + static_cast<std::int64_t>(type_ids ? type_ids[r] : 0) * C;
#pragma omp simd
          for (int c = c0; c < c1; ++c) ty[c] += g[c];
        }
      }
    }
  });
}

template <class Scalar>
void vocab_parallel_embeddings_forward(Scalar* out, const std::int32_t* ids, const std::int32_t* type_ids,
                                       const Scalar* word_shard, const Scalar* pos, const Scalar* type, int B, int T,
                                       int C, int V, int TV, std::int64_t first_row, std::int64_t rows,
                                       bool with_positions) {
  check_ids(ids, B, T, V, "input_ids");
  if (type_ids != nullptr) check_ids(type_ids, B, T, TV, "token_type_ids");
  const std::int64_t n = static_cast<std::int64_t>(B) * T;
  detail::parallel_for(n, n >= 64, [=](std::int64_t r) {
    const std::int64_t row = static_cast<std::int64_t>(ids[r]) - first_row;
    const Scalar* w = row >= 0 && row < rows ? word_shard + row * C : nullptr;
    const Scalar* p = pos + (r % T) * C;
    const Scalar* ty = type + static_cast<std::int64_t>(type_ids ? type_ids[r] : 0) * C;
    Scalar* o = out + r * C;  // [C]
    for (int c = 0; c < C; ++c) {
      Scalar x = w != nullptr ? w[c] : Scalar(0);
      if (with_positions) x = x + p[c] + ty[c];
      o[c] = x;
    }
  });
}

template <class Scalar>
void vocab_parallel_embedding_backward(NoDeduce<Scalar>* dword_shard, const Scalar* dout, const std::int32_t* ids,
                                       int B, int T, int C, std::int64_t first_row, std::int64_t rows) {
  detail::for_column_blocks(B * T, C, [=](int c0, int c1) {
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(B) * T; ++r) {
      const std::int64_t row = static_cast<std::int64_t>(ids[r]) - first_row;
      if (row < 0 || row >= rows) continue;
      const Scalar* g = dout + r * C;
      Scalar* w = dword_shard + row * C;
#pragma omp simd
      for (int c = c0; c < c1; ++c) w[c] += g[c];
    }
  });
}

#define MEMTRAIN_INSTANTIATE(Scalar)                                                                                  \
  template void bert_embeddings_forward<Scalar>(Scalar*, const std::int32_t*, const std::int32_t*, const Scalar*,     \
                                                const Scalar*, const Scalar*, int, int, int, int, int);               \
  template void bert_embeddings_backward<Scalar>(Scalar*, Scalar*, Scalar*, const Scalar*, const std::int32_t*,       \
                                                 const std::int32_t*, int, int, int);                                 \
  template void vocab_parallel_embeddings_forward<Scalar>(Scalar*, const std::int32_t*, const std::int32_t*,          \
                                                          const Scalar*, const Scalar*, const Scalar*, int, int, int, \
                                                          int, int, std::int64_t, std::int64_t, bool);                \
  template void vocab_parallel_embedding_backward<Scalar>(Scalar*, const Scalar*, const std::int32_t*, int, int, int, \
                                                          std::int64_t, std::int64_t);
MEMTRAIN_INSTANTIATE(float)
MEMTRAIN_INSTANTIATE(double)
#undef MEMTRAIN_INSTANTIATE

}  // namespace memtrain::kernels
