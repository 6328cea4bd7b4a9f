// Note [Resharding onto another tensor-parallel size]: shards written as a two-rank job writes
// them (dim0 rows with vocabulary padding, dim1 columns, replicated tensors, optimizer tensors
// that follow their parameter's layout) merge back into the tensors they were cut from, and a
// shard of another size cut from the whole holds exactly its rows or columns, zeros on padding.
#include "runtime/train/tensor_parallel_shards.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/train/checkpoint_saver.hpp"
#include "runtime/train/model_memory.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::train {
namespace {

// E [5, 3]: E[i][j] = 10 i + j + 1 (a 5-row vocabulary, padded to 6 rows for two ranks);
// W [2, 4]: W[i][j] = 100 + 10 i + j; b [3] replicated.
float e_at(int i, int j) { return static_cast<float>(10 * i + j + 1); }
float w_at(int i, int j) { return static_cast<float>(100 + 10 * i + j); }

core::HostArray f32(std::vector<float> v, std::vector<std::int64_t> shape) {
  return core::host_array_f32(v.data(), std::move(shape));
}

// The files of a tp = 2 checkpoint of E, W and b, with E.exp_avg = -E, W.master = W / 2.
void write_two_rank_checkpoint(const std::string& dir) {
  for (int r = 0; r < 2; ++r) {
    std::vector<float> e, w;
    for (int i = 3 * r; i < 3 * r + 3; ++i) {
      for (int j = 0; j < 3; ++j) e.push_back(i < 5 ? e_at(i, j) : 0.0f);  // row 5 is padding
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 2 * r; j < 2 * r + 2; ++j) w.push_back(w_at(i, j));
    }
    std::vector<float> neg_e(e), half_w(w);
    for (auto& x : neg_e) x = -x;
    for (auto& x : half_w) x /= 2;
    nlohmann::json layout = {{"E", {{"sharding", "dim0"}, {"offset", 3 * r}, {"full_extent", 6}, {"valid_extent", 5}}},
                             {"W", {{"sharding", "dim1"}, {"offset", 2 * r}, {"full_extent", 4}, {"valid_extent", 4}}}};
    core::write_safetensors(dir + "/" + model_file_name(r),
                            {{"E", f32(e, {3, 3})}, {"W", f32(w, {2, 2})}, {"b", f32({7, 8, 9}, {3})}},
                            {{"memtrain_shards", layout.dump()}});
    const std::int64_t step = 12;
    core::HostArray step_array{"I64", {}, std::vector<std::byte>(8)};
    std::memcpy(step_array.data.data(), &step, 8);
    core::write_safetensors(
        dir + "/" + optimizer_file_name(r),
        {{"E.exp_avg", f32(neg_e, {3, 3})}, {"W.master", f32(half_w, {2, 2})}, {"step", step_array}});
  }
}

TEST(TensorParallelShards, TwoShardsMergeIntoTheTensorsTheyWereCutFrom) {
  testing::TempDir dir;
  write_two_rank_checkpoint(dir.str());
  const MergedCheckpoint m = merge_tensor_parallel_checkpoint(dir.str(), 2, true);
  ASSERT_EQ(m.model.at("E").shape, (std::vector<std::int64_t>{5, 3}));  // padding dropped
  ASSERT_EQ(m.model.at("W").shape, (std::vector<std::int64_t>{2, 4}));
  const auto e = core::to_floats(m.model.at("E")), w = core::to_floats(m.model.at("W"));
  const auto e_avg = core::to_floats(m.optimizer.at("E.exp_avg")),
             w_master = core::to_floats(m.optimizer.at("W.master"));
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(e[3 * i + j], e_at(i, j)) << i << "," << j;
      EXPECT_EQ(e_avg[3 * i + j], -e_at(i, j));
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(w[4 * i + j], w_at(i, j)) << i << "," << j;
      EXPECT_EQ(w_master[4 * i + j], w_at(i, j) / 2);
    }
  }
  EXPECT_EQ(core::to_floats(m.model.at("b")), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(core::to_doubles(m.optimizer.at("step")), std::vector<double>{12});
}

TEST(TensorParallelShards, AShardOfAnotherSizeHoldsItsRowsOrColumnsAndZeroPadding) {
  testing::TempDir dir;
  write_two_rank_checkpoint(dir.str());
  const MergedCheckpoint m = merge_tensor_parallel_checkpoint(dir.str(), 2, false);
  auto allocator = make_model_allocator(MemoryConfig{});
  core::Context ctx{allocator};
  // Four ranks: the vocabulary padded to 8 rows, rank 2 holds rows 4 (real) and 5 (padding).
  core::Tensor e = core::Tensor::empty(ctx, {2, 3}, core::DType::f32, core::tags().parameter);
  std::fill(e.data<float>(), e.data<float>() + 6, 99.0f);
  copy_shard_into(e, {models::Sharding::dim0, 4, 8, 5}, m.model.at("E"), "E", "test");
  EXPECT_EQ(std::vector<float>(e.data<float>(), e.data<float>() + 6),
            (std::vector<float>{e_at(4, 0), e_at(4, 1), e_at(4, 2), 0, 0, 0}));
  // Rank 3 of four: columns [3, 4) of W.
  core::Tensor w = core::Tensor::empty(ctx, {2, 1}, core::DType::f32, core::tags().parameter);
  copy_shard_into(w, {models::Sharding::dim1, 3, 4, 4}, m.model.at("W"), "W", "test");
  EXPECT_EQ(std::vector<float>(w.data<float>(), w.data<float>() + 2), (std::vector<float>{w_at(0, 3), w_at(1, 3)}));
  // One rank: the whole tensor.
  core::Tensor whole = core::Tensor::empty(ctx, {2, 4}, core::DType::f32, core::tags().parameter);
  copy_shard_into(whole, {models::Sharding::dim1, 0, 4, 4}, m.model.at("W"), "W", "test");
  EXPECT_EQ(std::vector<float>(whole.data<float>(), whole.data<float>() + 8), core::to_floats(m.model.at("W")));
  // Another dtype or another unsharded shape is refused, naming the tensor.
  core::Tensor half = core::Tensor::empty(ctx, {2, 3}, core::DType::bf16, core::tags().parameter);
  try {
    copy_shard_into(half, {models::Sharding::dim0, 4, 8, 5}, m.model.at("E"), "E", "ckpt");
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError& err) {
    EXPECT_STREQ(err.what(), "ckpt: tensor E is F32 [5, 3], the model's shard needs BF16 [5, 3] unsharded");
  }
  EXPECT_THROW(copy_shard_into(e, {models::Sharding::dim0, 4, 8, 6}, m.model.at("E"), "E", "ckpt"), RuntimeError);
}

TEST(TensorParallelShards, AShardOutsideItsRecordedExtentIsRefused) {
  testing::TempDir dir;
  write_two_rank_checkpoint(dir.str());
  nlohmann::json bad = {{"E", {{"sharding", "dim0"}, {"offset", 4}, {"full_extent", 6}, {"valid_extent", 5}}}};
  core::write_safetensors(
      dir.sub(model_file_name(1)),
      {{"E", f32(std::vector<float>(9, 1), {3, 3})}, {"W", f32({1, 2, 3, 4}, {2, 2})}, {"b", f32({7, 8, 9}, {3})}},
      {{"memtrain_shards", bad.dump()}});
  try {
    merge_tensor_parallel_checkpoint(dir.str(), 2, false);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError& err) {
    EXPECT_NE(std::string(err.what()).find("model-tp01.safetensors: tensor E shard [3, 3] at [4, 7) does not fit"),
              std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace memtrain::train
