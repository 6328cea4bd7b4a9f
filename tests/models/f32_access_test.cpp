// Float views of 16-bit tensors (models/f32_access.hpp): values against the IEEE 754 / bfloat16
// bit patterns, round to nearest even on write-back, and the fp32 path left untouched.
#include "models/f32_access.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "tests/core/test_allocator.hpp"

namespace memtrain::models {
namespace {

using core::DType;
using core::Tensor;

struct Fixture {
  core::Context ctx{std::make_shared<memtrain::testing::TestAllocator>()};
  Tensor make(DType d, std::int64_t n) { return Tensor::zeros(ctx, {n}, d, core::tags().temporary); }
};

TEST(F32View, AnF32TensorIsViewedInPlaceWithoutWorkspace) {
  Fixture f;
  auto t = f.make(DType::f32, 8);
  {
    auto w = write_f32(f.ctx, t);
    EXPECT_EQ(w.get(), t.data<float>());
    EXPECT_EQ(read_f32(f.ctx, t).get(), t.data<float>());
  }
  EXPECT_EQ(f.ctx.workspace().reserved_bytes(), 0u);
}

// Bit patterns from the format definitions: f16 0x3C00 = 1, 0xC000 = -2, 0x0001 = 2^-24 (the
// smallest subnormal), 0x7BFF = 65504; bf16 0x3F80 = 1, 0x4049 = 3.140625 (top half of the
// float 0x40490000), 0xC2F7 = -123.5.
TEST(F32View, ReadConvertsSixteenBitPatternsExactly) {
  Fixture f;
  auto h = f.make(DType::f16, 4);
  const std::uint16_t hb[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
  std::copy(hb, hb + 4, h.data<std::uint16_t>());
  {
    auto r = read_f32(f.ctx, h);
    EXPECT_EQ(r.get()[0], 1.0f);
    EXPECT_EQ(r.get()[1], -2.0f);
    EXPECT_EQ(r.get()[2], 0x1p-24f);
    EXPECT_EQ(r.get()[3], 65504.0f);
  }
  auto b = f.make(DType::bf16, 3);
  const std::uint16_t bb[3] = {0x3F80, 0x4049, 0xC2F7};
  std::copy(bb, bb + 3, b.data<std::uint16_t>());
  auto r = read_f32(f.ctx, b);
  EXPECT_EQ(r.get()[0], 1.0f);
  EXPECT_EQ(r.get()[1], 3.140625f);
  EXPECT_EQ(r.get()[2], -123.5f);
}

// Ties round to the even neighbour (IEEE 754 roundTiesToEven): with f16's ulp 2^-10 at 1,
// 1 + 2^-11 lies halfway between 0x3C00 (even) and 0x3C01 -> 0x3C00, and 1 + 3 * 2^-11
// halfway between 0x3C01 and 0x3C02 (even) -> 0x3C02. bf16 likewise with ulp 2^-7.
TEST(F32View, WriteRoundsToNearestEvenWhenCommitted) {
  Fixture f;
  auto h = f.make(DType::f16, 3);
  {
    auto w = write_f32(f.ctx, h);
    w.get()[0] = 1.0f + 0x1p-11f;
    w.get()[1] = 1.0f + 3 * 0x1p-11f;
    w.get()[2] = 70000.0f;                      // beyond 65520: overflows to inf
    EXPECT_EQ(h.data<std::uint16_t>()[0], 0u);  // nothing written before commit
  }
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3C00);
  EXPECT_EQ(h.data<std::uint16_t>()[1], 0x3C02);
  EXPECT_EQ(h.data<std::uint16_t>()[2], 0x7C00);
  auto b = f.make(DType::bf16, 2);
  auto w = write_f32(f.ctx, b);
  w.get()[0] = 1.0f + 0x1p-8f;
  w.get()[1] = 1.0f + 3 * 0x1p-8f;
  w.commit();
  EXPECT_EQ(w.get(), nullptr);
  EXPECT_EQ(b.data<std::uint16_t>()[0], 0x3F80);
  EXPECT_EQ(b.data<std::uint16_t>()[1], 0x3F82);
}

// Note [Views rounded in place]: the same ties as above, rounded without a commit. The tensor
// holds the rounded bits at once, the floats equal the values they round to (what a fresh read
// view would convert in), and the view, now a read view, writes nothing more back.
TEST(F32View, RoundingInPlaceStoresTheBitsAndKeepsTheRoundedFloats) {
  Fixture f;
  auto h = f.make(DType::f16, 3);
  {
    auto w = write_f32(f.ctx, h);
    w.get()[0] = 1.0f + 0x1p-11f;      // -> 0x3C00 = 1
    w.get()[1] = 1.0f + 3 * 0x1p-11f;  // -> 0x3C02 = 1 + 2^-9
    w.get()[2] = 70000.0f;             // -> 0x7C00 = inf
    w.round_in_place();
    EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3C00);
    EXPECT_EQ(h.data<std::uint16_t>()[1], 0x3C02);
    EXPECT_EQ(h.data<std::uint16_t>()[2], 0x7C00);
    EXPECT_EQ(w.get()[0], 1.0f);
    EXPECT_EQ(w.get()[1], 1.0f + 0x1p-9f);
    EXPECT_EQ(w.get()[2], INFINITY);
    const auto fresh = read_f32(f.ctx, h);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(w.get()[i], fresh.get()[i]) << i;
    w.get()[0] = 5.0f;  // a read view now: never written back
  }
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0x3C00);
  EXPECT_EQ(f.ctx.workspace().slots_in_use(), 0);
}

// round_in_place(write): the floats are rounded and stored, and what the caller writes over
// them afterwards is rounded again on commit (the loss's gradient over the logits).
TEST(F32View, AViewRoundedInPlaceForWritingRoundsAgainOnCommit) {
  Fixture f;
  auto b = f.make(DType::bf16, 2);
  auto w = write_f32(f.ctx, b);
  w.get()[0] = 1.0f + 0x1p-8f;      // -> 0x3F80 = 1
  w.get()[1] = 1.0f + 3 * 0x1p-8f;  // -> 0x3F82 = 1 + 2^-6
  w.round_in_place(F32Access::write);
  EXPECT_EQ(b.data<std::uint16_t>()[0], 0x3F80);
  EXPECT_EQ(b.data<std::uint16_t>()[1], 0x3F82);
  EXPECT_EQ(w.get()[1], 1.0f + 0x1p-6f);
  w.get()[0] = -2.0f;  // bf16 0xC000
  w.commit();
  EXPECT_EQ(b.data<std::uint16_t>()[0], 0xC000);
  EXPECT_EQ(b.data<std::uint16_t>()[1], 0x3F82);
  auto r = update_f32(f.ctx, b);
  EXPECT_THROW(r.round_in_place(F32Access::zeroed), std::invalid_argument);
}

// The backward pass's case: gradients accumulated from a zeroed view (Note [Zeroed views]),
// then rounded in place. f16 of 0.1 + 0.2: the float sum 0.3 (0x3E99999A) rounds to 0x34CD,
// which is 0.300048828125 (1229 * 2^-12).
TEST(F32View, AZeroedViewRoundedInPlaceHoldsTheStoredSum) {
  Fixture f;
  auto h = f.make(DType::f16, 2);
  h.data<std::uint16_t>()[1] = 0x7E00;  // NaN, which the zeroed view never reads
  auto z = zeroed_f32(f.ctx, h);
  for (int i = 0; i < 2; ++i) {
    z.get()[i] += 0.1f;
    z.get()[i] += 0.2f;
  }
  z.round_in_place();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(h.data<std::uint16_t>()[i], 0x34CD) << i;
    EXPECT_EQ(z.get()[i], 1229.0f * 0x1p-12f) << i;
  }
}

// A row view's other rows are unspecified, so it cannot hand on whole floats: refused, and
// nothing written. In a dry run there is nothing to round: no slot, no conversion.
TEST(F32View, RowViewsRefuseAndDryRunsSkipRoundingInPlace) {
  Fixture f;
  auto t = f.make(DType::bf16, 4);
  const std::vector<std::int32_t> rows = {1};
  F32View r(f.ctx, t, F32Access::read_write, rows);
  EXPECT_THROW(r.round_in_place(), RuntimeError);
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>(/*backs_memory=*/false));
  ctx.set_dry_run(true);
  auto d = Tensor::empty(ctx, {1024}, DType::f16, core::tags().activation);
  auto w = write_f32(ctx, d);
  w.round_in_place();
  EXPECT_EQ(w.get(), nullptr);
  EXPECT_EQ(ctx.workspace().reserved_bytes(), 0u);
}

// An f32 tensor's view is its own memory: rounding it in place changes nothing.
TEST(F32View, RoundingAnF32ViewInPlaceLeavesItsValues) {
  Fixture f;
  auto t = f.make(DType::f32, 1);
  auto w = write_f32(f.ctx, t);
  w.get()[0] = 1.0f + 0x1p-20f;
  w.round_in_place();
  EXPECT_EQ(t.data<float>()[0], 1.0f + 0x1p-20f);
}

TEST(F32View, UpdateAccumulatesIntoTheStoredValues) {
  Fixture f;
  auto b = f.make(DType::bf16, 2);
  b.data<std::uint16_t>()[0] = 0x3F80;  // 1
  b.data<std::uint16_t>()[1] = 0xC000;  // -2
  {
    auto u = update_f32(f.ctx, b);
    u.get()[0] += 0.5f;
    u.get()[1] += 0.25f;
  }
  EXPECT_EQ(b.data<std::uint16_t>()[0], 0x3FC0);  // 1.5
  EXPECT_EQ(b.data<std::uint16_t>()[1], 0xBFE0);  // -1.75
}

TEST(F32View, ScratchAndReadViewsNeverWriteBackAndReturnTheirSlots) {
  Fixture f;
  auto h = f.make(DType::f16, 4);
  {
    auto s = scratch_f32(f.ctx, h);
    auto r = read_f32(f.ctx, h);
    s.get()[0] = 5.0f;
    const_cast<float*>(r.get())[1] = 7.0f;
    EXPECT_EQ(f.ctx.workspace().slots_in_use(), 2);
  }
  EXPECT_EQ(f.ctx.workspace().slots_in_use(), 0);
  EXPECT_EQ(h.data<std::uint16_t>()[0], 0u);
  EXPECT_EQ(h.data<std::uint16_t>()[1], 0u);
}

// Note [Row views of embedding tables]: a row view must leave the tensor bitwise as a whole
// view does when the kernel touches only the listed rows, for both 16-bit formats. The
// reference is a whole update view of a copy with the same additions (repeats and indices out
// of range in the list, as a batch's ids have).
TEST(F32View, ARowViewGivesTheWholeViewsBitsOnTheListedRows) {
  for (const DType d : {DType::bf16, DType::f16}) {
    Fixture f;
    auto rowwise = Tensor::zeros(f.ctx, {6, 3}, d, core::tags().temporary);  // [6, 3]
    auto whole = Tensor::zeros(f.ctx, {6, 3}, d, core::tags().temporary);    // [6, 3]
    for (int i = 0; i < 18; ++i) {
      // 16-bit values near 1 (bf16 0x3F80 + i, f16 0x3C00 + 3 i): additions below round.
      const auto bits = static_cast<std::uint16_t>(d == DType::bf16 ? 0x3F80 + i : 0x3C00 + 3 * i);
      rowwise.data<std::uint16_t>()[i] = whole.data<std::uint16_t>()[i] = bits;
    }
    const std::vector<std::int32_t> rows = {4, 1, 4, 9, -1};
    {
      F32View r(f.ctx, rowwise, F32Access::read_write, rows);
      auto w = update_f32(f.ctx, whole);
      for (const int row : {4, 1, 4}) {
        for (int c = 0; c < 3; ++c) {
          EXPECT_EQ(r.get()[row * 3 + c], w.get()[row * 3 + c]) << "row " << row;
          r.get()[row * 3 + c] += 0.0123f * static_cast<float>(c + 1);
          w.get()[row * 3 + c] += 0.0123f * static_cast<float>(c + 1);
        }
      }
    }
    for (int i = 0; i < 18; ++i) {
      EXPECT_EQ(rowwise.data<std::uint16_t>()[i], whole.data<std::uint16_t>()[i]) << dtype_name(d) << " element " << i;
    }
    EXPECT_NE(rowwise.data<std::uint16_t>()[4 * 3], d == DType::bf16 ? 0x3F80 + 12 : 0x3C00 + 36);  // rounded
    EXPECT_EQ(f.ctx.workspace().slots_in_use(), 0);
  }
  // An f32 tensor: its own memory, as a whole view.
  Fixture f;
  auto t = f.make(DType::f32, 8);
  const std::vector<std::int32_t> rows = {0};
  EXPECT_EQ(F32View(f.ctx, t, F32Access::read, rows).get(), t.data<float>());
}

// Note [Zeroed views]: whatever the tensor held, the view starts at zero (the f32 tensor's own
// memory is zeroed, as Tensor::zeros would), and a 16-bit one gets the rounded sum on commit.
TEST(F32View, AZeroedViewStartsAtZeroWhateverTheTensorHeld) {
  Fixture f;
  auto b = f.make(DType::bf16, 3);
  auto x = f.make(DType::f32, 3);
  for (int i = 0; i < 3; ++i) {
    b.data<std::uint16_t>()[i] = 0x7FC0;  // NaN
    x.data<float>()[i] = 42.0f;
  }
  {
    auto zb = zeroed_f32(f.ctx, b);
    auto zx = zeroed_f32(f.ctx, x);
    EXPECT_EQ(zx.get(), x.data<float>());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(zb.get()[i], 0.0f);
      EXPECT_EQ(zx.get()[i], 0.0f);
      zb.get()[i] += 1.5f;
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.data<std::uint16_t>()[i], 0x3FC0);  // 1.5
  const std::vector<std::int32_t> rows = {0};
  EXPECT_THROW(F32View(f.ctx, b, F32Access::zeroed, rows), RuntimeError);
  EXPECT_EQ(b.data<std::uint16_t>()[0], 0x3FC0);  // the refused view wrote nothing
  EXPECT_EQ(f.ctx.workspace().slots_in_use(), 0);
}

TEST(F32View, DryRunConvertsNothing) {
  core::Context ctx(std::make_shared<memtrain::testing::TestAllocator>(/*backs_memory=*/false));
  ctx.set_dry_run(true);
  auto h = Tensor::empty(ctx, {1024}, DType::bf16, core::tags().activation);
  {
    auto w = write_f32(ctx, h);
    EXPECT_EQ(w.get(), nullptr);
  }
  EXPECT_EQ(ctx.workspace().reserved_bytes(), 0u);
}

TEST(F32View, UndefinedTensorGivesNullAndIntegerTensorIsAnError) {
  Fixture f;
  EXPECT_EQ(read_f32(f.ctx, Tensor()).get(), nullptr);
  auto i = f.make(DType::i32, 2);
  EXPECT_THROW(read_f32(f.ctx, i), RuntimeError);
  EXPECT_THROW(half_format(DType::f32), RuntimeError);
}

TEST(F32View, StoreAndLoadRoundTripThroughSixteenBits) {
  Fixture f;
  auto b = f.make(DType::bf16, 2);
  const float v[2] = {1.0f + 0x1p-8f, -3.0f};
  store_f32(b, v, 2);
  float back[2];
  load_f32(back, b);
  EXPECT_EQ(back[0], 1.0f);  // tie to even
  EXPECT_EQ(back[1], -3.0f);
  EXPECT_THROW(store_f32(b, v, 1), RuntimeError);
}

// Note [Float views convert on the tensor's device]: on a context whose ops run on a GPU, a
// float view of a 16-bit tensor converts with that device's kernels, a row view converts the
// whole tensor there, and zeroing an f32 tensor goes to its device. Here the GPU op context has
// no CUDA state (there is no GPU on these machines), so each refuses by the op's name before
// anything is read or written, and returns its workspace slot; an f32 tensor's view is still its
// own pointer. tests/gpu/train_step_test.cpp runs the views on a real GPU.
TEST(F32View, AGpuContextConvertsAndZeroesOnItsDevice) {
  Fixture f;
  auto half = f.make(DType::bf16, 8);
  half.data<std::uint16_t>()[0] = 0x3F80;  // 1.0
  core::Context gpu(f.ctx.allocator_ptr(), "cuda:0");
  gpu.set_op_context(kernels::OpContext{kernels::Device::cuda, nullptr});
  auto refusal = [](auto&& make) -> std::string {
    try {
      make();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(no exception)";
  };
  for (F32Access access : {F32Access::read, F32Access::read_write}) {
    const std::string what = refusal([&] { F32View v(gpu, half, access); });
    EXPECT_NE(what.find("convert_half_to_float"), std::string::npos) << what;
  }
  const std::int32_t rows[] = {0};
  EXPECT_NE(refusal([&] { F32View v(gpu, half, F32Access::read, rows); }).find("convert_half_to_float"),
            std::string::npos);
  EXPECT_NE(refusal([&] { F32View v(gpu, half, F32Access::zeroed); }).find("fill_zero"), std::string::npos);
  EXPECT_EQ(half.data<std::uint16_t>()[0], 0x3F80);  // untouched
  EXPECT_EQ(gpu.workspace().slots_in_use(), 0);

  // The allocator is host memory, so the test can look at the bytes the refusal left alone.
  auto single = Tensor::empty(gpu, {8}, DType::f32, core::tags().temporary);
  EXPECT_EQ(single.device(), kernels::Device::cuda);
  single.data<float>()[3] = 5.0f;
  EXPECT_NE(refusal([&] { zeroed_f32(gpu, single); }).find("fill_zero"), std::string::npos);
  EXPECT_EQ(single.data<float>()[3], 5.0f);
  EXPECT_EQ(read_f32(gpu, single).get(), single.data<float>());
}

}  // namespace
}  // namespace memtrain::models
