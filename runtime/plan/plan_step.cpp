#include "runtime/plan/plan_step.hpp"

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "comms/communicator.hpp"
#include "comms/process_grid.hpp"
#include "memory/tag_registry.hpp"
#include "memory/trace_recorder.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/context.hpp"
#include "runtime/core/tags.hpp"
#include "runtime/data/mlm_dataset.hpp"
#include "runtime/train/batch_plan.hpp"
#include "runtime/train/evaluator.hpp"
#include "runtime/train/loss_scaler.hpp"
#include "runtime/train/async_checkpointer.hpp"
#include "runtime/train/make_optimizer.hpp"
#include "runtime/train/model_memory.hpp"
#include "runtime/config/model_options_from_config.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/train_step.hpp"
#include "runtime/train/training_data.hpp"
#include "runtime/train/training_job.hpp"

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
    op.kind = e.kind == memory::TraceEventKind::alloc ? memory::TraceOp::Kind::alloc : memory::TraceOp::Kind::free;
    op.id = std::to_string(e.allocation_id);
    op.bytes = static_cast<std::size_t>(e.bytes);
    op.stream = e.stream;
    if (e.kind == memory::TraceEventKind::alloc && e.tag != memory::kUntagged) op.tag = registry.name(e.tag);
    op.line = ops.size() + 1;
    ops.push_back(std::move(op));
  }
  return ops;
}

// Peak requested bytes of `tag` live at an event inside one of `windows` (event index ranges
// [first, last)); blocks allocated outside the windows count while they live.
std::int64_t tag_peak_within(const std::vector<memory::TraceEvent>& events, memory::TagId tag,
                             const std::vector<std::pair<std::size_t, std::size_t>>& windows) {
  std::unordered_map<std::uint64_t, std::int64_t> live;  // allocation id -> bytes
  std::int64_t current = 0, peak = 0;
  std::size_t w = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.kind == memory::TraceEventKind::alloc && e.tag == tag) {
      live[e.allocation_id] = static_cast<std::int64_t>(e.bytes);
      current += static_cast<std::int64_t>(e.bytes);
    } else if (e.kind == memory::TraceEventKind::free) {
      const auto it = live.find(e.allocation_id);
      if (it != live.end()) {
        current -= it->second;
        live.erase(it);
      }
    }
    while (w < windows.size() && i >= windows[w].second) ++w;
    if (w < windows.size() && i >= windows[w].first) peak = std::max(peak, current);
  }
  return peak;
}

}  // namespace

std::int64_t measured_steps(std::int64_t max_steps) {
  return std::clamp<std::int64_t>(max_steps, 1, kMaxMeasuredSteps);
}

StepMeasurement measure_step(const Config& config, int world_size) {
  const auto& tc = config.training;
  // Rank 0 of a tp x dp grid: it allocates what every rank of the grid allocates (the shards
  // are equal), including the staging buffers of its data-parallel group.
  auto grid = comms::ProcessGrid::simulated(world_size, config.parallel.tensor_model_parallel_size);
  comms::Communicator& world = grid.dp();
  const BatchPlan plan = BatchPlan::make(tc.global_batch_size, tc.micro_batch_size, grid.dp_size(), 0);
  Config job_config = config;
  job_config.memory.capacity = 0;  // the whole demand; capacities are applied by replay
  job_config.memory.limit = 0;
  job_config.memory.reservation = 0;
  data::DataConfig data_config = config.data;
  data_config.dynamic_seq_length = false;  // every row full length
  const auto data = data::MlmDataset::mock(data_config, config.model.vocab_size, tc.seed);
  const auto validation = data::MlmDataset::mock(data_config, config.model.vocab_size, validation_seed(tc.seed));

  memory::TraceRecorder trace;  // outlives the job: its destruction frees are in the trace
  StepMeasurement m;
  std::vector<std::pair<std::size_t, std::size_t>> training_windows;  // event index ranges
  {
    // The trainer's job, built by the trainer's builder (Note [One order of construction]).
    std::ostringstream discard;
    TrainingJob job(job_config, grid,
                    JobPlacement{SimulatedDevice{kUnlimitedBytes, "simulated plan device"}, &trace, {}}, discard);
    m.loss_scale = job.scaler.config();
    m.parameters = job.model.num_parameters();
    for (const auto& p : job.model.parameters()) m.parameters_on_rank += p.value.numel();
    m.micro_batch_size = plan.micro_batch_size;
    m.accumulation_steps = plan.accumulation_steps();
    // Note [A plan measures the trainer's first steps and evaluations]
    const auto evaluate = [&] { evaluate_model(job.model, validation, world, tc.micro_batch_size, tc.eval_steps); };
    evaluate();  // the trainer evaluates before the first step
    const std::int64_t steps = measured_steps(tc.max_steps);
    for (std::int64_t step = 1; step <= steps; ++step) {
      const std::size_t first_event = trace.size();
      train_step(job.model, data, plan, world, *job.optimizer, step - 1, StepSettings{tc.lr, tc.grad_clip, tc.seed},
                 &job.scaler, &job.gradient_sync, &grid.world());
      training_windows.emplace_back(first_event, trace.size());
      if (step % tc.eval_interval == 0 || step == steps) evaluate();
    }
    m.steps = steps;

    m.stats = job.allocator->stats();
    const auto& tags = core::tags();
    m.model_state.parameter = current_bytes(m.stats, tags.parameter);
    m.model_state.gradient = current_bytes(m.stats, tags.gradient);
    m.model_state.master_weight = current_bytes(m.stats, tags.master_weight);
    m.model_state.optimizer_state = current_bytes(m.stats, tags.optimizer_state);
  }
  const auto& registry = memory::tag_registry();
  for (const auto& [tag, s] : m.stats.per_tag) {
    m.per_tag_peak_bytes[tag == memory::kUntagged ? "untagged" : registry.name(tag)] = s.requested_bytes.peak;
  }
  m.activation_peak_bytes = tag_peak_within(trace.events(), core::tags().activation, training_windows);
  m.trace = to_trace_ops(trace.events());
  return m;
}

std::int64_t measure_activation_bytes_per_layer(const Config& config, int world_size, const StepMeasurement& full) {
  if (config.model.num_hidden_layers < 2) return 0;
  Config fewer = config;
  fewer.model.num_hidden_layers -= 1;
  // recompute_num_layers must stay a valid count for the smaller model.
  fewer.memory.recompute_num_layers = std::min(fewer.memory.recompute_num_layers, fewer.model.num_hidden_layers);
  return full.activation_peak_bytes - measure_step(fewer, world_size).activation_peak_bytes;
}

memory::ReplayReport replay_step(const StepMeasurement& step, const std::string& policy, std::size_t capacity_bytes) {
  return memory::replay_trace(step.trace, policy, std::max<std::size_t>(capacity_bytes, 1), "plan step");
}

}  // namespace memtrain::train
