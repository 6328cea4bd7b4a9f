#include "runtime/train/plan_step.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "memory/tag_registry.hpp"
#include "memory/trace_recorder.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/data/special_tokens.hpp"
#include "runtime/train/batch_plan.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/train/model_options_from_config.hpp"
#include "runtime/train/optimizer.hpp"

namespace memtrain::train {
namespace {

// Simulated devices hand out addresses only, so "no limit" costs nothing: 1 PiB.
constexpr std::size_t kUnlimitedBytes = std::size_t{1} << 50;

std::int64_t current_bytes(const memory::MemoryStats& stats, memory::TagId tag) {
  const auto it = stats.per_tag.find(tag);
  return it == stats.per_tag.end() ? 0 : it->second.requested_bytes.current;
}

std::vector<memory::TraceOp> to_trace_ops(const std::vector<memory::TraceEvent>& events) {
  std::vector<memory::TraceOp> ops;
  ops.reserve(events.size());
  const auto& registry = memory::tag_registry();
  for (const auto& e : events) {
    if (e.kind != memory::TraceEventKind::alloc && e.kind != memory::TraceEventKind::free) continue;
    memory::TraceOp op;
    op.kind = e.kind == memory::TraceEventKind::alloc ? memory::TraceOp::Kind::alloc
                                                      : memory::TraceOp::Kind::free;
    op.id = std::to_string(e.allocation_id);
    op.bytes = static_cast<std::size_t>(e.bytes);
    op.stream = e.stream;
    if (e.kind == memory::TraceEventKind::alloc && e.tag != memory::kUntagged) op.tag = registry.name(e.tag);
    op.line = ops.size() + 1;
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace

models::MlmBatch synthetic_batch(const Config& config, int batch_size, int index) {
  const int T = config.data.seq_length;
  const int V = config.model.vocab_size;
  const int masked_per_row =
      std::clamp(static_cast<int>(std::lround(config.data.mlm_probability * T)), 1, T);
  models::MlmBatch b;
  b.batch_size = batch_size;
  b.seq_length = T;
  b.first_sample = static_cast<std::uint64_t>(index) * static_cast<std::uint64_t>(batch_size);
  const auto n = static_cast<std::size_t>(batch_size) * static_cast<std::size_t>(T);
  b.input_ids.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    b.input_ids[i] = data::kFirstOrdinaryId +
                     static_cast<std::int32_t>(i % static_cast<std::size_t>(std::max(1, V - data::kFirstOrdinaryId)));
  }
  b.token_type_ids.assign(n, 0);
  b.attention_mask.assign(n, 1.0f);
  for (int row = 0; row < batch_size; ++row) {
    for (int j = 0; j < masked_per_row; ++j) {
      const int t = static_cast<int>((static_cast<long long>(2 * j + 1) * T) / (2LL * masked_per_row));
      const int flat = row * T + t;
      b.masked_positions.push_back(flat);
      b.masked_labels.push_back(b.input_ids[static_cast<std::size_t>(flat)]);
      b.input_ids[static_cast<std::size_t>(flat)] = data::kSpecialTokens.mask;
    }
  }
  return b;
}

StepMeasurement measure_step(const Config& config, int world_size) {
  const auto& tc = config.training;
  const BatchPlan plan = BatchPlan::make(tc.global_batch_size, tc.micro_batch_size, world_size, 0);
  MemoryConfig memory_config = config.memory;
  memory_config.capacity = 0;  // the whole demand; capacities are applied by replay
  memory_config.limit = 0;
  memory_config.reservation = 0;

  memory::TraceRecorder trace;  // outlives the allocator's sink
  auto allocator = make_dry_run_allocator(memory_config, kUnlimitedBytes, "simulated plan device");
  allocator->set_event_sink(trace.sink());
  StepMeasurement m;
  {
    core::Context ctx(allocator);
    ctx.set_dry_run(true);
    models::BertForMaskedLM model(config.model, ctx, model_options(config));
    AdamW optimizer(model.parameters(), ctx,
                    AdamWOptions{tc.adam_beta1, tc.adam_beta2, tc.adam_eps, tc.weight_decay});
    m.parameters = model.num_parameters();
    m.micro_batch_size = plan.micro_batch_size;
    m.accumulation_steps = plan.accumulation_steps();
    model.zero_grad();
    const auto batch = synthetic_batch(config, plan.micro_batch_size, 0);
    const int masked = static_cast<int>(batch.masked_positions.size()) * plan.accumulation_steps();
    for (int a = 0; a < plan.accumulation_steps(); ++a) {
      models::MlmBatch micro = batch;
      micro.first_sample = plan.first_sample(0, a);
      model.forward_backward(micro, 1.0f / static_cast<float>(masked), tc.seed, 0);
    }
    optimizer.clip_grad_norm(tc.grad_clip);
    optimizer.step(tc.lr);

    m.stats = allocator->stats();
    const auto& tags = core::tags();
    m.model_state.parameter = current_bytes(m.stats, tags.parameter);
    m.model_state.gradient = current_bytes(m.stats, tags.gradient);
    m.model_state.master_weight = current_bytes(m.stats, tags.master_weight);
    m.model_state.optimizer_state = current_bytes(m.stats, tags.optimizer_state);
  }
  const auto& registry = memory::tag_registry();
  for (const auto& [tag, s] : m.stats.per_tag) {
    m.per_tag_peak_bytes[tag == memory::kUntagged ? "untagged" : registry.name(tag)] =
        s.requested_bytes.peak;
  }
  m.activation_peak_bytes = m.per_tag_peak_bytes["activation"];
  m.trace = to_trace_ops(trace.events());
  return m;
}

std::int64_t measure_activation_bytes_per_layer(const Config& config, int world_size) {
  if (config.model.num_hidden_layers < 2) return 0;
  Config fewer = config;
  fewer.model.num_hidden_layers -= 1;
  // recompute_num_layers must stay a valid count for the smaller model.
  fewer.memory.recompute_num_layers =
      std::min(fewer.memory.recompute_num_layers, fewer.model.num_hidden_layers);
  return measure_step(config, world_size).activation_peak_bytes -
         measure_step(fewer, world_size).activation_peak_bytes;
}

memory::ReplayReport replay_step(const StepMeasurement& step, const std::string& policy,
                                 std::size_t capacity_bytes) {
  return memory::replay_trace(step.trace, policy, std::max<std::size_t>(capacity_bytes, 1),
                              "plan step");
}

}  // namespace memtrain::train
