// What 16-bit storage does to a step's memory, measured on the real allocator in dry runs
// (design.md, "Execution modes"), against closed forms: bytes per parameter per tag, the
// activation peak halved, and the dry-run allocation trace equal to the compute run's.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "memory/caching_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/simulated_resource.hpp"
#include "memory/trace_recorder.hpp"
#include "models/bert_for_masked_lm.hpp"
#include "runtime/core/tags.hpp"
#include "tests/models/bert_test_util.hpp"

namespace memtrain::models {
namespace {

using core::DType;

BertConfig config() {
  BertConfig c;
  c.vocab_size = 128;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 256;
  c.max_position_embeddings = 64;
  c.hidden_dropout_prob = 0.1f;
  c.attention_probs_dropout_prob = 0.1f;
  return c;
}

struct Step {
  memory::MemoryStats stats;
  std::vector<memory::TraceEvent> events;
  std::int64_t num_parameters = 0;
  std::size_t workspace_bytes = 0;
};

Step one_step(ModelOptions options, bool dry_run) {
  std::shared_ptr<memory::MemoryResource> upstream;
  if (dry_run) {
    upstream = std::make_shared<memory::SimulatedResource>(std::size_t{1} << 32, "simulated");
  } else {
    upstream = std::make_shared<memory::HostResource>();
  }
  auto alloc = std::make_shared<memory::CachingAllocator>(upstream);
  memory::TraceRecorder recorder;
  alloc->set_event_sink(recorder.sink());
  Step r;
  {
    core::Context ctx(alloc);
    ctx.set_dry_run(dry_run);
    BertForMaskedLM model(config(), ctx, options);
    model.init_parameters(5);
    r.num_parameters = model.num_parameters();
    model.forward_backward(memtrain::testing::synthetic_batch(4, 32, 128, 0), 0.05f, 1, 1);
    r.stats = alloc->stats();
    r.workspace_bytes = ctx.workspace().reserved_bytes();
  }
  alloc->set_event_sink(nullptr);
  r.events = recorder.events();
  return r;
}

std::int64_t current(const memory::MemoryStats& s, memory::TagId tag) {
  auto it = s.per_tag.find(tag);
  return it == s.per_tag.end() ? 0 : it->second.requested_bytes.current;
}

std::int64_t activation_peak(const memory::MemoryStats& s) {
  return s.per_tag.at(core::tags().activation).requested_bytes.peak;
}

ModelOptions with(DType d, bool fp32_grads = false) {
  ModelOptions o;
  o.compute_dtype = d;
  o.fp32_grad_accumulation = fp32_grads;
  return o;
}

// Mixed precision (Micikevicius et al. 2018, sec. 3.1): 16-bit weights and gradients plus an
// fp32 master: 2 + 2 + 4 bytes per parameter (2 + 4 + 4 with fp32 gradient accumulation);
// fp32 training keeps 4 + 4 and no master.
TEST(MixedPrecisionMemory, ParameterBytesPerTagAreTheClosedForm) {
  const auto& t = core::tags();
  struct Expect {
    ModelOptions options;
    std::int64_t value, grad, master;
  };
  for (const Expect& e : {Expect{with(DType::f32), 4, 4, 0}, Expect{with(DType::f16), 2, 2, 4},
                          Expect{with(DType::bf16), 2, 2, 4}, Expect{with(DType::bf16, true), 2, 4, 4}}) {
    const Step s = one_step(e.options, /*dry_run=*/true);
    const std::int64_t n = s.num_parameters;
    SCOPED_TRACE(core::dtype_name(e.options.compute_dtype));
    EXPECT_EQ(current(s.stats, t.parameter), e.value * n);
    EXPECT_EQ(current(s.stats, t.gradient), e.grad * n);
    EXPECT_EQ(current(s.stats, t.master_weight), e.master * n);
  }
}

// Every activation is stored in 16 bits except LayerNorm's f32 mean and rstd ([N] each, 8
// bytes per token per LayerNorm against hundreds of bytes per token of the rest), so the
// activation peak of a bf16 step is half the fp32 one plus under 2 % (C = 64 here).
TEST(MixedPrecisionMemory, ActivationPeakOfABf16StepIsHalfTheFp32One) {
  const double fp32 = activation_peak(one_step(with(DType::f32), true).stats);
  const double bf16 = activation_peak(one_step(with(DType::bf16), true).stats);
  EXPECT_GE(bf16 / fp32, 0.5);
  EXPECT_LT(bf16 / fp32, 0.5 * 1.02);
}

// The conversions of 16-bit tensors to float use the context's workspace, never the allocator,
// so the allocator sees the same events, in the same order, with and without math.
TEST(MixedPrecisionMemory, DryRunTraceEqualsTheComputeTraceForF16) {
  const Step real = one_step(with(DType::f16), /*dry_run=*/false);
  const Step dry = one_step(with(DType::f16), /*dry_run=*/true);
  EXPECT_GT(real.workspace_bytes, 0u);
  EXPECT_EQ(dry.workspace_bytes, 0u);
  ASSERT_EQ(real.events.size(), dry.events.size());
  ASSERT_GT(real.events.size(), 0u);
  for (std::size_t i = 0; i < real.events.size(); ++i) {
    const auto& a = real.events[i];
    const auto& b = dry.events[i];
    ASSERT_TRUE(a.kind == b.kind && a.bytes == b.bytes && a.tag == b.tag && a.stream == b.stream &&
                a.allocation_id == b.allocation_id)
        << "event " << i << ": " << memory::to_string(a.kind) << " " << a.bytes << " B vs " << memory::to_string(b.kind)
        << " " << b.bytes << " B";
  }
  EXPECT_EQ(real.stats.allocated_bytes.peak, dry.stats.allocated_bytes.peak);
}

}  // namespace
}  // namespace memtrain::models
