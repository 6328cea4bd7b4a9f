// Runs under mpirun with 2 and 4 ranks (CTest: train_mpi_2ranks, train_mpi_4ranks). Every rank
// trains the same model twice: once alone (tensor_model_parallel_size 1, one process: the
// reference, computed in this process) and once as its rank of a tp x dp grid of the world.
// The grid's gradients are gathered over the tp group and compared with the reference's
// tensor by tensor, ||a - b|| / ||b||, as are losses, gradient norms and evaluations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comms/counting_communicator.hpp"
#include "memory/trace_recorder.hpp"
#include "comms/process_grid.hpp"
#include "comms/single_rank_communicator.hpp"
#include "models/f32_access.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/train/evaluator.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/train_step.hpp"
#include "tests/train/mpi/trace_compare.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

// 4 heads so that tp = 4 splits them; lr moves the weights from the first step (no warm-up).
// Note on adam_eps: as in TrainStep.OneByEightAndTwoByFourGiveTheSameUpdate, eps = 1e-3 keeps
// Adam's update Lipschitz in g, so gradients that agree to rounding give weights that do.
Config grid_config(bool dropout) {
  Config c = testing::tiny_mock_config();
  c.model.num_attention_heads = 4;
  c.model.hidden_dropout_prob = dropout ? 0.1f : 0.0f;
  c.model.attention_probs_dropout_prob = dropout ? 0.1f : 0.0f;
  c.training.adam_eps = 1e-3;
  c.training.micro_batch_size = 4;
  c.training.global_batch_size = 8;
  return c;
}

comms::Communicator* tp_of(comms::ProcessGrid* grid, comms::Communicator* tp_group) {
  if (tp_group != nullptr) return tp_group;
  return grid != nullptr ? &grid->tp() : nullptr;
}

// One model, optimizer and data set on `tp` (null: alone) with `dp` as its data-parallel group.
struct TrainingRun {
  // tp_group: the group the model and optimizer use (grid->tp() by default; a counting
  // adaptor of it in one test).
  // allocator: the run's (default: the config's on host memory); dry_run: shapes only.
  TrainingRun(const Config& c, comms::ProcessGrid* grid, comms::Communicator* tp_group = nullptr,
              std::shared_ptr<memory::CachingAllocator> alloc = nullptr, bool dry_run = false)
      : config(c),
        allocator(alloc != nullptr ? alloc : make_model_allocator(c.memory)),
        ctx(allocator),
        // The context is in dry-run mode before the model allocates (the comma expression).
        model((ctx.set_dry_run(dry_run), c.model), ctx, model_options(c), tensor_parallel(c, tp_of(grid, tp_group))),
        data(data::MlmDataset::mock(c.data, c.model.vocab_size, c.training.seed)),
        validation(data::MlmDataset::mock(c.data, c.model.vocab_size, c.training.seed + 1)),
        dp(grid != nullptr ? &grid->dp() : &single),
        world(grid != nullptr ? &grid->world() : &single),
        plan(BatchPlan::make(c.training.global_batch_size, c.training.micro_batch_size, dp->size(), dp->rank())) {
    model.init_parameters(c.training.seed);
    optimizer.emplace(
        model.parameters(), ctx,
        AdamWOptions{c.training.adam_beta1, c.training.adam_beta2, c.training.adam_eps, c.training.weight_decay},
        tp_of(grid, tp_group));
    gradient_sync.emplace(model.gradient_buckets(), *dp, ctx);
  }

  StepResult step(std::int64_t index) {
    return train_step(model, data, plan, *dp, *optimizer, index, StepSettings{2e-3, 1.0, config.training.seed}, nullptr,
                      &*gradient_sync, world);
  }

  Config config;
  comms::SingleRankCommunicator single;
  std::shared_ptr<memory::CachingAllocator> allocator;
  core::Context ctx;
  models::BertForMaskedLM model;
  data::MlmDataset data, validation;
  comms::Communicator* dp;
  comms::Communicator* world;
  BatchPlan plan;
  std::optional<AdamW> optimizer;
  std::optional<comms::GradientSynchronizer> gradient_sync;
};

std::vector<float> to_floats(const core::Tensor& t) {
  std::vector<float> v(t.numel());
  models::load_f32(v.data(), t);
  return v;
}

// The unsharded, unpadded tensor of a shard, gathered over the tp group.
std::vector<float> gather(const models::Parameter& p, const core::Tensor& t, comms::Communicator& tp) {
  std::vector<float> local = to_floats(t);
  if (!p.sharded()) return local;
  const std::int64_t n = static_cast<std::int64_t>(local.size());
  std::vector<float> all(static_cast<std::size_t>(n * tp.size()));
  tp.allgather(local.data(), all.data(), n);
  const std::int64_t rows = t.shape()[0], cols = n / rows;
  if (p.shard.sharding == models::Sharding::dim0) {
    all.resize(static_cast<std::size_t>(p.shard.valid_extent * cols));  // padding dropped
    return all;
  }
  std::vector<float> full(all.size());  // [rows, tp * cols]
  for (int r = 0; r < tp.size(); ++r) {
    for (std::int64_t i = 0; i < rows; ++i) {
      std::memcpy(full.data() + i * cols * tp.size() + r * cols, all.data() + r * n + i * cols, sizeof(float) * cols);
    }
  }
  return full;
}

// ||a - b|| / max(||b||, floor) in double (0 when a == b).
// Note [Tensors that are zero in exact arithmetic]
// The key bias's gradient is zero in exact arithmetic (adding q . b_k to every score of a row
// leaves the softmax unchanged), so both runs hold rounding noise there (~1e-9) and its
// relative error means nothing; the same holds for the key bias's value, which only that noise
// moves. `floor` makes such tensors compare in absolute terms: 1e-3 x the global gradient norm
// for gradients, 1e-3 for values.
double relative_error(const std::vector<float>& a, const std::vector<float>& b, double floor = 0.0) {
  double diff = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    ref += double{b[i]} * b[i];
  }
  const double denominator = std::max(std::sqrt(ref), floor);
  if (denominator == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(diff) / denominator;
}

void expect_gradients_match(TrainingRun& grid_run, TrainingRun& alone, comms::Communicator& tp, double tolerance,
                            const std::string& when, double grad_norm) {
  auto& got = grid_run.model.parameters();
  auto& want = alone.model.parameters();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto g = gather(got[i], got[i].grad, tp);
    const auto w = gather(want[i], want[i].grad, tp);  // whole already when run alone
    ASSERT_EQ(g.size(), w.size()) << got[i].name;
    EXPECT_LE(relative_error(g, w, 1e-3 * grad_norm), tolerance) << when << ": gradient of " << got[i].name;
  }
}

void expect_values_match(TrainingRun& grid_run, TrainingRun& alone, comms::Communicator& tp, double tolerance) {
  auto& got = grid_run.model.parameters();
  auto& want = alone.model.parameters();
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(relative_error(gather(got[i], got[i].value, tp), gather(want[i], want[i].value, tp), 1e-3), tolerance)
        << "value of " << got[i].name;
  }
}

struct GridCase {
  int tp;
  bool dropout;
  std::string options;  // "", "full", "selective", "flash"
};

std::vector<GridCase> grid_cases() {
  const int P = comms::make_world_communicator()->size();
  std::vector<GridCase> cases;
  for (int tp : {2, 4}) {
    if (tp > P || P % tp != 0) continue;
    for (bool dropout : {false, true}) cases.push_back({tp, dropout, ""});
  }
  // Recomputation reruns the layers' collectives; flash splits by heads.
  for (const char* o : {"full", "selective", "flash"}) cases.push_back({2, true, o});
  return cases;
}

void apply(Config& c, const std::string& options) {
  if (options == "full" || options == "selective") c.memory.recompute = options;
  if (options == "flash") c.memory.attention = "flash";
}

// tp x dp on the world against one process: 3 steps at a learning rate that moves the weights.
TEST(TensorParallel, GridMatchesOneProcess) {
  for (const GridCase& k : grid_cases()) {
    const std::string name =
        "tp " + std::to_string(k.tp) + (k.dropout ? " dropout" : "") + (k.options.empty() ? "" : " " + k.options);
    Config c = grid_config(k.dropout);
    apply(c, k.options);
    Config tp_config = c;
    tp_config.parallel.tensor_model_parallel_size = k.tp;
    comms::ProcessGrid grid(comms::make_world_communicator(), k.tp);
    TrainingRun alone(c, nullptr), sharded(tp_config, &grid);
    for (std::int64_t step = 0; step < 3; ++step) {
      const StepResult want = alone.step(step);
      const StepResult got = sharded.step(step);
      const std::string when = name + " step " + std::to_string(step);
      EXPECT_EQ(got.num_masked, want.num_masked) << when;
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * want.loss) << when;
      EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-5 * want.grad_norm) << when;
      expect_gradients_match(sharded, alone, grid.tp(), 1e-5, when, want.grad_norm);
    }
    expect_values_match(sharded, alone, grid.tp(), 1e-5);
    // Evaluation: the same loss and the same count of correct argmax predictions.
    const EvalResult e_want = evaluate_model(alone.model, alone.validation, *alone.dp, 4, 4);
    const EvalResult e_got = evaluate_model(sharded.model, sharded.validation, grid.dp(), 4, 4);
    EXPECT_NEAR(e_got.loss, e_want.loss, 1e-6 * e_want.loss) << name;
    EXPECT_EQ(e_got.num_masked, e_want.num_masked) << name;
    EXPECT_NEAR(e_got.accuracy, e_want.accuracy, 1e-12) << name;
  }
}

// A vocabulary that no tp size divides: padded rows never reach the loss, the gradients or
// the predictions. 1001 pads to 1024 (rank 1 holds 489 tokens and 23 padding rows); with
// make_vocab_size_divisible_by = 1, 63 pads to 64 (one padding row).
TEST(TensorParallel, OddVocabularyMatchesOneProcess) {
  for (auto [vocab, divisible_by] : {std::pair{1001, 128}, std::pair{63, 1}}) {
    Config c = grid_config(true);
    c.model.vocab_size = vocab;
    Config tp_config = c;
    tp_config.parallel.tensor_model_parallel_size = 2;
    tp_config.parallel.make_vocab_size_divisible_by = divisible_by;
    comms::ProcessGrid grid(comms::make_world_communicator(), 2);
    TrainingRun alone(c, nullptr), sharded(tp_config, &grid);
    EXPECT_EQ(sharded.model.num_parameters(), alone.model.num_parameters());
    for (std::int64_t step = 0; step < 2; ++step) {
      const StepResult want = alone.step(step);
      const StepResult got = sharded.step(step);
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * want.loss) << vocab;
      expect_gradients_match(sharded, alone, grid.tp(), 1e-5, "vocab " + std::to_string(vocab), want.grad_norm);
    }
    // Padded rows of the word table and the decoder bias are still exactly zero.
    for (const auto& p : sharded.model.parameters()) {
      if (p.shard.sharding != models::Sharding::dim0 || p.shard.full_extent == p.shard.valid_extent) {
        continue;
      }
      const auto v = to_floats(p.value);
      const std::int64_t rows = p.value.shape()[0], cols = p.value.numel() / rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        if (p.shard.offset + r < p.shard.valid_extent) continue;
        for (std::int64_t j = 0; j < cols; ++j) ASSERT_EQ(v[r * cols + j], 0.0f) << p.name;
      }
    }
    // Log-probabilities over the whole vocabulary at a few positions, gathered.
    const core::MlmBatch batch = alone.validation.batch(0, 2);
    const std::vector<std::int32_t> positions = {0, 5, 17};
    const auto want = alone.model.predict_log_probs(batch, positions);
    const auto got = sharded.model.predict_log_probs(batch, positions);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(relative_error(got, want), 1e-5) << vocab;
  }
}

// Replicated parameters (LayerNorms, row-parallel biases, position and type embeddings, the
// MLM transform) must not drift apart across a tp group (Megatron-LM #1446): after several
// steps every rank's copy of each, and its gradient, is bitwise rank 0's.
TEST(TensorParallel, ReplicatedParametersStayBitwiseEqual) {
  Config c = grid_config(true);
  c.parallel.tensor_model_parallel_size = 2;
  comms::ProcessGrid grid(comms::make_world_communicator(), 2);
  TrainingRun sharded(c, &grid);
  for (std::int64_t step = 0; step < 4; ++step) sharded.step(step);
  int replicated = 0;
  for (const auto& p : sharded.model.parameters()) {
    if (p.sharded()) continue;
    ++replicated;
    for (const core::Tensor* t : {&p.value, &p.grad}) {
      const auto mine = to_floats(*t);
      const std::int64_t n = static_cast<std::int64_t>(mine.size());
      std::vector<float> all(static_cast<std::size_t>(n * grid.tp_size()));
      grid.tp().allgather(mine.data(), all.data(), n);
      for (int r = 1; r < grid.tp_size(); ++r) {
        EXPECT_EQ(std::memcmp(all.data(), all.data() + r * n, sizeof(float) * n), 0)
            << p.name << (t == &p.grad ? " gradient" : " value") << " on tp rank " << r;
      }
    }
  }
  // 2 layers x (2 LayerNorms x 2 + 2 row-parallel biases) + embeddings (position, type, LN 2)
  // + MLM transform (dense weight and bias, LN 2).
  EXPECT_EQ(replicated, 2 * 6 + 4 + 4);
}

// The bytes a tp rank hands to the tensor-parallel collectives in one step, by the layers'
// placement of Megatron's f and g: per micro-batch of N = B x T tokens and M masked ones, the
// embedding's all-reduce and per layer g twice forward and f twice backward, each N x C floats;
// the head's f (M x C floats); the vocabulary-parallel cross-entropy's row maxima (M floats),
// sums and target logits (2M doubles) and argmax (M doubles); once per step the gradient
// norm's shard sum (one double).
TEST(TensorParallel, CollectiveBytesFollowTheLayers) {
  Config c = grid_config(true);
  c.parallel.tensor_model_parallel_size = 2;
  comms::ProcessGrid grid(comms::make_world_communicator(), 2);
  comms::CountingCommunicator counted(grid.tp());
  const std::int64_t C = c.model.hidden_size, L = c.model.num_hidden_layers;
  TrainingRun run(c, &grid, &counted);
  run.step(0);
  std::int64_t expected = 8;
  for (int a = 0; a < run.plan.accumulation_steps(); ++a) {
    const auto batch = run.data.batch(run.plan.first_sample(0, a), run.plan.micro_batch_size);
    const std::int64_t N = std::int64_t{batch.batch_size} * batch.seq_length;
    const std::int64_t M = static_cast<std::int64_t>(batch.masked_positions.size());
    expected += 4 * N * C * (1 + 4 * L) + 4 * M * C + 4 * M + 16 * M + 8 * M;
  }
  EXPECT_EQ(counted.counts().bytes, expected);
}

// Sequence parallelism (Korthikanti et al. 2022) changes where LayerNorm, dropout and the
// residual adds run, not what they compute: the same losses and gradients as tensor
// parallelism without it, within 1e-6 norm-relative error per tensor, with dropout on (masks
// keyed by global token) and with full recompute (the layer reruns its gathers).
TEST(TensorParallel, SequenceParallelMatchesTensorParallel) {
  for (const std::string options : {"", "full", "selective"}) {
    Config c = grid_config(true);
    apply(c, options);
    c.parallel.tensor_model_parallel_size = 2;
    Config sp_config = c;
    sp_config.parallel.sequence_parallel = true;
    comms::ProcessGrid grid(comms::make_world_communicator(), 2);
    TrainingRun tp(c, &grid), sp(sp_config, &grid);
    for (std::int64_t step = 0; step < 3; ++step) {
      const StepResult want = tp.step(step);
      const StepResult got = sp.step(step);
      const std::string when = "sequence parallel " + options + " step " + std::to_string(step);
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * want.loss) << when;
      EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-6 * want.grad_norm) << when;
      expect_gradients_match(sp, tp, grid.tp(), 1e-6, when, want.grad_norm);
    }
    expect_values_match(sp, tp, grid.tp(), 1e-6);
    const EvalResult e_want = evaluate_model(tp.model, tp.validation, grid.dp(), 4, 4);
    const EvalResult e_got = evaluate_model(sp.model, sp.validation, grid.dp(), 4, 4);
    EXPECT_NEAR(e_got.loss, e_want.loss, 1e-6 * e_want.loss);
    EXPECT_EQ(e_got.accuracy, e_want.accuracy);
    // A prompt whose length the group does not divide (fill-mask's) is padded, not refused.
    core::MlmBatch prompt;
    prompt.batch_size = 1;
    prompt.seq_length = 13;
    for (int t = 0; t < 13; ++t) prompt.input_ids.push_back((t * 7 + 3) % c.model.vocab_size);
    const std::vector<std::int32_t> at = {2, 7, 12};
    const auto lp_want = tp.model.predict_log_probs(prompt, at);
    const auto lp_got = sp.model.predict_log_probs(prompt, at);
    ASSERT_EQ(lp_got.size(), lp_want.size());
    EXPECT_LE(relative_error(lp_got, lp_want), 1e-5) << options;
  }
}

// The allocation trace of every rank's training steps and evaluation.
std::vector<memory::TraceEvent> rank_trace(const Config& c, comms::ProcessGrid& grid, bool dry) {
  std::shared_ptr<memory::CachingAllocator> alloc =
      dry ? make_dry_run_allocator(c.memory, std::size_t{1} << 32, "simulated") : make_model_allocator(c.memory);
  memory::TraceRecorder recorder;
  alloc->set_event_sink(recorder.sink());
  {
    TrainingRun run(c, &grid, nullptr, alloc, dry);
    run.step(0);
    run.step(1);
    evaluate_model(run.model, run.validation, grid.dp(), 4, 2);
  }
  alloc->set_event_sink(nullptr);
  return recorder.events();
}

// design.md, "Execution modes": a dry run allocates what the compute run allocates, event for
// event, on every rank of the grid, under tensor and sequence parallelism, 16-bit storage and
// recompute (the tp collectives' staging lives in the workspace, outside the allocator).
TEST(TensorParallel, DryRunTraceEqualsTheComputeTraceOnEveryRank) {
  struct Setting {
    bool sp;
    const char* dtype;
    const char* recompute;
  };
  for (const Setting& k : {Setting{false, "fp32", "none"}, Setting{true, "fp32", "none"},
                           Setting{false, "bf16", "full"}, Setting{true, "fp16", "selective"}}) {
    Config c = grid_config(true);
    c.parallel.tensor_model_parallel_size = 2;
    c.parallel.sequence_parallel = k.sp;
    c.precision.dtype = k.dtype;
    c.memory.recompute = k.recompute;
    comms::ProcessGrid grid(comms::make_world_communicator(), 2);
    const auto real = rank_trace(c, grid, false);
    const auto dry = rank_trace(c, grid, true);
    const std::string name =
        std::string(k.dtype) + " " + k.recompute + (k.sp ? " sp" : "") + " rank " + std::to_string(grid.world().rank());
    testing::expect_same_trace(real, dry, name, 100);
  }
}

// 16-bit storage under tp: the all-reduces run on the f32 views, and the run follows the
// tp = 1 bf16 run to bf16 rounding.
TEST(TensorParallel, Bf16FollowsOneProcess) {
  Config c = grid_config(true);
  c.precision.dtype = "bf16";
  Config tp_config = c;
  tp_config.parallel.tensor_model_parallel_size = 2;
  comms::ProcessGrid grid(comms::make_world_communicator(), 2);
  TrainingRun alone(c, nullptr), sharded(tp_config, &grid);
  for (std::int64_t step = 0; step < 3; ++step) {
    const StepResult want = alone.step(step);
    const StepResult got = sharded.step(step);
    EXPECT_NEAR(got.loss, want.loss, 1e-2 * want.loss) << step;
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 5e-2 * want.grad_norm) << step;
  }
}

}  // namespace
}  // namespace memtrain::train
