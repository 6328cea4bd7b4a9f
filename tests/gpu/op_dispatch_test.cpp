// The op API on a GPU context (kernels/ops, Note [One op API over two backends]): each op given
// OpContext{cuda, &ctx} runs its CUDA twin on device pointers, and matches the CPU kernel run in
// double precision (fp32 within 1e-5; dropout and the conversions bit for bit), with outputs
// poisoned first so that an unwritten element fails. Together with tests/kernels/op_dispatch_test.cpp
// (the CPU side), this checks that the ops hand each argument to the right parameter on both.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/rows.hpp"
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
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

using kernels::testing::random_normal;

class OpDispatchOnGpu : public GpuTest {
 protected:
  kernels::OpContext gpu() const { return kernels::OpContext{kernels::Device::cuda, &ctx}; }
};

std::vector<float> rnd(std::size_t n, std::uint64_t seed) { return random_normal<float>(n, seed); }

// AdamW is bitwise the CPU's on both storage forms (Note [No fused multiply-add in AdamW]); the
// norm's sums add in another order (within rounding); the finiteness check sees one inf.
TEST_F(OpDispatchOnGpu, TheOptimizerOpsRunTheirCudaTwins) {
  const std::int64_t n = 1031;
  const auto g = rnd(n, 60);
  auto p = rnd(n, 61), m = rnd(n, 62), v = rnd(n, 63);
  for (auto& e : v) e = e * e;
  DeviceBuffer<float> gp(p), gg(g), gm(m), gv(v);
  kernels::ops::adamw_update(gpu(), gp.get(), gg.get(), gm.get(), gv.get(), n, 1e-2f, 0.85f, 0.97f, 1e-6f, 0.1f, 3,
                             0.7f);
  kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.85f, 0.97f, 1e-6f, 0.1f, 3, 0.7f);
  EXPECT_EQ(gp.download(), p);
  EXPECT_EQ(gm.download(), m);
  EXPECT_EQ(gv.download(), v);
  const double ss = kernels::sum_of_squares(g.data(), n);
  EXPECT_NEAR(kernels::ops::sum_of_squares(gpu(), gg.get(), n), ss, 1e-12 * ss);
  for (kernels::HalfFormat f : {kernels::HalfFormat::f16, kernels::HalfFormat::bf16}) {
    std::vector<std::uint16_t> value(n), gh(n);
    kernels::convert_float_to_half(gh.data(), g.data(), n, f);
    auto master = rnd(n, 64), mh = rnd(n, 65);
    std::vector<float> vh(n, 0.25f);
    DeviceBuffer<float> gmaster(master), gmh(mh), gvh(vh);
    DeviceBuffer<std::uint16_t> gvalue(n), ggh(gh);
    gvalue.poison();
    kernels::ops::adamw_update_half(gpu(), gmaster.get(), gvalue.get(), ggh.get(), gmh.get(), gvh.get(), n, 1e-2f,
                                    0.85f, 0.97f, 1e-6f, 0.1f, 2, 0.5f, f);
    kernels::adamw_update_half(master.data(), value.data(), gh.data(), mh.data(), vh.data(), n, 1e-2f, 0.85f, 0.97f,
                               1e-6f, 0.1f, 2, 0.5f, f);
    EXPECT_EQ(gmaster.download(), master);
    EXPECT_EQ(gvalue.download(), value);
    EXPECT_EQ(gmh.download(), mh);
    EXPECT_EQ(gvh.download(), vh);
    const double ssh = kernels::sum_of_squares_half(gh.data(), n, f);
    EXPECT_NEAR(kernels::ops::sum_of_squares_half(gpu(), ggh.get(), n, f), ssh, 1e-12 * ssh);
    EXPECT_TRUE(kernels::ops::all_finite_half(gpu(), ggh.get(), n, f));
    gh[n / 2] = f == kernels::HalfFormat::f16 ? 0x7c00 : 0x7f80;  // +inf
    ggh.upload(gh);
    EXPECT_FALSE(kernels::ops::all_finite_half(gpu(), ggh.get(), n, f));
  }
  auto x = g;
  DeviceBuffer<float> gx(x);
  kernels::ops::scale_inplace(gpu(), gx.get(), n, 0.3f);
  kernels::scale_inplace(x.data(), n, 0.3f);
  EXPECT_EQ(gx.download(), x);
  EXPECT_TRUE(kernels::ops::all_finite(gpu(), gx.get(), n));
}

TEST_F(OpDispatchOnGpu, TheRowOpsRunTheirCudaTwins) {
  const int N = 37, C = 29, M = 5;
  const auto x = rnd(N * C, 70), b = rnd(C, 71), src = rnd(M * C, 72);
  const std::vector<std::int32_t> rows = {36, -1, 2, 17, 5};
  auto y = x;
  DeviceBuffer<float> gy(y), gx(x), gb(b), gsrc(src), gg(M * C);
  DeviceBuffer<std::int32_t> grows(rows);
  kernels::ops::add_bias(gpu(), gy.get(), gb.get(), N, C);
  kernels::add_bias(y.data(), b.data(), N, C);
  kernels::ops::add_inplace(gpu(), gy.get(), gx.get(), N * C);
  kernels::add_inplace(y.data(), x.data(), N * C);
  kernels::ops::scatter_add_rows(gpu(), gy.get(), gsrc.get(), grows.get(), M, C);
  kernels::scatter_add_rows(y.data(), src.data(), rows.data(), M, C);
  EXPECT_EQ(gy.download(), y);
  gg.poison();
  kernels::ops::gather_rows(gpu(), gg.get(), gx.get(), grows.get(), M, C * 4);
  std::vector<float> g(M * C);
  kernels::gather_rows(g.data(), x.data(), rows.data(), M, C * 4);
  EXPECT_EQ(gg.download(), g);
}

// The bf16-operand linears (kernels/cuda/linear_bf16, cuBLASLt on tensor cores) against the
// definition in double on the same bf16 values: fp32 outputs within 1e-5, the bf16 weight
// gradient within bf16's 1e-2; gradients start non-zero and accumulate; a bf16 weight gradient is
// computed in blocks of rows smaller than OC here (a scratch of 3 rows) to cover the blocking.
TEST_F(OpDispatchOnGpu, TheBf16LinearsRunOnTensorCores) {
  const int N = 37, C = 24, OC = 10;
  auto bf16_values = [](std::vector<float> v) {
    for (auto& x : v) x = kernels::bf16_to_float(kernels::float_to_bf16(x));
    return v;
  };
  auto bits = [](const std::vector<float>& v) {
    std::vector<std::uint16_t> b(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) b[i] = kernels::float_to_bf16(v[i]);
    return b;
  };
  const auto x = bf16_values(rnd(N * C, 80)), w = bf16_values(rnd(OC * C, 81)), dy = bf16_values(rnd(N * OC, 82));
  const auto b = rnd(OC, 83);
  const auto dx0 = rnd(N * C, 84), db0 = rnd(OC, 85), dw0 = bf16_values(rnd(OC * C, 86));
  std::vector<double> y_ref(N * OC), dx_ref = widen(dx0), dw_ref = widen(dw0), db_ref = widen(db0);
  const auto xd = widen(x), wd = widen(w), dyd = widen(dy), bd = widen(b);
  kernels::linear_forward(y_ref.data(), xd.data(), wd.data(), bd.data(), N, C, OC);
  kernels::linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dyd.data(), xd.data(), wd.data(), N, C, OC);
  DeviceBuffer<std::uint16_t> gx(bits(x)), gw(bits(w)), gdy(bits(dy)), gdw(bits(dw0));
  DeviceBuffer<float> gb(b), gy(N * OC), gdx(dx0), gdb(db0);
  gy.poison();
  kernels::ops::linear_forward_bf16(gpu(), gy.get(), gx.get(), gw.get(), gb.get(), N, C, OC);
  EXPECT_TRUE(close(gy.download(), y_ref, 1e-5)) << "out";
  kernels::gpu::KernelContext small = ctx;
  small.scratch_bytes = 3 * C * sizeof(float);
  kernels::ops::linear_backward_bf16(kernels::OpContext{kernels::Device::cuda, &small}, gdx.get(), gdw.get(),
                                     /*dweight_bf16=*/true, /*dweight_accumulate=*/true, gdb.get(), gdy.get(), gx.get(),
                                     gw.get(), N, C, OC);
  EXPECT_TRUE(close(gdx.download(), dx_ref, 1e-5)) << "dinp";
  EXPECT_TRUE(close(gdb.download(), db_ref, 1e-5)) << "dbias";
  std::vector<float> dw_got;
  for (const std::uint16_t h : gdw.download()) dw_got.push_back(kernels::bf16_to_float(h));
  EXPECT_TRUE(close(dw_got, dw_ref, 1e-2)) << "dweight (bf16)";
  // An f32 weight gradient, overwritten (not accumulated).
  DeviceBuffer<float> gdw32(std::vector<float>(OC * C, 7.0f));
  kernels::ops::linear_backward_bf16(gpu(), nullptr, gdw32.get(), false, false, nullptr, gdy.get(), gx.get(), gw.get(),
                                     N, C, OC);
  std::vector<double> dw32_ref(OC * C, 0.0);
  kernels::linear_backward(static_cast<double*>(nullptr), dw32_ref.data(), static_cast<double*>(nullptr), dyd.data(),
                           xd.data(), wd.data(), N, C, OC);
  EXPECT_TRUE(close(gdw32.download(), dw32_ref, 1e-5)) << "dweight (f32)";
}

TEST_F(OpDispatchOnGpu, LinearLayerNormAndGeluRunTheirCudaTwins) {
  const int N = 33, C = 48, OC = 20;
  const auto x = rnd(N * C, 1), w = rnd(OC * C, 2), b = rnd(OC, 3), dy = rnd(N * OC, 4);
  const auto xd = widen(x), wd = widen(w), bd = widen(b), dyd = widen(dy);
  // Gradients start non-zero: the ops accumulate (+=), which a test from zeros could not tell
  // from overwriting.
  const auto dx0 = rnd(N * C, 20), dw0 = rnd(OC * C, 21), db0 = rnd(OC, 22);
  std::vector<double> y_ref(N * OC), dx_ref = widen(dx0), dw_ref = widen(dw0), db_ref = widen(db0);
  kernels::linear_forward(y_ref.data(), xd.data(), wd.data(), bd.data(), N, C, OC);
  kernels::linear_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dyd.data(), xd.data(), wd.data(), N, C, OC);
  DeviceBuffer<float> gx(x), gw(w), gb(b), gdy(dy), gy(N * OC), gdx(dx0), gdw(dw0), gdb(db0);
  gy.poison();
  kernels::ops::linear_forward(gpu(), gy.get(), gx.get(), gw.get(), gb.get(), N, C, OC);
  kernels::ops::linear_backward(gpu(), gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), N, C, OC);
  EXPECT_TRUE(close(gy.download(), y_ref, 1e-5)) << "linear out";
  EXPECT_TRUE(close(gdx.download(), dx_ref, 1e-5)) << "linear dinp";
  EXPECT_TRUE(close(gdw.download(), dw_ref, 1e-5)) << "linear dweight";
  EXPECT_TRUE(close(gdb.download(), db_ref, 1e-5)) << "linear dbias";

  const auto g = rnd(C, 5), be = rnd(C, 6), dln = rnd(N * C, 7);
  const auto gd = widen(g), bed = widen(be), dlnd = widen(dln);
  const auto dxl0 = rnd(N * C, 23), dg0 = rnd(C, 24), dbl0 = rnd(C, 25);
  std::vector<double> ln_ref(N * C), mean_ref(N), rstd_ref(N), dxl_ref = widen(dxl0), dg_ref = widen(dg0),
                                                               dbl_ref = widen(dbl0);
  kernels::layernorm_forward(ln_ref.data(), mean_ref.data(), rstd_ref.data(), xd.data(), gd.data(), bed.data(), N, C,
                             1e-5);
  kernels::layernorm_backward(dxl_ref.data(), dg_ref.data(), dbl_ref.data(), dlnd.data(), xd.data(), gd.data(),
                              mean_ref.data(), rstd_ref.data(), N, C);
  DeviceBuffer<float> gg(g), gbe(be), gdln(dln), gln(N * C), gmean(N), grstd(N), gdxl(dxl0), gdg(dg0), gdbl(dbl0);
  gln.poison();
  gmean.poison();
  grstd.poison();
  kernels::ops::layernorm_forward(gpu(), gln.get(), gmean.get(), grstd.get(), gx.get(), gg.get(), gbe.get(), N, C,
                                  1e-5f);
  kernels::ops::layernorm_backward(gpu(), gdxl.get(), gdg.get(), gdbl.get(), gdln.get(), gx.get(), gg.get(),
                                   gmean.get(), grstd.get(), N, C);
  EXPECT_TRUE(close(gln.download(), ln_ref, 1e-5)) << "layernorm out";
  EXPECT_TRUE(close(gdxl.download(), dxl_ref, 1e-5)) << "layernorm dx";
  EXPECT_TRUE(close(gdg.download(), dg_ref, 1e-5)) << "layernorm dgamma";
  EXPECT_TRUE(close(gdbl.download(), dbl_ref, 1e-5)) << "layernorm dbeta";

  const auto dge0 = rnd(N * C, 26), dgb0 = rnd(C, 27);
  std::vector<double> ge_ref(N * C), dge_ref = widen(dge0), dgb_ref = widen(dgb0);
  kernels::bias_gelu_forward(ge_ref.data(), xd.data(), gd.data(), N, C);
  kernels::bias_gelu_backward(dge_ref.data(), dgb_ref.data(), dlnd.data(), xd.data(), gd.data(), N, C);
  DeviceBuffer<float> gge(N * C), gdge(dge0), gdgb(dgb0);
  gge.poison();
  kernels::ops::bias_gelu_forward(gpu(), gge.get(), gx.get(), gg.get(), N, C);
  kernels::ops::bias_gelu_backward(gpu(), gdge.get(), gdgb.get(), gdln.get(), gx.get(), gg.get(), N, C);
  EXPECT_TRUE(close(gge.download(), ge_ref, 1e-5)) << "gelu out";
  EXPECT_TRUE(close(gdge.download(), dge_ref, 1e-5)) << "gelu dinp";
  EXPECT_TRUE(close(gdgb.download(), dgb_ref, 1e-5)) << "gelu dbias";
}

TEST_F(OpDispatchOnGpu, DropoutAndConversionsAreBitwiseTheCpus) {
  const int rows = 4;
  const long per_sample = 301;
  const kernels::RngKey key{3, 1, 4, 1, 5};
  const auto x = rnd(rows * per_sample, 8), r = rnd(rows * per_sample, 9);
  std::vector<float> y_ref(x.size()), dx_ref(x.size()), yr_ref(x.size());
  kernels::dropout_forward(y_ref.data(), x.data(), rows, per_sample, 0.25f, key, 2, 3);
  kernels::dropout_backward(dx_ref.data(), x.data(), rows, per_sample, 0.25f, key, 2, 3);
  kernels::dropout_residual_forward(yr_ref.data(), x.data(), r.data(), rows, per_sample, 0.25f, key, 2, 3);
  DeviceBuffer<float> gx(x), gr(r), gy(x.size()), gdx(x.size()), gyr(x.size());
  gy.poison();
  gdx.poison();
  gyr.poison();
  kernels::ops::dropout_forward(gpu(), gy.get(), gx.get(), rows, per_sample, 0.25f, key, 2, 3);
  kernels::ops::dropout_backward(gpu(), gdx.get(), gx.get(), rows, per_sample, 0.25f, key, 2, 3);
  kernels::ops::dropout_residual_forward(gpu(), gyr.get(), gx.get(), gr.get(), rows, per_sample, 0.25f, key, 2, 3);
  EXPECT_EQ(gy.download(), y_ref);
  EXPECT_EQ(gdx.download(), dx_ref);
  EXPECT_EQ(gyr.download(), yr_ref);

  for (kernels::HalfFormat f : {kernels::HalfFormat::f16, kernels::HalfFormat::bf16}) {
    std::vector<std::uint16_t> h_ref(x.size());
    kernels::convert_float_to_half(h_ref.data(), x.data(), static_cast<std::int64_t>(x.size()), f);
    std::vector<float> back_ref(x.size());
    kernels::convert_half_to_float(back_ref.data(), h_ref.data(), static_cast<std::int64_t>(x.size()), f);
    DeviceBuffer<std::uint16_t> gh(x.size());
    DeviceBuffer<float> gback(x.size());
    gh.poison();
    gback.poison();
    kernels::ops::convert_float_to_half(gpu(), gh.get(), gx.get(), static_cast<std::int64_t>(x.size()), f);
    kernels::ops::convert_half_to_float(gpu(), gback.get(), gh.get(), static_cast<std::int64_t>(x.size()), f);
    EXPECT_EQ(gh.download(), h_ref);
    EXPECT_EQ(gback.download(), back_ref);
    // Rounded in place (Note [Views rounded in place]): the same 16 bits, and the floats
    // replaced by the values they round to.
    DeviceBuffer<float> gr(x);
    gh.poison();
    kernels::ops::round_float_to_half(gpu(), gh.get(), gr.get(), static_cast<std::int64_t>(x.size()), f);
    EXPECT_EQ(gh.download(), h_ref);
    EXPECT_EQ(gr.download(), back_ref);
  }
}

TEST_F(OpDispatchOnGpu, EmbeddingsAndCrossEntropyRunTheirCudaTwins) {
  const int B = 2, T = 5, C = 16, V = 37, TV = 2, M = 6;
  const std::vector<std::int32_t> ids = {1, 36, 3, 3, 0, 7, 8, 9, 10, 2}, types = {0, 1, 1, 0, 0, 1, 0, 0, 1, 1};
  const auto word = rnd(V * C, 10), pos = rnd(T * C, 11), type = rnd(TV * C, 12), dy = rnd(B * T * C, 13);
  const auto wordd = widen(word), posd = widen(pos), typed = widen(type), dyd = widen(dy);
  std::vector<double> out_ref(B * T * C), dw_ref(V * C, 0.0), dp_ref(T * C, 0.0), dt_ref(TV * C, 0.0);
  kernels::bert_embeddings_forward(out_ref.data(), ids.data(), types.data(), wordd.data(), posd.data(), typed.data(), B,
                                   T, C, V, TV);
  kernels::bert_embeddings_backward<double>(dw_ref.data(), dp_ref.data(), dt_ref.data(), dyd.data(), ids.data(),
                                            types.data(), B, T, C);
  DeviceBuffer<std::int32_t> gids(ids), gtypes(types);
  DeviceBuffer<float> gword(word), gpos(pos), gtype(type), gdy(dy), gout(B * T * C),
      gdw(std::vector<float>(V * C, 0.0f)), gdp(std::vector<float>(T * C, 0.0f)), gdt(std::vector<float>(TV * C, 0.0f));
  gout.poison();
  kernels::ops::bert_embeddings_forward(gpu(), gout.get(), gids.get(), gtypes.get(), gword.get(), gpos.get(),
                                        gtype.get(), B, T, C, V, TV);
  kernels::ops::bert_embeddings_backward(gpu(), gdw.get(), gdp.get(), gdt.get(), gdy.get(), gids.get(), gtypes.get(), B,
                                         T, C);
  EXPECT_TRUE(close(gout.download(), out_ref, 1e-5)) << "embeddings out";
  EXPECT_TRUE(close(gdw.download(), dw_ref, 1e-5)) << "embeddings dword";
  EXPECT_TRUE(close(gdp.download(), dp_ref, 1e-5)) << "embeddings dpos";
  EXPECT_TRUE(close(gdt.download(), dt_ref, 1e-5)) << "embeddings dtype";

  const auto logits = rnd(M * V, 14);
  const std::vector<std::int32_t> targets = {0, 36, 5, 5, 17, 2};
  const auto logitsd = widen(logits);
  std::vector<double> d_ref(M * V);
  std::int64_t correct_ref = -1, correct = -2, eval_correct = -3;
  const double loss_ref = kernels::softmax_cross_entropy_forward_backward<double>(
      d_ref.data(), logitsd.data(), targets.data(), M, V, 0.5, &correct_ref);
  DeviceBuffer<float> glogits(logits), gd(M * V);
  DeviceBuffer<std::int32_t> gtargets(targets);
  gd.poison();
  const double loss = kernels::ops::softmax_cross_entropy_forward_backward(gpu(), gd.get(), glogits.get(),
                                                                           gtargets.get(), M, V, 0.5f, &correct);
  const double eval_loss =
      kernels::ops::softmax_cross_entropy_forward(gpu(), glogits.get(), gtargets.get(), M, V, &eval_correct);
  EXPECT_NEAR(loss, loss_ref, 1e-5 * std::abs(loss_ref));
  EXPECT_NEAR(eval_loss, loss_ref, 1e-5 * std::abs(loss_ref));
  EXPECT_EQ(correct, correct_ref);
  EXPECT_EQ(eval_correct, correct_ref);
  EXPECT_TRUE(close(gd.download(), d_ref, 1e-5)) << "dlogits";
}

TEST_F(OpDispatchOnGpu, AttentionRunsItsCudaTwinAndTheFlashFormNeedsNoHostWorkspace) {
  const int B = 2, T = 17, C = 32, NH = 4, first_head = 1;  // this rank's heads start at 1: the masks' counters
  const kernels::RngKey key{9, 8, 7, 0, 0};
  const std::size_t n = std::size_t(B) * T * C, nt = std::size_t(B) * NH * T * T;
  const auto q = rnd(n, 15), k = rnd(n, 16), v = rnd(n, 17), dy = rnd(n, 18);
  const auto dq0 = rnd(n, 19), dk0 = rnd(n, 20), dv0 = rnd(n, 21);
  std::vector<float> mask(B * T, 1.0f);
  mask[T + 3] = 0.0f;
  const auto qd = widen(q), kd = widen(k), vd = widen(v), maskd = widen(mask), dyd = widen(dy);
  std::vector<double> out_ref(n), probs_ref(nt), scratch_ref(nt), dq_ref = widen(dq0), dk_ref = widen(dk0),
                                                                  dv_ref = widen(dv0);
  kernels::attention_forward(out_ref.data(), probs_ref.data(), qd.data(), kd.data(), vd.data(), maskd.data(), B, T, C,
                             NH, 0.1f, key, 4, first_head);
  kernels::attention_backward(dq_ref.data(), dk_ref.data(), dv_ref.data(), scratch_ref.data(), dyd.data(),
                              probs_ref.data(), qd.data(), kd.data(), vd.data(), B, T, C, NH, 0.1f, key, 4, first_head);
  DeviceBuffer<float> gq(q), gk(k), gv(v), gmask(mask), gdy(dy), gout(n), gprobs(nt), gscratch(nt), gdq(dq0), gdk(dk0),
      gdv(dv0), gflash(n), glse(B * NH * T);
  gout.poison();
  gprobs.poison();
  gflash.poison();
  kernels::ops::attention_forward(gpu(), gout.get(), gprobs.get(), gq.get(), gk.get(), gv.get(), gmask.get(), B, T, C,
                                  NH, 0.1f, key, 4, first_head);
  kernels::ops::attention_backward(gpu(), gdq.get(), gdk.get(), gdv.get(), gscratch.get(), gdy.get(), gprobs.get(),
                                   gq.get(), gk.get(), gv.get(), B, T, C, NH, 0.1f, key, 4, first_head);
  EXPECT_TRUE(close(gout.download(), out_ref, 1e-5)) << "attention out";
  EXPECT_TRUE(close(gprobs.download(), probs_ref, 1e-5)) << "attention probs";
  EXPECT_TRUE(close(gdq.download(), dq_ref, 1e-5)) << "attention dq";
  EXPECT_TRUE(close(gdk.download(), dk_ref, 1e-5)) << "attention dk";
  EXPECT_TRUE(close(gdv.download(), dv_ref, 1e-5)) << "attention dv";
  ASSERT_EQ(kernels::ops::flash_attention_workspace_elements(gpu(), T, C, NH), 0u);
  kernels::ops::flash_attention_forward(gpu(), gflash.get(), glse.get(), gq.get(), gk.get(), gv.get(), gmask.get(), B,
                                        T, C, NH, 0.1f, key, 4, nullptr, first_head);
  EXPECT_TRUE(close(gflash.download(), out_ref, 1e-5)) << "flash attention out";
}

}  // namespace
}  // namespace memtrain::gpu_testing
