// Kernels never allocate: callers pass outputs and workspaces (design.md). This test counts
// every heap allocation of the process (malloc and friends, which operator new, Eigen and
// OpenBLAS all go through) while warmed-up kernels run, on the calling and the OpenMP threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/flash_attention.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/half_convert.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/linear_bf16.hpp"
#include "kernels/cpu/matmul_bf16.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/softmax.hpp"
#include "kernels/cpu/threads.hpp"

#if !defined(__SANITIZE_ADDRESS__)
namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::int64_t> g_allocations{0};
std::atomic<std::size_t> g_largest{0};  // bytes of the largest allocation counted
void count(std::size_t bytes = 0) {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  g_allocations.fetch_add(1);
  std::size_t seen = g_largest.load();
  while (bytes > seen && !g_largest.compare_exchange_weak(seen, bytes)) {}
}
}  // namespace

// Interpose glibc's allocation entry points (the executable's definitions win over libc's),
// forwarding to glibc's own implementations.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
  count(n);
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count(n * size);
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count(n);
  return __libc_realloc(p, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  count(n);
  *out = __libc_memalign(alignment, n);
  return *out != nullptr ? 0 : 12;  // ENOMEM
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  count(n);
  return __libc_memalign(alignment, n);
}
void* memalign(std::size_t alignment, std::size_t n) {
  count(n);
  return __libc_memalign(alignment, n);
}
}

namespace memtrain::kernels {
namespace {

TEST(Kernels, NeverAllocateOnceWarm) {
  const int B = 2, T = 64, C = 128, NH = 4, F = 512, V = 1000,
            N = B * T;  // large enough to split GEMMs
  std::vector<float> x(N * C, 0.5f), y(N * F), w(F * C, 0.01f), b(F, 0.1f), dx(N * C), dw(F * C), db(F), q(N * C, 0.1f),
      probs(B * NH * T * T), scratch(B * NH * T * T), o(N * C), mean(N), rstd(N), gamma(C, 1.0f), beta(C, 0.0f),
      logits(N * V, 0.2f), word(V * C), pos(T * C), type(2 * C), m(F * C), v(F * C), mask(B * T, 1.0f);
  std::vector<std::int32_t> ids(N, 3), targets(N, 7);
  std::vector<float> big(1 << 19, 0.25f);  // large enough for the conversions' thread team
  std::vector<std::uint16_t> half(big.size());
  const int saved = num_threads();
  set_num_threads(2);  // the flash workspace covers the threads in use when it is sized
  std::vector<float> lse(B * NH * T), flash_ws(flash_attention_workspace_elements(T, C, NH));
  const RngKey key{.seed = 1};
  auto run_all = [&] {
    linear_forward(y.data(), x.data(), w.data(), b.data(), N, C, F);
    linear_backward(dx.data(), dw.data(), db.data(), y.data(), x.data(), w.data(), N, C, F);
    attention_forward(o.data(), probs.data(), q.data(), q.data(), q.data(), mask.data(), B, T, C, NH, 0.1f, key, 0);
    attention_backward(dx.data(), dx.data(), dx.data(), scratch.data(), o.data(), probs.data(), q.data(), q.data(),
                       q.data(), B, T, C, NH, 0.1f, key, 0);
    attention_probs(probs.data(), q.data(), q.data(), mask.data(), B, T, C, NH);
    flash_attention_forward(o.data(), lse.data(), q.data(), q.data(), q.data(), mask.data(), B, T, C, NH, 0.1f, key, 0,
                            flash_ws.data());
    flash_attention_backward(dx.data(), dx.data(), dx.data(), o.data(), o.data(), lse.data(), q.data(), q.data(),
                             q.data(), mask.data(), B, T, C, NH, 0.1f, key, 0, flash_ws.data());
    bias_gelu_forward(y.data(), y.data(), b.data(), N, F);
    bias_gelu_backward(y.data(), db.data(), y.data(), y.data(), b.data(), N, F);
    layernorm_forward(o.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), N, C, 1e-12f);
    layernorm_backward(dx.data(), gamma.data(), beta.data(), o.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
                       N, C);
    masked_softmax_forward(probs.data(), probs.data(), mask.data(), B * NH * T, T, NH * T, 1.0f);
    masked_softmax_backward(probs.data(), scratch.data(), probs.data(), B * NH * T, T, 1.0f);
    dropout_forward(o.data(), o.data(), B, long{T} * C, 0.1f, key, 0);
    dropout_backward(o.data(), o.data(), B, long{T} * C, 0.1f, key, 0);
    softmax_cross_entropy_forward_backward(logits.data(), logits.data(), targets.data(), N, V, 0.01f, nullptr);
    bert_embeddings_forward(o.data(), ids.data(), nullptr, word.data(), pos.data(), type.data(), B, T, C, V, 2);
    bert_embeddings_backward(word.data(), pos.data(), type.data(), o.data(), ids.data(), nullptr, B, T, C);
    adamw_update(w.data(), dw.data(), m.data(), v.data(), F * C, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
    scale_inplace(dw.data(), F * C, 0.5f);
    (void)sum_of_squares(dw.data(), F * C);
    for (const HalfFormat f : {HalfFormat::f16, HalfFormat::bf16}) {
      convert_float_to_half(half.data(), big.data(), std::ssize(big), f);
      convert_half_to_float(big.data(), half.data(), std::ssize(big), f);
      (void)all_finite(half.data(), std::ssize(half), f);
    }
    (void)all_finite(big.data(), std::ssize(big));
  };
  run_all();  // warm up: thread pools and OpenBLAS buffers are created once
  g_allocations = 0;
  g_counting = true;
  run_all();
  g_counting = false;
  set_num_threads(saved);
  EXPECT_EQ(g_allocations.load(), 0);
}

// The bf16 GEMMs go through oneDNN, whose execute call builds its argument map on the heap each
// time (a few small nodes), outside memtrain's allocator as OpenBLAS's buffers are: Note [bf16
// GEMMs through oneDNN]. What must not happen is an operand-sized buffer per call (a scratchpad
// or a packed copy of the weights made again each time): once warm, every allocation of a
// forward and backward stays under 4 KiB, against operands of 32 KiB and more.
TEST(Kernels, Bf16GemmsAllocateOnlyBookkeepingOnceWarm) {
  const int N = 128, C = 128, OC = 512;
  std::vector<std::uint16_t> x(N * C, 0x3f00), w(OC * C, 0x3c00), dy(N * OC, 0x3c00), dw(OC * C);
  std::vector<float> y(N * OC), dx(N * C), db(OC), b(OC, 0.5f);
  auto run = [&] {
    try {
      linear_forward_bf16(y.data(), x.data(), w.data(), b.data(), N, C, OC);
      linear_backward_bf16(dx.data(), dw.data(), true, true, db.data(), dy.data(), x.data(), w.data(), N, C, OC);
      return true;
    } catch (const std::runtime_error&) {
      return false;  // oneDNN runs no bf16 matmul on this CPU (AVX2 only)
    }
  };
  if (!run()) GTEST_SKIP() << "oneDNN runs no bf16 matmul here (" << bf16_gemm_description() << ")";
  g_allocations = 0;
  g_largest = 0;
  g_counting = true;
  run();
  g_counting = false;
  EXPECT_LT(g_largest.load(), std::size_t{4096}) << g_allocations.load() << " allocations";
}

// The counter itself works (else the tests above could not fail).
TEST(Kernels, AllocationCounterSeesAllocations) {
  g_allocations = 0;
  g_counting = true;
  auto* p = new std::vector<int>(100);
  g_counting = false;
  delete p;
  EXPECT_GE(g_allocations.load(), 2);
  g_largest = 0;
  g_counting = true;
  void* big = std::malloc(1 << 20);
  g_counting = false;
  std::free(big);
  EXPECT_EQ(g_largest.load(), std::size_t{1} << 20);
}

}  // namespace
}  // namespace memtrain::kernels
#endif
