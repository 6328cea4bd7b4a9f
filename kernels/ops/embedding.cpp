#include "kernels/ops/embedding.hpp"

#include "kernels/cpu/embedding.hpp"
#include "kernels/ops/dispatch.hpp"

#if MEMTRAIN_HAVE_CUDA
#include "kernels/cuda/embedding.hpp"
#endif

namespace memtrain::kernels::ops {

void bert_embeddings_forward(const OpContext& kc, float* out, const std::int32_t* ids, const std::int32_t* type_ids,
                             const float* word, const float* pos, const float* type, int B, int T, int C, int V,
                             int TV) {
  if (detail::on_cpu(kc, "bert_embeddings_forward")) {
    return kernels::bert_embeddings_forward(out, ids, type_ids, word, pos, type, B, T, C, V, TV);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::bert_embeddings_forward(detail::cuda(kc), out, ids, type_ids, word, pos, type, B, T, C, V, TV);
#endif
}

void bert_embeddings_backward(const OpContext& kc, float* dword, float* dpos, float* dtype, const float* dout,
                              const std::int32_t* ids, const std::int32_t* type_ids, int B, int T, int C) {
  if (detail::on_cpu(kc, "bert_embeddings_backward")) {
    return kernels::bert_embeddings_backward<float>(dword, dpos, dtype, dout, ids, type_ids, B, T, C);
  }
#if MEMTRAIN_HAVE_CUDA
  gpu::bert_embeddings_backward(detail::cuda(kc), dword, dpos, dtype, dout, ids, type_ids, B, T, C);
#endif
}

void vocab_parallel_embeddings_forward(const OpContext& kc, float* out, const std::int32_t* ids,
                                       const std::int32_t* type_ids, const float* word_shard, const float* pos,
                                       const float* type, int B, int T, int C, int V, int TV, std::int64_t first_row,
                                       std::int64_t rows, bool with_positions) {
  detail::require_cpu(kc, "vocab_parallel_embeddings_forward");
  kernels::vocab_parallel_embeddings_forward(out, ids, type_ids, word_shard, pos, type, B, T, C, V, TV, first_row, rows,
                                             with_positions);
}

void vocab_parallel_embedding_backward(const OpContext& kc, float* dword_shard, const float* dout,
                                       const std::int32_t* ids, int B, int T, int C, std::int64_t first_row,
                                       std::int64_t rows) {
  detail::require_cpu(kc, "vocab_parallel_embedding_backward");
  kernels::vocab_parallel_embedding_backward<float>(dword_shard, dout, ids, B, T, C, first_row, rows);
}

}  // namespace memtrain::kernels::ops
