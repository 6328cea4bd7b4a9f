// BertForMaskedLM's gradients in buckets (Note [Gradients live in buckets]) and the hook that
// announces them final (Note [Buckets overlap backward]): the layout follows backward, every
// announcement is really final (nothing writes the gradient afterwards), and a bucket's
// all-reduce starts while backward still runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comms/gradient_synchronizer.hpp"
#include "comms/simulated_world_communicator.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

using memtrain::testing::small_bert_config;
using memtrain::testing::synthetic_batch;
using memtrain::testing::TestAllocator;

constexpr int kLayers = 3;

struct Rig {
  explicit Rig(std::int64_t bucket_bytes, core::DType dtype = core::DType::f32)
      : alloc(std::make_shared<TestAllocator>()), ctx(alloc), model(small_bert_config(kLayers, 0.1f, 16), ctx, [&] {
          ModelOptions o;
          o.compute_dtype = dtype;
          o.gradient_bucket_bytes = bucket_bytes;
          return o;
        }()) {
    model.init_parameters(5);
  }
  std::size_t index_of(const std::string& name) const {
    const auto& ps = model.parameters();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (ps[i].name == name) return i;
    }
    ADD_FAILURE() << "no parameter " << name;
    return 0;
  }
  std::shared_ptr<TestAllocator> alloc;
  core::Context ctx;
  BertForMaskedLM model;
};

const std::string kWord = "bert.embeddings.word_embeddings.weight";

TEST(GradientBuckets, FollowBackwardWithTheTiedWordEmbeddingLast) {
  Rig r(1);  // one bucket per gradient
  auto& buckets = r.model.gradient_buckets();
  const auto& ps = r.model.parameters();
  ASSERT_EQ(buckets.size(), ps.size());
  EXPECT_TRUE(buckets.front().entries[0].name.starts_with("cls."));
  EXPECT_EQ(buckets.back().entries[0].name, kWord);
  // Encoder layers from the last to the first.
  auto first_bucket_of = [&](const std::string& prefix) {
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].entries[0].name.starts_with(prefix)) return b;
    }
    return buckets.size();
  };
  for (int l = 1; l < kLayers; ++l) {
    EXPECT_LT(first_bucket_of("bert.encoder.layer." + std::to_string(l) + "."),
              first_bucket_of("bert.encoder.layer." + std::to_string(l - 1) + "."));
  }
  EXPECT_GT(first_bucket_of("bert.embeddings."), first_bucket_of("bert.encoder.layer.0."));
}

TEST(GradientBuckets, EveryGradientIsAViewOfItsBucketAndTheBucketsHoldExactlyTheGradients) {
  Rig r(4096);
  std::int64_t grad_bytes = 0, bucket_bytes = 0;
  for (const auto& p : r.model.parameters()) grad_bytes += static_cast<std::int64_t>(p.grad.nbytes());
  for (auto& b : r.model.gradient_buckets()) {
    bucket_bytes += static_cast<std::int64_t>(b.buffer.nbytes());
    EXPECT_TRUE(b.buffer.nbytes() <= 4096 || b.entries.size() == 1) << "bucket over the cap";
    for (const auto& e : b.entries) {
      auto& p = r.model.parameters()[e.key];
      EXPECT_EQ(p.name, e.name);
      EXPECT_EQ(p.grad.data<float>(), b.buffer.data<float>() + e.offset) << e.name;
      EXPECT_EQ(p.grad.numel(), e.numel);
    }
  }
  EXPECT_EQ(bucket_bytes, grad_bytes);
  EXPECT_EQ(r.alloc->live_bytes(core::tags().gradient), grad_bytes);
  EXPECT_GT(r.model.gradient_buckets().size(), 2u);
}

// Each gradient is announced once, in bucket order, and keeps the bits it had when announced
// to the end of forward_backward: an announcement is final.
TEST(GradientBuckets, BackwardAnnouncesEachGradientOnceAndNothingWritesItAfterwards) {
  for (core::DType dtype : {core::DType::f32, core::DType::bf16}) {
    Rig r(1, dtype);
    auto& ps = r.model.parameters();
    std::vector<std::size_t> order;
    std::map<std::size_t, std::vector<unsigned char>> at_announcement;
    r.model.set_gradient_ready_hook([&](std::size_t i) {
      order.push_back(i);
      const auto* p = static_cast<const unsigned char*>(ps[i].grad.block().ptr);
      at_announcement[i].assign(p, p + ps[i].grad.nbytes());
    });
    r.model.zero_grad();
    r.model.forward_backward(synthetic_batch(2, 16, 96, 0), 1.0f / 8, 1, 0);
    r.model.reduce_sequence_parallel_gradients();  // announces nothing without sequence parallelism
    ASSERT_EQ(order.size(), ps.size());
    std::vector<std::size_t> bucket_order;
    for (const auto& b : r.model.gradient_buckets()) bucket_order.push_back(b.entries[0].key);
    EXPECT_EQ(order, bucket_order);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const auto* p = static_cast<const unsigned char*>(ps[i].grad.block().ptr);
      EXPECT_EQ(std::memcmp(p, at_announcement[i].data(), ps[i].grad.nbytes()), 0)
          << ps[i].name << " was written after it was announced final";
    }
    // The word embedding's gradient holds the decoder's and the lookup's parts.
    EXPECT_EQ(order.back(), r.index_of(kWord));
  }
}

// Note [The tied embedding's rows are summed in two parts]: right after the head's backward
// the model lists the word-table rows the lookup will still write (the batch's ids), and every
// other row keeps the bits it had then to the end of forward_backward.
TEST(GradientBuckets, TheWordTablesRowsOutsideTheBatchAreFinalAfterTheHead) {
  for (core::DType dtype : {core::DType::f32, core::DType::bf16}) {
    Rig r(1, dtype);
    auto& ps = r.model.parameters();
    const std::size_t word = r.index_of(kWord);
    EXPECT_TRUE(r.model.gradient_buckets().back().entries.back().split_rows);
    const core::MlmBatch batch = synthetic_batch(2, 16, 96, 0);
    std::vector<std::int32_t> rows;
    std::vector<unsigned char> at_announcement;
    bool word_announced = false;
    r.model.set_gradient_ready_hook([&](std::size_t i) { word_announced = word_announced || i == word; },
                                    [&](std::size_t i, const std::vector<std::int32_t>& late) {
                                      EXPECT_EQ(i, word);
                                      EXPECT_FALSE(word_announced);
                                      rows = late;
                                      const auto* p = static_cast<const unsigned char*>(ps[i].grad.block().ptr);
                                      at_announcement.assign(p, p + ps[i].grad.nbytes());
                                    });
    r.model.zero_grad();
    r.model.forward_backward(batch, 1.0f / 8, 1, 0);
    EXPECT_TRUE(word_announced);
    EXPECT_EQ(rows, batch.input_ids);  // no tensor parallelism: row = id
    const auto* now = static_cast<const unsigned char*>(ps[word].grad.block().ptr);
    const std::size_t row_bytes = ps[word].grad.nbytes() / static_cast<std::size_t>(ps[word].grad.shape()[0]);
    std::size_t written = 0;
    for (std::int64_t row = 0; row < ps[word].grad.shape()[0]; ++row) {
      const bool late = std::find(rows.begin(), rows.end(), row) != rows.end();
      const bool same = std::memcmp(now + row * row_bytes, at_announcement.data() + row * row_bytes, row_bytes) == 0;
      if (!late) {
        EXPECT_TRUE(same) << "row " << row << " was written after the head";
      }
      written += late && !same;
    }
    EXPECT_GT(written, 0u) << "the lookup wrote none of its rows";
  }
}

// Note [A rank without masked tokens announces like the others]: the data-parallel peers issue
// collectives in announcement order, so a micro-batch with nothing to learn from announces
// the same gradients in the same order, the rows announcement included (with no rows).
TEST(GradientBuckets, AMicroBatchWithoutMaskedTokensAnnouncesInBackwardsOrder) {
  Rig r(1);
  constexpr std::size_t kRows = 1u << 30;  // marks the rows announcement in the sequence
  auto record = [&](core::MlmBatch batch, std::vector<std::int32_t>* rows) {
    std::vector<std::size_t> events;
    r.model.set_gradient_ready_hook([&](std::size_t i) { events.push_back(i); },
                                    [&](std::size_t, const std::vector<std::int32_t>& late) {
                                      events.push_back(kRows);
                                      *rows = late;
                                    });
    r.model.zero_grad();
    r.model.forward_backward(batch, 1.0f / 8, 1, 0);
    r.model.set_gradient_ready_hook({});
    return events;
  };
  std::vector<std::int32_t> rows_full, rows_empty = {7};
  const auto full = record(synthetic_batch(2, 16, 96, 0), &rows_full);
  auto empty_batch = synthetic_batch(2, 16, 96, 0);
  empty_batch.masked_positions.clear();
  empty_batch.masked_labels.clear();
  const auto empty = record(empty_batch, &rows_empty);
  EXPECT_EQ(full.size(), r.model.parameters().size() + 1);
  EXPECT_EQ(empty, full);
  EXPECT_FALSE(rows_full.empty());
  EXPECT_TRUE(rows_empty.empty());
}

// A group of two whose all-reduce only counts its calls.
class CountingGroup final : public comms::SimulatedWorldCommunicator {
 public:
  CountingGroup() : SimulatedWorldCommunicator(2, "counting") {}
  void allreduce_sum(float*, std::int64_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    changed_.notify_all();
  }
  bool wait_for_a_call() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return calls_ > 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int calls_ = 0;
};

// The overlap is real: when backward announces its last gradient (the word embedding, after the
// embeddings' backward), the communication thread has already started an all-reduce of an
// earlier bucket. The hook waits for that call; without overlap it would never come before
// finish().
TEST(GradientBuckets, ABucketsAllReduceStartsBeforeBackwardEnds) {
  Rig r(2048);
  CountingGroup group;
  comms::GradientSynchronizer sync(r.model.gradient_buckets(), group, r.ctx);
  ASSERT_TRUE(sync.overlaps());
  const std::size_t last = r.index_of(kWord);
  bool started_before_the_end = false;
  r.model.set_gradient_ready_hook([&](std::size_t i) {
    if (i == last) started_before_the_end = group.wait_for_a_call();
    sync.mark_ready(i);
  });
  sync.begin_step();
  r.model.zero_grad();
  r.model.forward_backward(synthetic_batch(2, 16, 96, 0), 1.0f / 8, 1, 0);
  r.model.set_gradient_ready_hook({});
  sync.finish();
  EXPECT_TRUE(started_before_the_end);
  EXPECT_GT(sync.queue_order().size(), 1u);
  EXPECT_EQ(sync.queue_order().front(), 0);
}

}  // namespace
}  // namespace memtrain::models
