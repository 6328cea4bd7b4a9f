// Runs under mpirun with 2 and 4 ranks (train_mpi_2ranks, train_mpi_4ranks): data-parallel
// training through the bucketed, overlapped gradient synchroniser (comms/gradient_synchronizer)
// against one process that runs the same global batch alone, computed in this process.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "comms/onebit_compressor.hpp"
#include "comms/single_rank_communicator.hpp"
#include "models/f32_access.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "comms/process_grid.hpp"
#include "runtime/train/make_optimizer.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/norm_sketch.hpp"
#include "runtime/train/onebit_adam.hpp"
#include "runtime/train/zero_adamw.hpp"
#include "memory/trace_recorder.hpp"
#include "runtime/train/train_step.hpp"
#include "tests/train/mpi/trace_compare.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

// eps = 1e-3 keeps Adam's update Lipschitz in g (as TrainStep.OneByEightAndTwoByFourGiveTheSame
// Update), so gradients that agree to rounding give weights that do; grad_clip 0.05 is below
// the tiny model's gradient norm, so clipping is active in every step.
Config sync_config(double bucket_size_mb) {
  Config c = testing::tiny_mock_config();
  c.model.hidden_dropout_prob = 0.1f;
  c.model.attention_probs_dropout_prob = 0.1f;
  c.training.adam_eps = 1e-3;
  c.training.micro_batch_size = 2;
  c.training.global_batch_size = 8;
  c.parallel.bucket_size_mb = bucket_size_mb;
  return c;
}
constexpr double kGradClip = 0.05;

struct SyncRun {
  // sync: sum through a GradientSynchronizer (else train_step's in-place per-bucket sum).
  SyncRun(const Config& c, comms::Communicator& group, bool sync, bool overlap = true)
      : allocator(make_model_allocator(c.memory)),
        ctx(allocator),
        model(c.model, ctx, model_options(c)),
        data(data::MlmDataset::mock(c.data, c.model.vocab_size, c.training.seed)),
        optimizer(
            model.parameters(), ctx,
            AdamWOptions{c.training.adam_beta1, c.training.adam_beta2, c.training.adam_eps, c.training.weight_decay}),
        dp(group),
        plan(BatchPlan::make(c.training.global_batch_size, c.training.micro_batch_size, group.size(), group.rank())),
        seed(c.training.seed) {
    model.init_parameters(c.training.seed);
    if (sync) gradient_sync.emplace(model.gradient_buckets(), group, ctx, overlap);
  }
  StepResult step(std::int64_t index) {
    return train_step(model, data, plan, dp, optimizer, index, StepSettings{2e-3, kGradClip, seed}, nullptr,
                      gradient_sync ? &*gradient_sync : nullptr);
  }

  std::shared_ptr<memory::CachingAllocator> allocator;
  core::Context ctx;
  models::BertForMaskedLM model;
  data::MlmDataset data;
  AdamW optimizer;
  comms::Communicator& dp;
  BatchPlan plan;
  std::uint64_t seed;
  std::optional<comms::GradientSynchronizer> gradient_sync;
};

std::vector<float> floats(const core::Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  models::load_f32(v.data(), t);
  return v;
}

// ||a - b|| / max(||b||, 1e-3) in double: the floor keeps tensors that are zero in exact
// arithmetic (the key bias, Note [Tensors that are zero in exact arithmetic]) absolute.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    ref += double{b[i]} * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-3);
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

// dp = world against dp = 1 with the same global batch, for buckets of one gradient each,
// 1 MiB and 25 MiB (the whole tiny model): same losses, grad_norm and parameters over 10 steps.
TEST(GradientSync, DataParallelMatchesOneProcessForEveryBucketSize) {
  auto world = comms::make_world_communicator();
  ASSERT_GT(world->size(), 1);
  comms::SingleRankCommunicator single;
  for (double mb : {1e-9, 1.0, 25.0}) {
    const Config c = sync_config(mb);
    SyncRun alone(c, single, /*sync=*/true);
    SyncRun grid(c, *world, /*sync=*/true);
    ASSERT_TRUE(grid.gradient_sync->overlaps());
    if (mb < 1e-6) {
      ASSERT_EQ(grid.model.gradient_buckets().size(), grid.model.parameters().size());
    }
    for (std::int64_t s = 0; s < 10; ++s) {
      const StepResult want = alone.step(s);
      const StepResult got = grid.step(s);
      const std::string when = std::to_string(mb) + " MiB buckets, step " + std::to_string(s);
      EXPECT_LE(relative(got.loss, want.loss), 1e-6) << when;
      EXPECT_LE(relative(got.grad_norm, want.grad_norm), 1e-6) << when;
      EXPECT_GT(want.grad_norm, kGradClip) << when << ": clipping should be active";
      // Every gradient element is all-reduced once, n x 4 bytes per step, and the row mask of
      // the tied embedding (one float per row of the table) once.
      std::int64_t elements = 0;
      for (const auto& p : grid.model.parameters()) elements += p.grad.numel();
      const std::int64_t vocab_rows = grid.model.parameters()[0].grad.shape()[0];
      ASSERT_EQ(grid.model.parameters()[0].name, "bert.embeddings.word_embeddings.weight");
      EXPECT_EQ(grid.gradient_sync->row_mask_bytes(), static_cast<std::size_t>(vocab_rows) * 4);
      EXPECT_EQ(got.comm_bytes, (elements + vocab_rows) * 4) << when;
      EXPECT_GE(got.time_comm_exposed_s, 0.0);
    }
    auto& g = grid.model.parameters();
    auto& w = alone.model.parameters();
    for (std::size_t i = 0; i < g.size(); ++i) {
      EXPECT_LE(relative_error(floats(g[i].value), floats(w[i].value)), 1e-6) << mb << " MiB buckets: " << g[i].name;
    }
  }
}

// One bucket per parameter in f32: the overlapped synchroniser gives bitwise the sum of one
// all-reduce per parameter after backward (the sum before buckets existed).
TEST(GradientSync, OneBucketPerParameterIsBitwiseThePerParameterSum) {
  auto world = comms::make_world_communicator();
  const Config c = sync_config(1e-9);
  SyncRun bucketed(c, *world, /*sync=*/true);
  SyncRun per_parameter(c, *world, /*sync=*/false);
  for (std::int64_t s = 0; s < 3; ++s) {
    const StepResult a = bucketed.step(s);
    const StepResult b = per_parameter.step(s);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.grad_norm, b.grad_norm);
  }
  auto& x = bucketed.model.parameters();
  auto& y = per_parameter.model.parameters();
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::memcmp(x[i].value.data<float>(), y[i].value.data<float>(), x[i].value.nbytes()), 0) << x[i].name;
  }
}

// Note [The tied embedding's rows are summed in two parts]: with a vocabulary much larger than
// a step's tokens, most rows of the word table go ahead of the embeddings' backward. Each
// element is still the sum of every rank's final value: against one all-reduce per bucket
// after backward, bitwise on 2 ranks (a sum of two is the same in any grouping), within
// rounding on 4, over steps with and without accumulation.
TEST(GradientSync, TheTiedEmbeddingsRowsOutsideTheBatchAreSummedDuringBackward) {
  auto world = comms::make_world_communicator();
  for (int accumulation : {1, 3}) {
    Config c = sync_config(1.0);
    c.model.vocab_size = 2048;
    c.training.global_batch_size = accumulation * c.training.micro_batch_size * world->size();
    SyncRun split(c, *world, /*sync=*/true);
    SyncRun whole(c, *world, /*sync=*/false);
    ASSERT_TRUE(split.gradient_sync->overlaps());
    const std::int64_t rows = split.model.parameters()[0].grad.shape()[0];
    for (std::int64_t s = 0; s < 3; ++s) {
      const StepResult a = split.step(s);
      const StepResult b = whole.step(s);
      // The last micro-batch's B x T tokens per rank touch at most that many rows each.
      const std::int64_t tokens = std::int64_t{c.training.micro_batch_size} * c.data.seq_length;
      EXPECT_GE(split.gradient_sync->early_rows(), rows - tokens * world->size()) << "step " << s;
      EXPECT_LT(split.gradient_sync->early_rows(), rows) << "step " << s;
      if (world->size() == 2) {
        EXPECT_EQ(a.loss, b.loss);
        EXPECT_EQ(a.grad_norm, b.grad_norm);
      } else {
        EXPECT_LE(relative(a.grad_norm, b.grad_norm), 1e-6);
      }
    }
    auto& x = split.model.parameters();
    auto& y = whole.model.parameters();
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (world->size() == 2) {
        EXPECT_EQ(std::memcmp(x[i].value.data<float>(), y[i].value.data<float>(), x[i].value.nbytes()), 0) << x[i].name;
      } else {
        EXPECT_LE(relative_error(floats(x[i].value), floats(y[i].value)), 1e-6) << x[i].name;
      }
    }
  }
}

// bf16 through the staging buffer, with and without the thread: the same bits either way.
TEST(GradientSync, SixteenBitSumsAreTheSameWithAndWithoutOverlap) {
  auto world = comms::make_world_communicator();
  Config c = sync_config(0.001);
  c.precision.dtype = "bf16";
  SyncRun overlapped(c, *world, /*sync=*/true, /*overlap=*/true);
  SyncRun serial(c, *world, /*sync=*/true, /*overlap=*/false);
  ASSERT_FALSE(serial.gradient_sync->overlaps());
  for (std::int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(overlapped.step(s).loss, serial.step(s).loss);
  }
  auto& x = overlapped.model.parameters();
  auto& y = serial.model.parameters();
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::memcmp(x[i].master.data<float>(), y[i].master.data<float>(), x[i].master.nbytes()), 0) << x[i].name;
  }
}

// A run as the trainer builds it: the synchroniser and optimizer that parallel.zero_stage asks
// for, over the data-parallel group of a grid (tp x dp of the world).
struct ZeroRun {
  // alloc: the run's allocator (default: the config's on host memory); dry_run: shapes only.
  ZeroRun(const Config& c, comms::ProcessGrid& grid, std::shared_ptr<memory::CachingAllocator> alloc = nullptr,
          bool dry_run = false)
      : allocator(alloc != nullptr ? alloc : make_model_allocator(c.memory)),
        ctx(allocator),
        // The context is in dry-run mode before the model allocates (the comma expression).
        model((ctx.set_dry_run(dry_run), c.model), ctx, model_options(c), tensor_parallel(c, &grid.tp())),
        data(data::MlmDataset::mock(c.data, c.model.vocab_size, c.training.seed)),
        compression(gradient_compression(c)),
        sync(model.gradient_buckets(), grid.dp(), ctx, true, gradient_reduction(c),
             compression ? &*compression : nullptr),
        optimizer(make_optimizer(c, model, sync, grid.dp(), ctx, &grid.tp())),
        grid(grid),
        plan(
            BatchPlan::make(c.training.global_batch_size, c.training.micro_batch_size, grid.dp_size(), grid.dp_rank())),
        seed(c.training.seed) {
    init_parameters(model, *optimizer, c.training.seed);
  }
  StepResult step(std::int64_t index) {
    return train_step(model, data, plan, grid.dp(), *optimizer, index, StepSettings{2e-3, kGradClip, seed}, nullptr,
                      &sync, &grid.world());
  }
  std::vector<float> values(std::size_t i) { return floats(model.parameters()[i].value); }

  std::shared_ptr<memory::CachingAllocator> allocator;
  core::Context ctx;
  models::BertForMaskedLM model;
  data::MlmDataset data;
  std::optional<comms::GradientSynchronizer::Compression> compression;
  comms::GradientSynchronizer sync;
  std::unique_ptr<Optimizer> optimizer;
  comms::ProcessGrid& grid;
  BatchPlan plan;
  std::uint64_t seed;
};

struct ZeroCase {
  std::string dtype;
  int tp;
  int global_batch;  // 8: accumulation 2 on 2 ranks; 16: accumulation on every grid
  double bucket_mb;
  double tolerance;
};

// ZeRO-1 against stage 0 on the same grid, 10 steps with clipping active: same losses,
// grad_norm and parameters within 1e-6 in fp32 and 1e-3 in bf16 (reduce-scatter and all-reduce
// add in different orders, and bf16 rounds the difference up).
TEST(GradientSync, ZeroStageOneMatchesStageZero) {
  const int P = comms::make_world_communicator()->size();
  std::vector<ZeroCase> cases = {{"fp32", 1, 8, 25.0, 1e-6},
                                 {"fp32", 1, 16, 1e-9, 1e-6},
                                 {"fp32", 1, 8, 0.001, 1e-6},
                                 {"bf16", 1, 8, 0.001, 1e-3},
                                 {"bf16", 1, 16, 25.0, 1e-3},
                                 {"fp16", 1, 8, 0.001, 1e-3},
                                 {"bf16-fp32-grads", 1, 8, 0.001, 1e-3}};
  if (P % 2 == 0 && P >= 4) cases.push_back({"fp32", 2, 8, 0.001, 1e-6});
  for (const ZeroCase& k : cases) {
    Config c = sync_config(k.bucket_mb);
    c.model.num_attention_heads = 2;
    c.precision.dtype = k.dtype == "bf16-fp32-grads" ? "bf16" : k.dtype;
    c.precision.fp32_grad_accumulation = k.dtype == "bf16-fp32-grads";
    c.training.global_batch_size = k.global_batch;
    c.parallel.tensor_model_parallel_size = k.tp;
    Config z = c;
    z.parallel.zero_stage = 1;
    comms::ProcessGrid grid(comms::make_world_communicator(), k.tp);
    ZeroRun stage0(c, grid);
    ZeroRun stage1(z, grid);
    ASSERT_NE(dynamic_cast<ZeroAdamW*>(stage1.optimizer.get()), nullptr);
    const std::string name = k.dtype + " tp " + std::to_string(k.tp) + " global " + std::to_string(k.global_batch) +
                             " buckets " + std::to_string(k.bucket_mb);
    for (std::int64_t s = 0; s < 10; ++s) {
      const StepResult want = stage0.step(s);
      const StepResult got = stage1.step(s);
      EXPECT_LE(relative(got.loss, want.loss), k.tolerance) << name << " step " << s;
      EXPECT_LE(relative(got.grad_norm, want.grad_norm), k.tolerance) << name << " step " << s;
      EXPECT_GT(want.grad_norm, kGradClip);
    }
    for (std::size_t i = 0; i < stage0.model.parameters().size(); ++i) {
      EXPECT_LE(relative_error(stage1.values(i), stage0.values(i)), k.tolerance)
          << name << ": " << stage0.model.parameters()[i].name;
    }
  }
}

// Every data-parallel rank ends a ZeRO-1 step with the same parameters bitwise (each rank's
// shard came to the others through the all-gather).
TEST(GradientSync, ZeroStageOneLeavesEveryRankWithTheSameParameters) {
  Config c = sync_config(0.001);
  c.parallel.zero_stage = 1;
  comms::ProcessGrid grid(comms::make_world_communicator(), 1);
  ZeroRun run(c, grid);
  for (std::int64_t s = 0; s < 3; ++s) run.step(s);
  for (std::size_t i = 0; i < run.model.parameters().size(); ++i) {
    std::vector<float> mine = run.values(i), rank0 = mine;
    grid.dp().broadcast(rank0.data(), static_cast<std::int64_t>(rank0.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(mine.data(), rank0.data(), mine.size() * sizeof(float)), 0) << run.model.parameters()[i].name;
  }
}

// compression.method powersgd (rank 1) and onebit over the data-parallel group, in fp32 and bf16:
// the same bits as no compression before start_iter, then fewer bytes (the ratio each method's formula
// gives) and a training that still follows the uncompressed one.
TEST(GradientSync, CompressionSendsFewerBytesFromStartIter) {
  for (const std::string method : {"powersgd", "onebit", "powersgd bf16", "onebit bf16"}) {
    Config plain = sync_config(1.0);
    // Note [16-bit gradients are compressed in f32]
    if (method.find("bf16") != std::string::npos) plain.precision.dtype = "bf16";
    Config compressed = plain;
    compressed.compression.method = method.substr(0, method.find(' '));
    compressed.compression.rank = 1;
    compressed.compression.start_iter = 2;
    comms::ProcessGrid grid(comms::make_world_communicator(), 1);
    ZeroRun a(plain, grid), b(compressed, grid);
    const auto* onebit = dynamic_cast<const comms::OneBitCompressor*>(b.sync.compressor());
    ASSERT_EQ(onebit != nullptr, compressed.compression.method == "onebit");
    for (std::int64_t s = 0; s < 6; ++s) {
      const StepResult x = a.step(s), y = b.step(s);
      // Without compression the tied embedding's row mask travels too (no early rows under
      // compression: the table is compressed whole).
      const auto plain_bytes = x.comm_bytes - static_cast<std::int64_t>(a.sync.row_mask_bytes());
      EXPECT_EQ(b.sync.row_mask_bytes(), 0u);
      EXPECT_EQ(y.uncompressed_comm_bytes, plain_bytes) << method << " step " << s;
      if (s < 2) {
        EXPECT_EQ(x.loss, y.loss) << method << " step " << s;
        EXPECT_EQ(y.comm_bytes, plain_bytes) << method << " step " << s;
        continue;
      }
      EXPECT_LT(y.comm_bytes * 2, plain_bytes) << method << " step " << s;
      if (onebit != nullptr) {
        // Note [1-bit sums in two stages]: both stages of every bucket.
        std::int64_t want = 0;
        for (std::size_t k = 0; k < b.model.gradient_buckets().size(); ++k) {
          want += onebit->alltoall_bytes(k) + onebit->allgather_bytes(k);
        }
        EXPECT_EQ(y.comm_bytes, want) << "step " << s;
      }
      EXPECT_TRUE(std::isfinite(y.loss));
      EXPECT_LE(relative(y.loss, x.loss), 0.05) << method << " step " << s;
    }
  }
}

// training.optimizer onebit_adam (freeze_step 3) against adamw on the same grid: the same bits
// up to the freeze (plain Adam on summed gradients); from it no gradient sum, the momentum sum's
// bytes (the norm sketch's sum, a flag per parameter, then both 1-bit stages of every bucket,
// Note [1-bit Adam sums the momentum]), a grad_norm that estimates the summed one, a loss that
// still follows AdamW's, and every rank with the same parameters.
TEST(GradientSync, OneBitAdamIsAdamWUntilTheFreezeThenSumsTheMomentumIn1Bit) {
  Config plain = sync_config(1.0), onebit = plain;
  onebit.training.optimizer = "onebit_adam";
  onebit.compression.freeze_step = 3;
  comms::ProcessGrid grid(comms::make_world_communicator(), 1);
  const int P = grid.dp_size();
  ZeroRun a(plain, grid), b(onebit, grid);
  ASSERT_NE(dynamic_cast<OneBitAdam*>(b.optimizer.get()), nullptr);
  const auto& buckets = b.model.gradient_buckets();
  const comms::OneBitCompressor layout(buckets, P, b.ctx);  // for its byte counts only
  const auto flags = static_cast<std::int64_t>(b.model.parameters().size()) * 8;
  const std::int64_t sketch = P > 1 ? NormSketch::kBuckets * 8 : 0;
  std::int64_t compressed = flags + sketch, uncompressed = flags + sketch;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    compressed += layout.alltoall_bytes(k) + layout.allgather_bytes(k);
    uncompressed += buckets[k].buffer.numel() * 4;
  }
  for (std::int64_t s = 0; s < 6; ++s) {
    const StepResult x = a.step(s), y = b.step(s);
    if (s < 3) {  // (the 1-bit Adam run's momentum sum adds no bytes before the freeze)
      EXPECT_EQ(x.loss, y.loss) << "step " << s;
      EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << s;
      EXPECT_EQ(x.comm_bytes, y.comm_bytes) << "step " << s;
      continue;
    }
    // Note [1-bit Adam clips by a sketch of the summed norm]: an estimate of ||sum g_i|| within
    // about 3 %, which AdamW's run measures exactly (the two runs are close at these steps).
    EXPECT_NEAR(y.grad_norm, x.grad_norm, 0.2 * x.grad_norm) << "step " << s;
    EXPECT_EQ(y.comm_bytes, compressed) << "step " << s;
    EXPECT_EQ(y.uncompressed_comm_bytes, uncompressed) << "step " << s;
    EXPECT_TRUE(std::isfinite(y.loss));
    EXPECT_LE(relative(y.loss, x.loss), 0.05) << "step " << s;
  }
  for (std::size_t i = 0; i < b.model.parameters().size(); ++i) {
    std::vector<float> mine = b.values(i), rank0 = mine;
    grid.dp().broadcast(rank0.data(), static_cast<std::int64_t>(rank0.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(mine.data(), rank0.data(), mine.size() * sizeof(float)), 0) << b.model.parameters()[i].name;
  }
}

// design.md, "Execution modes": under ZeRO-1 and small buckets too, a dry run allocates what
// the compute run allocates, event for event, on every rank (the buckets, the shards' moments
// and masters, the staging buffer, and in fp32 at stage 0 the tied embedding's row mask).
TEST(GradientSync, DryRunTraceEqualsTheComputeTraceOnEveryRank) {
  struct Setting {
    const char* dtype;
    int zero_stage;
    double bucket_mb;
  };
  for (const Setting& k :
       {Setting{"fp32", 1, 0.001}, Setting{"bf16", 1, 25.0}, Setting{"fp16", 0, 0.001}, Setting{"bf16", 0, 1e-9},
        Setting{"fp32", 0, 1.0}, Setting{"fp32", -1, 1.0}, Setting{"fp32", -2, 1.0}, Setting{"fp32", -3, 1.0},
        Setting{"bf16", -1, 1.0}, Setting{"fp16", -2, 0.001}}) {
    Config c = sync_config(k.bucket_mb);
    c.precision.dtype = k.dtype;
    c.parallel.zero_stage = std::max(k.zero_stage, 0);
    if (k.zero_stage == -3) {  // 1-bit Adam's momentum buckets and compressor, frozen at step 1
      c.training.optimizer = "onebit_adam";
      c.compression.freeze_step = 1;
    } else if (k.zero_stage < 0) {  // PowerSGD's or 1-bit's state and scratch, from the first step on
      c.compression.method = k.zero_stage == -1 ? "powersgd" : "onebit";
      c.compression.start_iter = 0;
    }
    comms::ProcessGrid grid(comms::make_world_communicator(), 1);
    auto trace = [&](bool dry) {
      std::shared_ptr<memory::CachingAllocator> alloc =
          dry ? make_dry_run_allocator(c.memory, std::size_t{1} << 32, "simulated") : make_model_allocator(c.memory);
      memory::TraceRecorder recorder;
      alloc->set_event_sink(recorder.sink());
      {
        ZeroRun run(c, grid, alloc, dry);
        run.step(0);
        run.step(1);
      }
      alloc->set_event_sink(nullptr);
      return recorder.events();
    };
    const auto real = trace(false);
    const auto dry = trace(true);
    const std::string name =
        std::string(k.dtype) + " zero " + std::to_string(k.zero_stage) + " buckets " + std::to_string(k.bucket_mb);
    testing::expect_same_trace(real, dry, name, 50);
  }
}

}  // namespace
}  // namespace memtrain::train
