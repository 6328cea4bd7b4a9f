// The op API (kernels/ops, Note [One op API over two backends]): on the CPU's context each op is
// its kernels/cpu kernel, bit for bit, on inputs and sizes chosen distinct, so that handing an
// argument to another parameter of the same type would change the result; on a GPU context an op without a CUDA context or without a CUDA
// twin throws, naming the op, before it touches memory. The CUDA side is tests/gpu/op_dispatch_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/flash_attention.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/gelu_half.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/rows.hpp"
#include "kernels/cpu/vocab_parallel_cross_entropy.hpp"
#include "kernels/ops/attention.hpp"
#include "kernels/ops/cross_entropy.hpp"
#include "kernels/ops/dropout.hpp"
#include "kernels/ops/embedding.hpp"
#include "kernels/ops/gelu.hpp"
#include "kernels/ops/half_convert.hpp"
#include "kernels/ops/layernorm.hpp"
#include "kernels/ops/linear.hpp"
#include "kernels/ops/optimizer.hpp"
#include "kernels/ops/rows.hpp"
#include "kernels/ops/vocab_parallel_cross_entropy.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {

using testing::random_normal;
using Floats = std::vector<float>;

const OpContext kCpu{};

Floats rnd(std::size_t n, std::uint64_t seed) { return random_normal<float>(n, seed); }

TEST(OpDispatch, LinearOnTheCpuIsTheCpuKernel) {
  const int N = 7, C = 12, OC = 5;
  const Floats x = rnd(N * C, 1), w = rnd(OC * C, 2), b = rnd(OC, 3), dy = rnd(N * OC, 4);
  Floats y(N * OC), y_ref(N * OC);
  ops::linear_forward(kCpu, y.data(), x.data(), w.data(), b.data(), N, C, OC);
  linear_forward(y_ref.data(), x.data(), w.data(), b.data(), N, C, OC);
  EXPECT_EQ(y, y_ref);
  Floats dx = rnd(N * C, 5), dw = rnd(OC * C, 6), db = rnd(OC, 7);
  Floats dx_ref = dx, dw_ref = dw, db_ref = db;
  ops::linear_backward(kCpu, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
  linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(), N, C, OC);
  EXPECT_EQ(dx, dx_ref);
  EXPECT_EQ(dw, dw_ref);
  EXPECT_EQ(db, db_ref);
}

TEST(OpDispatch, LayerNormOnTheCpuIsTheCpuKernel) {
  const int N = 6, C = 10;
  const Floats x = rnd(N * C, 8), g = rnd(C, 9), b = rnd(C, 10), dy = rnd(N * C, 11);
  Floats y(N * C), mean(N), rstd(N), y_ref(N * C), mean_ref(N), rstd_ref(N);
  ops::layernorm_forward(kCpu, y.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), N, C, 1e-5f);
  layernorm_forward(y_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), g.data(), b.data(), N, C, 1e-5f);
  EXPECT_EQ(y, y_ref);
  EXPECT_EQ(mean, mean_ref);
  EXPECT_EQ(rstd, rstd_ref);
  Floats dx = rnd(N * C, 12), dg = rnd(C, 13), db = rnd(C, 14);
  Floats dx_ref = dx, dg_ref = dg, db_ref = db;
  ops::layernorm_backward(kCpu, dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(), mean.data(),
                          rstd.data(), N, C);
  layernorm_backward(dx_ref.data(), dg_ref.data(), db_ref.data(), dy.data(), x.data(), g.data(), mean.data(),
                     rstd.data(), N, C);
  EXPECT_EQ(dx, dx_ref);
  EXPECT_EQ(dg, dg_ref);
  EXPECT_EQ(db, db_ref);
}

TEST(OpDispatch, GeluOnTheCpuIsTheCpuKernel) {
  const int N = 5, C = 9;
  const Floats x = rnd(N * C, 15), b = rnd(C, 16), dy = rnd(N * C, 17);
  Floats y(N * C), y_ref(N * C);
  ops::bias_gelu_forward(kCpu, y.data(), x.data(), b.data(), N, C);
  bias_gelu_forward(y_ref.data(), x.data(), b.data(), N, C);
  EXPECT_EQ(y, y_ref);
  Floats dx = rnd(N * C, 18), db = rnd(C, 19);
  Floats dx_ref = dx, db_ref = db;
  ops::bias_gelu_backward(kCpu, dx.data(), db.data(), dy.data(), x.data(), b.data(), N, C);
  bias_gelu_backward(dx_ref.data(), db_ref.data(), dy.data(), x.data(), b.data(), N, C);
  EXPECT_EQ(dx, dx_ref);
  EXPECT_EQ(db, db_ref);

  // The 16-bit forms, on bf16 bit patterns.
  std::vector<std::uint16_t> xh(N * C), dyh(N * C), yh(N * C), yh_ref(N * C), dxh(N * C), dxh_ref(N * C);
  convert_float_to_half(xh.data(), x.data(), N * C, HalfFormat::bf16);
  convert_float_to_half(dyh.data(), dy.data(), N * C, HalfFormat::bf16);
  ops::bias_gelu_forward_half(kCpu, yh.data(), xh.data(), b.data(), N, C, HalfFormat::bf16);
  bias_gelu_forward_half(yh_ref.data(), xh.data(), b.data(), N, C, HalfFormat::bf16);
  EXPECT_EQ(yh, yh_ref);
  Floats dbh = rnd(C, 20), dbh_ref = dbh;
  ops::bias_gelu_backward_half(kCpu, dxh.data(), dbh.data(), dyh.data(), xh.data(), b.data(), N, C, HalfFormat::bf16);
  bias_gelu_backward_half(dxh_ref.data(), dbh_ref.data(), dyh.data(), xh.data(), b.data(), N, C, HalfFormat::bf16);
  EXPECT_EQ(dxh, dxh_ref);
  EXPECT_EQ(dbh, dbh_ref);
}

TEST(OpDispatch, DropoutOnTheCpuIsTheCpuKernel) {
  const int rows = 3;
  const long per_sample = 37;
  const RngKey key{5, 6, 7, 8, 0};
  const Floats x = rnd(rows * per_sample, 21), r = rnd(rows * per_sample, 22);
  Floats y(x.size()), y_ref(x.size());
  ops::dropout_forward(kCpu, y.data(), x.data(), rows, per_sample, 0.3f, key, 4, 5);
  dropout_forward(y_ref.data(), x.data(), rows, per_sample, 0.3f, key, 4, 5);
  EXPECT_EQ(y, y_ref);
  ops::dropout_backward(kCpu, y.data(), x.data(), rows, per_sample, 0.3f, key, 4, 5);
  dropout_backward(y_ref.data(), x.data(), rows, per_sample, 0.3f, key, 4, 5);
  EXPECT_EQ(y, y_ref);
  ops::dropout_residual_forward(kCpu, y.data(), x.data(), r.data(), rows, per_sample, 0.3f, key, 4, 5);
  dropout_residual_forward(y_ref.data(), x.data(), r.data(), rows, per_sample, 0.3f, key, 4, 5);
  EXPECT_EQ(y, y_ref);
}

TEST(OpDispatch, AttentionOnTheCpuIsTheCpuKernel) {
  const int B = 3, T = 5, C = 8, NH = 2;
  const RngKey key{1, 2, 3, 0, 0};
  const std::size_t n = std::size_t(B) * T * C, nt = std::size_t(B) * NH * T * T;
  const Floats q = rnd(n, 23), k = rnd(n, 24), v = rnd(n, 25), dy = rnd(n, 26);
  const Floats mask = {1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1};  // [B, T]
  Floats out(n), probs(nt), out_ref(n), probs_ref(nt);
  ops::attention_forward(kCpu, out.data(), probs.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, 0.2f,
                         key, 3, 1);
  attention_forward(out_ref.data(), probs_ref.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, 0.2f, key,
                    3, 1);
  EXPECT_EQ(out, out_ref);
  EXPECT_EQ(probs, probs_ref);
  Floats p(nt), p_ref(nt);
  ops::attention_probs(kCpu, p.data(), q.data(), k.data(), mask.data(), B, T, C, NH);
  attention_probs(p_ref.data(), q.data(), k.data(), mask.data(), B, T, C, NH);
  EXPECT_EQ(p, p_ref);
  Floats dq = rnd(n, 27), dk = rnd(n, 28), dv = rnd(n, 29), scratch(nt);
  Floats dq_ref = dq, dk_ref = dk, dv_ref = dv, scratch_ref(nt);
  ops::attention_backward(kCpu, dq.data(), dk.data(), dv.data(), scratch.data(), dy.data(), probs.data(), q.data(),
                          k.data(), v.data(), B, T, C, NH, 0.2f, key, 3, 1);
  attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), scratch_ref.data(), dy.data(), probs.data(), q.data(),
                     k.data(), v.data(), B, T, C, NH, 0.2f, key, 3, 1);
  EXPECT_EQ(dq, dq_ref);
  EXPECT_EQ(dk, dk_ref);
  EXPECT_EQ(dv, dv_ref);

  const std::size_t tiles = ops::flash_attention_workspace_elements(kCpu, T, C, NH);
  ASSERT_EQ(tiles, flash_attention_workspace_elements(T, C, NH));
  Floats work(tiles), lse(B * NH * T), lse_ref(B * NH * T);
  ops::flash_attention_forward(kCpu, out.data(), lse.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH,
                               0.2f, key, 3, work.data(), 1);
  flash_attention_forward(out_ref.data(), lse_ref.data(), q.data(), k.data(), v.data(), mask.data(), B, T, C, NH, 0.2f,
                          key, 3, work.data(), 1);
  EXPECT_EQ(out, out_ref);
  EXPECT_EQ(lse, lse_ref);
  dq_ref = dq, dk_ref = dk, dv_ref = dv;
  ops::flash_attention_backward(kCpu, dq.data(), dk.data(), dv.data(), dy.data(), out.data(), lse.data(), q.data(),
                                k.data(), v.data(), mask.data(), B, T, C, NH, 0.2f, key, 3, work.data(), 1);
  flash_attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(), out.data(), lse.data(), q.data(),
                           k.data(), v.data(), mask.data(), B, T, C, NH, 0.2f, key, 3, work.data(), 1);
  EXPECT_EQ(dq, dq_ref);
  EXPECT_EQ(dk, dk_ref);
  EXPECT_EQ(dv, dv_ref);
}

TEST(OpDispatch, EmbeddingsOnTheCpuAreTheCpuKernels) {
  const int B = 3, T = 4, C = 6, V = 11, TV = 2;
  const std::vector<std::int32_t> ids = {1, 8, 3, 3, 0, 7, 10, 2, 9, 5, 5, 4};
  const std::vector<std::int32_t> types = {0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0};
  const Floats word = rnd(V * C, 30), pos = rnd(T * C, 31), type = rnd(TV * C, 32), dy = rnd(B * T * C, 33);
  Floats out(B * T * C), out_ref(B * T * C);
  ops::bert_embeddings_forward(kCpu, out.data(), ids.data(), types.data(), word.data(), pos.data(), type.data(), B, T,
                               C, V, TV);
  bert_embeddings_forward(out_ref.data(), ids.data(), types.data(), word.data(), pos.data(), type.data(), B, T, C, V,
                          TV);
  EXPECT_EQ(out, out_ref);
  Floats dw = rnd(V * C, 34), dp = rnd(T * C, 35), dt = rnd(TV * C, 36);
  Floats dw_ref = dw, dp_ref = dp, dt_ref = dt;
  ops::bert_embeddings_backward(kCpu, dw.data(), dp.data(), dt.data(), dy.data(), ids.data(), types.data(), B, T, C);
  bert_embeddings_backward<float>(dw_ref.data(), dp_ref.data(), dt_ref.data(), dy.data(), ids.data(), types.data(), B,
                                  T, C);
  EXPECT_EQ(dw, dw_ref);
  EXPECT_EQ(dp, dp_ref);
  EXPECT_EQ(dt, dt_ref);
  // Rows [1, 8) of the table on this rank.
  ops::vocab_parallel_embeddings_forward(kCpu, out.data(), ids.data(), types.data(), word.data() + 1 * C, pos.data(),
                                         type.data(), B, T, C, V, TV, 1, 7, true);
  vocab_parallel_embeddings_forward(out_ref.data(), ids.data(), types.data(), word.data() + 1 * C, pos.data(),
                                    type.data(), B, T, C, V, TV, 1, 7, true);
  EXPECT_EQ(out, out_ref);
  ops::vocab_parallel_embedding_backward(kCpu, dw.data(), dy.data(), ids.data(), B, T, C, 1, 7);
  vocab_parallel_embedding_backward<float>(dw_ref.data(), dy.data(), ids.data(), B, T, C, 1, 7);
  EXPECT_EQ(dw, dw_ref);
}

TEST(OpDispatch, CrossEntropyOnTheCpuIsTheCpuKernel) {
  const int M = 4, V = 11;
  const Floats logits = rnd(M * V, 37);
  const std::vector<std::int32_t> targets = {3, 0, 10, 7};
  Floats d(M * V), d_ref(M * V);
  std::int64_t correct = -1, correct_ref = -2;
  const double loss =
      ops::softmax_cross_entropy_forward_backward(kCpu, d.data(), logits.data(), targets.data(), M, V, 0.25f, &correct);
  const double loss_ref =
      softmax_cross_entropy_forward_backward(d_ref.data(), logits.data(), targets.data(), M, V, 0.25f, &correct_ref);
  EXPECT_EQ(loss, loss_ref);
  EXPECT_EQ(correct, correct_ref);
  EXPECT_EQ(d, d_ref);
  correct = -1, correct_ref = -2;
  EXPECT_EQ(ops::softmax_cross_entropy_forward(kCpu, logits.data(), targets.data(), M, V, &correct),
            softmax_cross_entropy_forward(logits.data(), targets.data(), M, V, &correct_ref));
  EXPECT_EQ(correct, correct_ref);
}

// One rank's passes (columns [4, 10) of a vocabulary of 13: the last three padding), the
// op's scratch carved from one buffer, against the kernel's passes on separate arrays.
TEST(OpDispatch, VocabParallelCrossEntropyOnTheCpuIsTheCpuKernel) {
  const int M = 3;
  const std::int64_t first = 4, columns = 6, V = 13 - 3;
  const Floats logits = rnd(M * columns, 39);
  const std::vector<std::int32_t> targets = {5, 0, 7};
  std::vector<double> buffer(ops::vocab_parallel_cross_entropy_scratch_bytes(M) / sizeof(double));
  EXPECT_EQ(ops::vocab_parallel_cross_entropy_scratch_bytes(M), std::size_t{40} * M);
  const auto s = ops::vocab_parallel_cross_entropy_scratch(buffer.data(), M);
  Floats d(M * columns);
  std::int64_t correct = -1;
  ops::vocab_parallel_cross_entropy_local_max(kCpu, s, logits.data(), targets.data(), M, first, columns, V);
  ops::vocab_parallel_cross_entropy_sums(kCpu, s, logits.data(), targets.data(), M, first, columns, V);
  const double loss = ops::vocab_parallel_cross_entropy_finish(kCpu, s, d.data(), logits.data(), targets.data(), M,
                                                               first, columns, V, 0.25f, &correct);

  Floats local_max(M), global_max(M), d_ref(M * columns);
  std::vector<std::int64_t> local_first(M);
  std::vector<double> sums(2 * M), argmax(M);
  std::int64_t correct_ref = -2;
  vocab_parallel_cross_entropy_local_max(local_max.data(), local_first.data(), global_max.data(), logits.data(),
                                         targets.data(), M, first, columns, V);
  vocab_parallel_cross_entropy_sums(sums.data(), argmax.data(), logits.data(), targets.data(), local_max.data(),
                                    local_first.data(), global_max.data(), M, first, columns, V);
  const double loss_ref =
      vocab_parallel_cross_entropy_finish(d_ref.data(), logits.data(), targets.data(), global_max.data(), sums.data(),
                                          argmax.data(), M, first, columns, V, 0.25f, &correct_ref);
  EXPECT_EQ(loss, loss_ref);
  EXPECT_EQ(correct, correct_ref);
  EXPECT_EQ(d, d_ref);
  EXPECT_EQ(std::vector<double>(s.sums, s.sums + 2 * M), sums);
  EXPECT_EQ(std::vector<double>(s.argmax, s.argmax + M), argmax);
}

// The GPU's fixed scratch is sized from what the ops report (runtime/core/cuda_device.cpp);
// on the CPU they need none, and a build without CUDA says it has no GPU kernels to size.
TEST(OpDispatch, OpsReportTheirGpuScratchNeedAndNoneOnTheCpu) {
  EXPECT_EQ(ops::reduction_workspace_bytes(Device::cpu), 0u);
  EXPECT_EQ(ops::linear_bf16_workspace_bytes(Device::cpu), 0u);
  EXPECT_EQ(ops::softmax_cross_entropy_workspace_bytes(Device::cpu, 4096), 0u);
  EXPECT_EQ(ops::attention_workspace_bytes(Device::cpu, 8, 512, 16, 0.1f, 4), 0u);
#if MEMTRAIN_HAVE_CUDA
  EXPECT_GT(ops::reduction_workspace_bytes(Device::cuda), 0u);
  EXPECT_EQ(ops::linear_bf16_workspace_bytes(Device::cuda), std::size_t{8} << 20);
  EXPECT_GT(ops::softmax_cross_entropy_workspace_bytes(Device::cuda, 4096),
            ops::softmax_cross_entropy_workspace_bytes(Device::cuda, 1));
  // The dropped probabilities [B, NH, T, T] in fp32.
  EXPECT_GE(ops::attention_workspace_bytes(Device::cuda, 8, 512, 16, 0.1f, 4), std::size_t{8} * 16 * 512 * 512 * 4);
#else
  try {
    ops::softmax_cross_entropy_workspace_bytes(Device::cuda, 4);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("softmax_cross_entropy_workspace_bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  }
#endif
}

TEST(OpDispatch, ConversionsOnTheCpuAreTheCpuKernels) {
  const Floats x = rnd(33, 38);
  for (HalfFormat f : {HalfFormat::f16, HalfFormat::bf16}) {
    std::vector<std::uint16_t> h(x.size()), h_ref(x.size());
    ops::convert_float_to_half(kCpu, h.data(), x.data(), 33, f);
    convert_float_to_half(h_ref.data(), x.data(), 33, f);
    EXPECT_EQ(h, h_ref);
    Floats back(x.size()), back_ref(x.size());
    ops::convert_half_to_float(kCpu, back.data(), h.data(), 33, f);
    convert_half_to_float(back_ref.data(), h.data(), 33, f);
    EXPECT_EQ(back, back_ref);
  }
}

TEST(OpDispatch, OptimizerOpsOnTheCpuAreTheCpuKernels) {
  const std::int64_t n = 37;
  const Floats g = rnd(n, 50);
  Floats p = rnd(n, 51), m = rnd(n, 52), v = rnd(n, 53);
  for (auto& e : v) e = e * e;  // a second moment is never negative
  Floats p_ref = p, m_ref = m, v_ref = v;
  // lr, beta1, beta2, eps, weight decay, step and scale all distinct, so a swapped pair differs.
  ops::adamw_update(kCpu, p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.85f, 0.97f, 1e-6f, 0.1f, 3, 0.7f);
  adamw_update(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, 1e-2f, 0.85f, 0.97f, 1e-6f, 0.1f, 3, 0.7f);
  EXPECT_EQ(p, p_ref);
  EXPECT_EQ(m, m_ref);
  EXPECT_EQ(v, v_ref);
  for (HalfFormat f : {HalfFormat::f16, HalfFormat::bf16}) {
    std::vector<std::uint16_t> value(n), gh(n);
    convert_float_to_half(gh.data(), g.data(), n, f);
    Floats master = rnd(n, 54), mh = rnd(n, 55), vh(n, 0.25f);
    convert_float_to_half(value.data(), master.data(), n, f);
    Floats master_ref = master, mh_ref = mh, vh_ref = vh;
    std::vector<std::uint16_t> value_ref = value;
    ops::adamw_update_half(kCpu, master.data(), value.data(), gh.data(), mh.data(), vh.data(), n, 1e-2f, 0.85f, 0.97f,
                           1e-6f, 0.1f, 2, 0.5f, f);
    adamw_update_half(master_ref.data(), value_ref.data(), gh.data(), mh_ref.data(), vh_ref.data(), n, 1e-2f, 0.85f,
                      0.97f, 1e-6f, 0.1f, 2, 0.5f, f);
    EXPECT_EQ(master, master_ref);
    EXPECT_EQ(value, value_ref);
    EXPECT_EQ(mh, mh_ref);
    EXPECT_EQ(vh, vh_ref);
    EXPECT_EQ(ops::sum_of_squares_half(kCpu, gh.data(), n, f), sum_of_squares_half(gh.data(), n, f));
    EXPECT_TRUE(ops::all_finite_half(kCpu, gh.data(), n, f));
    gh[n - 1] = f == HalfFormat::f16 ? 0x7c00 : 0x7f80;  // +inf in either format
    EXPECT_FALSE(ops::all_finite_half(kCpu, gh.data(), n, f));
  }
  EXPECT_EQ(ops::sum_of_squares(kCpu, g.data(), n), sum_of_squares(g.data(), n));
  EXPECT_TRUE(ops::all_finite(kCpu, g.data(), n));
  Floats x = g, x_ref = g;
  ops::scale_inplace(kCpu, x.data(), n, 0.3f);
  scale_inplace(x_ref.data(), n, 0.3f);
  EXPECT_EQ(x, x_ref);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(ops::all_finite(kCpu, x.data(), n));
}

TEST(OpDispatch, RowOpsOnTheCpuAreTheCpuKernels) {
  const int N = 9, C = 6, M = 4;
  const Floats x = rnd(N * C, 70), b = rnd(C, 71), src = rnd(M * C, 72);
  const std::vector<std::int32_t> rows = {8, -1, 2, 5};
  Floats y = x, y_ref = x;
  ops::add_bias(kCpu, y.data(), b.data(), N, C);
  add_bias(y_ref.data(), b.data(), N, C);
  EXPECT_EQ(y, y_ref);
  ops::add_inplace(kCpu, y.data(), x.data(), N * C);
  add_inplace(y_ref.data(), x.data(), N * C);
  EXPECT_EQ(y, y_ref);
  Floats g(M * C, 7.0f), g_ref(M * C, 7.0f);
  ops::gather_rows(kCpu, g.data(), x.data(), rows.data(), M, C * 4);
  gather_rows(g_ref.data(), x.data(), rows.data(), M, C * 4);
  EXPECT_EQ(g, g_ref);
  ops::scatter_add_rows(kCpu, y.data(), src.data(), rows.data(), M, C);
  scatter_add_rows(y_ref.data(), src.data(), rows.data(), M, C);
  EXPECT_EQ(y, y_ref);
}

// What an op says when asked to run on a GPU it cannot reach, and that it says it before
// writing: the output keeps its sentinel.
std::string gpu_refusal(const std::function<void(const OpContext&)>& op) {
  try {
    op(OpContext{Device::cuda, nullptr});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(OpDispatch, AGpuContextWithoutItsCudaStateIsRefusedNamingTheOp) {
  Floats out(4, 7.0f);
  const Floats x(4, 1.0f), g(2, 1.0f), b(2, 0.0f);
  Floats mean(2), rstd(2);
  const std::string what = gpu_refusal([&](const OpContext& kc) {
    ops::layernorm_forward(kc, out.data(), mean.data(), rstd.data(), x.data(), g.data(), b.data(), 2, 2, 1e-5f);
  });
  EXPECT_NE(what.find("layernorm_forward"), std::string::npos) << what;
#if MEMTRAIN_HAVE_CUDA
  EXPECT_NE(what.find("no CUDA kernel context"), std::string::npos) << what;
#else
  EXPECT_NE(what.find("built without CUDA"), std::string::npos) << what;
#endif
  EXPECT_EQ(out, Floats(4, 7.0f));
}

TEST(OpDispatch, TheOptimizerAndRowOpsRefuseAGpuContextWithoutItsCudaStateBeforeWriting) {
  Floats p(6, 1.0f), m(6, 2.0f), v(6, 3.0f);
  const Floats g(6, 0.5f);
  const std::string what = gpu_refusal([&](const OpContext& kc) {
    ops::adamw_update(kc, p.data(), g.data(), m.data(), v.data(), 6, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, 1.0f);
  });
  EXPECT_NE(what.find("adamw_update"), std::string::npos) << what;
  EXPECT_EQ(p, Floats(6, 1.0f));
  EXPECT_EQ(m, Floats(6, 2.0f));
  EXPECT_EQ(v, Floats(6, 3.0f));
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) { ops::sum_of_squares(kc, g.data(), 6); }).find("sum_of_squares"),
            std::string::npos);
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) { ops::scale_inplace(kc, p.data(), 6, 0.5f); }).find("scale_inplace"),
            std::string::npos);
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) { ops::add_bias(kc, p.data(), g.data(), 2, 3); }).find("add_bias"),
            std::string::npos);
  const std::int32_t rows[2] = {0, 1};
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) {
              ops::scatter_add_rows(kc, p.data(), g.data(), rows, 2, 3);
            }).find("scatter_add_rows"),
            std::string::npos);
  EXPECT_EQ(p, Floats(6, 1.0f));
}

TEST(OpDispatch, AnOpWithoutACudaTwinRefusesTheGpu) {
  Floats probs(8, 7.0f);
  const Floats q(8, 1.0f), k(8, 1.0f);
  const std::string what = gpu_refusal(
      [&](const OpContext& kc) { ops::attention_probs(kc, probs.data(), q.data(), k.data(), nullptr, 1, 2, 4, 2); });
  EXPECT_NE(what.find("attention_probs has no CUDA kernel yet"), std::string::npos) << what;
  EXPECT_EQ(probs, Floats(8, 7.0f));
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) {
              std::uint16_t h[2] = {0, 0};
              ops::linear_forward_half_weight(kc, probs.data(), q.data(), h, nullptr, 1, 1, 1, HalfFormat::bf16,
                                              probs.data());
            }).find("linear_forward_half_weight has no CUDA kernel yet"),
            std::string::npos);
  // The vocabulary-parallel cross-entropy's passes have no twin: refused before the targets
  // are even read.
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) {
              const ops::VocabParallelCrossEntropyScratch s;
              ops::vocab_parallel_cross_entropy_local_max(kc, s, q.data(), nullptr, 1, 0, 8, 8);
            }).find("vocab_parallel_cross_entropy_local_max has no CUDA kernel yet"),
            std::string::npos);
  // The bf16-operand linears have their twin (kernels/cuda/linear_bf16): refused here only for
  // the missing CUDA state.
  EXPECT_NE(gpu_refusal([&](const OpContext& kc) {
              std::uint16_t h[2] = {0, 0};
              ops::linear_forward_bf16(kc, probs.data(), h, h, nullptr, 1, 1, 1);
            }).find("linear_forward_bf16"),
            std::string::npos);
}

// Note [cuBLASLt is opened on first use]: this process links the CUDA twins (in a build with
// CUDA; without it the test passes trivially) and runs a linear op on the CPU, yet cuBLASLt,
// whose loading alone makes about 150 MB resident, is not mapped: it is no load-time
// dependency of a binary that links the op API.
TEST(OpDispatch, CpuOpsNeverLoadCublasLt) {
  const Floats x = rnd(6, 40), w = rnd(6, 41);
  Floats y(4);
  ops::linear_forward(kCpu, y.data(), x.data(), w.data(), nullptr, 2, 3, 2);
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps.good());
  std::string line;
  while (std::getline(maps, line)) EXPECT_EQ(line.find("libcublasLt"), std::string::npos) << line;
}

}  // namespace
}  // namespace memtrain::kernels
