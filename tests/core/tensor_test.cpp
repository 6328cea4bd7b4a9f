#include "runtime/core/tensor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>
#include <memory>
#include <stdexcept>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::core {
namespace {

using memtrain::testing::TestAllocator;

TEST(DType, SizesMatchTheCTypesTheyStandFor) {
  EXPECT_EQ(dtype_size(DType::f32), sizeof(float));
  EXPECT_EQ(dtype_size(DType::i32), sizeof(std::int32_t));
  EXPECT_EQ(dtype_size(DType::f16), 2u);   // IEEE 754 binary16
  EXPECT_EQ(dtype_size(DType::bf16), 2u);  // bfloat16: 1 sign, 8 exponent, 7 mantissa bits
}

TEST(DType, NamesRoundTripAndUnknownNameIsAConfigError) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32}) {
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
  EXPECT_THROW(dtype_from_name("F33"), ConfigError);
}

TEST(Tags, AreDistinctAndStableAcrossCalls) {
  const Tags& t = tags();
  const memory::TagId ids[] = {t.parameter, t.gradient, t.optimizer_state, t.activation, t.temporary, t.communication};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_NE(ids[i], memory::kUntagged);
    for (std::size_t j = i + 1; j < 6; ++j) EXPECT_NE(ids[i], ids[j]);
  }
  EXPECT_EQ(&tags(), &t);
}

TEST(Context, RejectsANullAllocator) { EXPECT_THROW(Context(nullptr, "cpu"), ConfigError); }

TEST(Tensor, AsksTheAllocatorForNumelTimesElementSizeUnderItsTagAndStream) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  ctx.set_stream(3);
  Tensor t = Tensor::empty(ctx, {2, 3, 5}, DType::f32, tags().activation);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.nbytes(), 120u);
  EXPECT_EQ(alloc->live_bytes(tags().activation), 120);
  EXPECT_EQ(t.block().stream, 3u);
  EXPECT_EQ(t.block().tag, tags().activation);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(-1), 5);
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_THROW(t.dim(3), RuntimeError);
  EXPECT_THROW(t.dim(-4), RuntimeError);
}

TEST(Tensor, StorageReturnsToTheAllocatorWhenTheLastHandleDrops) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  {
    Tensor a = Tensor::empty(ctx, {64}, DType::f32, tags().temporary);
    Tensor b = a;  // shares the storage
    EXPECT_EQ(b.data<float>(), a.data<float>());
    a.reset();
    EXPECT_FALSE(a.defined());
    EXPECT_EQ(alloc->live_bytes(), 256);  // b still holds it
    EXPECT_EQ(alloc->num_frees(), 0);
  }
  EXPECT_EQ(alloc->live_bytes(), 0);
  EXPECT_EQ(alloc->num_frees(), 1);
}

// An allocator whose deallocate throws, as the caching allocator's does when the host has no
// memory left for its bookkeeping (std::bad_alloc).
class RefusingToFree final : public memory::Allocator {
 public:
  memory::Block allocate(std::size_t bytes, memory::StreamId stream, memory::TagId tag) override {
    return inner_.allocate(bytes, stream, tag);
  }
  void deallocate(const memory::Block& b) override {
    ++refused_;
    held_.push_back(b);
    throw std::bad_alloc();
  }
  void record_stream(const memory::Block&, memory::StreamId) override {}
  memory::MemoryStats stats() const override { return inner_.stats(); }
  void reset_peak_stats() override {}
  std::string memory_summary() const override { return "RefusingToFree"; }
  void empty_cache() override {}
  ~RefusingToFree() override {
    for (const auto& b : held_) inner_.deallocate(b);
  }
  int refused() const { return refused_; }

 private:
  TestAllocator inner_;
  std::vector<memory::Block> held_;
  int refused_ = 0;
};

// Note [Returning a block never throws out of a destructor]: a tensor dropped while its
// allocator cannot take the block back does not end the process in std::terminate (this test
// binary would abort); the block is written off with one line on stderr.
TEST(Tensor, AnAllocatorThatCannotTakeTheBlockBackDoesNotTerminate) {
  auto alloc = std::make_shared<RefusingToFree>();
  Context ctx(alloc);
  ::testing::internal::CaptureStderr();
  {
    Tensor a = Tensor::empty(ctx, {64}, DType::f32, tags().temporary);
    Tensor b = Tensor::empty(ctx, {32}, DType::f32, tags().temporary);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(alloc->refused(), 2);
  // One process-wide line: present unless an earlier test in this binary already printed it.
  EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 1) << err;
  if (!err.empty()) {
    EXPECT_NE(err.find("could not be returned to the allocator (std::bad_alloc)"), std::string::npos) << err;
  }
}

TEST(Tensor, StorageOutlivesTheContextThatMadeIt) {
  auto alloc = std::make_shared<TestAllocator>();
  Tensor t;
  {
    Context ctx(alloc);
    t = Tensor::zeros(ctx, {4}, DType::i32, tags().parameter);
  }
  EXPECT_EQ(t.data<std::int32_t>()[3], 0);
  t.reset();
  EXPECT_EQ(alloc->live_bytes(), 0);
}

TEST(Tensor, ZerosClearsMemoryThatWasDirty) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  // The allocator gives back the same freshly-new'd memory rarely; make it dirty explicitly.
  Tensor t = Tensor::empty(ctx, {1000}, DType::f32, tags().gradient);
  std::memset(t.data<float>(), 0xFF, t.nbytes());
  t.zero_();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(t.data<float>()[i], 0.0f) << i;
  Tensor z = Tensor::zeros(ctx, {7, 9}, DType::f32, tags().gradient);
  for (int i = 0; i < 63; ++i) ASSERT_EQ(z.data<float>()[i], 0.0f) << i;
}

TEST(Tensor, DataWithTheWrongElementTypeThrows) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  Tensor t = Tensor::empty(ctx, {4}, DType::f32, tags().temporary);
  EXPECT_THROW(t.data<std::int32_t>(), RuntimeError);
  Tensor h = Tensor::empty(ctx, {4}, DType::bf16, tags().temporary);
  EXPECT_EQ(h.nbytes(), 8u);
  EXPECT_NO_THROW(h.data<std::uint16_t>());
  EXPECT_THROW(h.data<float>(), RuntimeError);
  Tensor undefined;
  EXPECT_THROW(undefined.data<float>(), RuntimeError);
}

TEST(Tensor, NegativeDimensionIsRejectedWithoutAllocating) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  EXPECT_THROW(Tensor::empty(ctx, {2, -1}, DType::f32, tags().temporary), RuntimeError);
  EXPECT_EQ(alloc->num_allocs(), 0);
}

TEST(Tensor, EmptyShapeIsAScalarAndZeroSizedDimensionHasNoBytes) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  EXPECT_EQ(Tensor::empty(ctx, {}, DType::f32, tags().temporary).numel(), 1);
  Tensor z = Tensor::zeros(ctx, {0, 5}, DType::f32, tags().temporary);
  EXPECT_EQ(z.nbytes(), 0u);
}

// In a dry run the upstream hands out addresses only; zeros() must not write to them
// (the fake addresses of this allocator would fault).
TEST(Tensor, DryRunAllocatesTheSameBytesButNeverTouchesThem) {
  auto alloc = std::make_shared<TestAllocator>(/*backs_memory=*/false);
  Context ctx(alloc);
  ctx.set_dry_run(true);
  Tensor t = Tensor::zeros(ctx, {1024, 1024}, DType::f32, tags().activation);
  EXPECT_TRUE(t.dry_run());
  EXPECT_EQ(alloc->live_bytes(tags().activation), 4 << 20);
  t.zero_();
}

// Note [A tensor's bytes are touched by its device]: a CPU tensor copies from and to host memory
// byte for byte; a tensor of a GPU context (here one without its CUDA state, over host memory so
// the test can look) sends its zeroing and copies to that device, which refuses by name, and its
// views inherit its device.
TEST(Tensor, CopiesAndZeroingGoToTheTensorsDevice) {
  auto alloc = std::make_shared<TestAllocator>();
  Context cpu(alloc);
  Tensor t = Tensor::empty(cpu, {5}, DType::f32, tags().activation);
  EXPECT_EQ(t.device(), kernels::Device::cpu);
  const float in[5] = {1.5f, -2.0f, 0.25f, 8.0f, -0.0f};
  t.copy_from_host(in);
  float out[5] = {};
  t.copy_to_host(out);
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  EXPECT_EQ(t.data<float>()[3], 8.0f);
  EXPECT_THROW(Tensor().copy_to_host(out), RuntimeError);
  EXPECT_THROW(Tensor::unbound({5}, DType::f32).copy_from_host(in), RuntimeError);

  Context gpu(alloc, "cuda:0");
  gpu.set_op_context(kernels::OpContext{kernels::Device::cuda, nullptr});
  Tensor g = Tensor::empty(gpu, {5}, DType::f32, tags().activation);
  EXPECT_EQ(g.device(), kernels::Device::cuda);
  g.data<float>()[0] = 3.0f;
  EXPECT_THROW(g.zero_(), std::runtime_error);
  EXPECT_THROW(g.copy_from_host(in), std::runtime_error);
  EXPECT_THROW(g.copy_to_host(out), std::runtime_error);
  EXPECT_EQ(g.data<float>()[0], 3.0f);
  Tensor view = Tensor::unbound({2}, DType::f32);
  view.bind(g, 1);
  EXPECT_EQ(view.device(), kernels::Device::cuda);
  // A dry run touches nothing, whatever the device.
  gpu.set_dry_run(true);
  Tensor d = Tensor::zeros(gpu, {5}, DType::f32, tags().activation);
  d.copy_from_host(in);
  d.copy_to_host(out);
}

TEST(Tensor, ViewsOfOneBufferShareItsAllocationId) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  Tensor a = Tensor::zeros(ctx, {8}, DType::f32, tags().gradient);
  Tensor b = Tensor::zeros(ctx, {8}, DType::f32, tags().gradient);
  Tensor v = Tensor::unbound({2}, DType::f32), w = Tensor::unbound({1}, DType::f32);
  EXPECT_EQ(v.allocation_id(), nullptr);  // unbound
  v.bind(a, 3);
  w.bind(v, 1);  // a view of a view
  EXPECT_NE(a.allocation_id(), nullptr);
  EXPECT_EQ(v.allocation_id(), a.allocation_id());
  EXPECT_EQ(w.allocation_id(), a.allocation_id());
  EXPECT_NE(b.allocation_id(), a.allocation_id());
  EXPECT_EQ(Tensor().allocation_id(), nullptr);
}

TEST(Tensor, AnUnboundTensorBindsEveryCopyOfItsHandleToARangeOfABuffer) {
  auto alloc = std::make_shared<TestAllocator>();
  Context ctx(alloc);
  Tensor a = Tensor::unbound({2, 3}, DType::f32);
  Tensor copy = a;  // as a layer keeps it
  EXPECT_TRUE(a.defined());
  EXPECT_FALSE(a.bound());
  EXPECT_THROW(a.data<float>(), RuntimeError);
  EXPECT_EQ(alloc->live_bytes(), 0);
  {
    Tensor buffer = Tensor::zeros(ctx, {10}, DType::f32, tags().gradient);
    EXPECT_THROW(a.bind(buffer, 5), RuntimeError);  // [5, 11) does not fit in 10
    EXPECT_THROW(a.bind(buffer, -1), RuntimeError);
    Tensor wrong = Tensor::unbound({6}, DType::bf16);
    EXPECT_THROW(wrong.bind(buffer, 0), RuntimeError);  // dtype
    a.bind(buffer, 4);
    EXPECT_THROW(a.bind(buffer, 0), RuntimeError);  // bound once
    EXPECT_TRUE(copy.bound());
    EXPECT_EQ(copy.data<float>(), buffer.data<float>() + 4);
    EXPECT_EQ(copy.block().size, 24u);
    EXPECT_EQ(copy.block().tag, tags().gradient);
    // A view of a view lands at the sum of the offsets.
    Tensor inner = Tensor::unbound({2}, DType::f32);
    inner.bind(a, 3);
    EXPECT_EQ(inner.data<float>(), buffer.data<float>() + 7);
    copy.zero_();
    buffer.data<float>()[3] = 1.0f;
    a.data<float>()[0] = 2.0f;
    EXPECT_EQ(buffer.data<float>()[4], 2.0f);
  }
  // The view keeps the buffer alive, and the buffer is freed once, with the last view.
  EXPECT_EQ(alloc->live_bytes(), 40);
  EXPECT_EQ(a.data<float>()[0], 2.0f);
  a.reset();
  copy.reset();
  EXPECT_EQ(alloc->num_frees(), 1);
  EXPECT_EQ(alloc->live_bytes(), 0);
}

}  // namespace
}  // namespace memtrain::core
