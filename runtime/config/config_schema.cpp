#include "runtime/config/config_schema.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "memory/allocation_policy_registry.hpp"
#include "memory/shared_ledger.hpp"
#include "runtime/config/component_registry.hpp"
#include "runtime/config/config_value.hpp"

namespace memtrain::train {

namespace {

// Builders for the table. Each takes an accessor to the field inside a Config; `get` reuses it
// on a const Config (the accessor only forms a reference, it never writes).
template <class T>
using Field = T& (*)(Config&);

template <class T>
T& field_of(Field<T> f, const Config& c) {
  return f(const_cast<Config&>(c));
}

std::string int_range(long long lo, long long hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

KeySpec integer(std::string name, long long lo, long long hi, Field<int> f) {
  return {std::move(name), int_range(lo, hi),
          [=](Config& c, std::string_view t) { f(c) = static_cast<int>(parse_integer(t, lo, hi)); },
          [=](const Config& c) { return std::to_string(field_of(f, c)); }};
}

struct Range {
  double lo;
  bool lo_open;
  double hi;
  bool hi_open;
  std::string text;  // "a number in (0, 1)"
};

// T: the field's type. Held: the precision the value is used in, when narrower than the field
// (AdamW's kernels take lr, betas, eps and weight decay as float: a beta1 of 0.99999999 kept
// as a double would still reach them as 1 and train to NaN).
template <class T, class Held = T>
KeySpec real(std::string name, Range r, Field<T> f) {
  return {std::move(name), r.text,
          [=](Config& c, std::string_view t) {
            const double v = parse_real(t, r.lo, r.lo_open, r.hi, r.hi_open);
            const Held stored = static_cast<Held>(v);
            // A float field holds what the text rounds to: 1e-50 would become 0 and 1e39 inf,
            // and 0.99999999 would reach an open bound of 1. The rounded value must keep the range.
            const auto held = static_cast<double>(stored);
            if (v != 0.0 && held == 0.0) {  // "stored as 0" where 0 is allowed would read as no error
              throw ValueError("too small for single precision (it would be stored as 0, not as the value written)");
            }
            if (!std::isfinite(held) || (r.lo_open ? held <= r.lo : held < r.lo) ||
                (r.hi_open ? held >= r.hi : held > r.hi)) {
              throw ValueError("out of range in single precision (it would be stored as " + format_real(stored) + ")");
            }
            f(c) = static_cast<T>(v);
          },
          [=](const Config& c) { return format_real(field_of(f, c)); }};
}

KeySpec boolean(std::string name, Field<bool> f) {
  return {std::move(name), "true or false", [=](Config& c, std::string_view t) { f(c) = parse_bool(t); },
          [=](const Config& c) { return std::string(field_of(f, c) ? "true" : "false"); }};
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

KeySpec choice(std::string name, std::vector<std::string> allowed, std::vector<std::string> not_built,
               Field<std::string> f) {
  std::string expected = allowed.size() == 1 ? allowed[0] : "one of " + join(allowed, ", ");
  return {std::move(name), std::move(expected),
          [=](Config& c, std::string_view t) { f(c) = parse_choice(t, allowed, not_built); },
          [=](const Config& c) { return field_of(f, c); }};
}

KeySpec text(std::string name, std::string expected, Field<std::string> f) {
  return {std::move(name), std::move(expected),
          [=](Config& c, std::string_view t) {
            if (t.empty()) throw ValueError("has no value");
            f(c) = std::string(t);
          },
          [=](const Config& c) { return field_of(f, c); }};
}

// A byte size ("2GiB", "1.5GiB", a byte count) or 0 for unset.
KeySpec size_or_zero(std::string name, std::string expected, Field<std::size_t> f) {
  return {std::move(name), std::move(expected),
          [=](Config& c, std::string_view t) { f(c) = t == "0" ? 0 : parse_size(t); },
          [=](const Config& c) { return std::to_string(field_of(f, c)); }};
}

// Open and closed intervals as the messages print them.
const Range kProbability{0.0, false, 1.0, true, "a number in [0, 1)"};
const Range kPositive{0.0, true, 1e300, false, "a number > 0"};
const Range kNonNegative{0.0, false, 1e300, false, "a number >= 0"};
// A loss scale multiplies fp32 gradients and its reciprocal unscales them: both must be normal
// floats (below FLT_MIN, 1 / scale overflows to inf and the weights become NaN).
const Range kLossScale{1.1754943508222875e-38, false, 3.4028234663852886e+38, false,
                       "a number in [1.18e-38, 3.40e38] (a normal float)"};
const Range kBeta{0.0, false, 1.0, true, "a number in [0, 1)"};

// Planned names ("not supported yet") that no registered component has taken.
std::vector<std::string> not_registered(std::vector<std::string> planned, const std::vector<std::string>& registered) {
  std::erase_if(planned, [&](const std::string& n) { return std::count(registered.begin(), registered.end(), n) > 0; });
  return planned;
}

constexpr long long kMaxDim = 1 << 20;
constexpr long long kMaxSteps = 1'000'000'000;

std::vector<KeySpec> make_keys() {
  std::vector<KeySpec> k;
  // Top level.
  // cpu, or a CUDA device: "cuda" (device 0) or "cuda:N". Whether that device exists is a
  // property of the machine, not of the file: `memtrain train` checks it before anything starts.
  k.push_back({"device", "cpu, cuda or cuda:N (N an integer in [0, 1023])",
               [](Config& c, std::string_view t) {
                 if (t == "cpu" || t == "cuda") {
                   c.device = std::string(t);
                 } else if (t.starts_with("cuda:")) {
                   c.device = "cuda:" + std::to_string(parse_integer(t.substr(5), 0, 1023));
                 } else {
                   parse_choice(t, {"cpu", "cuda"}, {});  // throws "unknown value"
                 }
               },
               [](const Config& c) { return c.device; }});

  // model: Hugging Face BertConfig names (models/bert_config.hpp).
  k.push_back(integer("model.vocab_size", 8, 1 << 24, [](Config& c) -> int& { return c.model.vocab_size; }));
  k.push_back(integer("model.hidden_size", 1, kMaxDim, [](Config& c) -> int& { return c.model.hidden_size; }));
  k.push_back(integer("model.num_hidden_layers", 1, 1024, [](Config& c) -> int& { return c.model.num_hidden_layers; }));
  k.push_back(
      integer("model.num_attention_heads", 1, 1024, [](Config& c) -> int& { return c.model.num_attention_heads; }));
  k.push_back(
      integer("model.intermediate_size", 1, kMaxDim, [](Config& c) -> int& { return c.model.intermediate_size; }));
  k.push_back(integer("model.max_position_embeddings", 1, kMaxDim,
                      [](Config& c) -> int& { return c.model.max_position_embeddings; }));
  k.push_back(integer("model.type_vocab_size", 1, 1024, [](Config& c) -> int& { return c.model.type_vocab_size; }));
  k.push_back(real<float>("model.layer_norm_eps", {0.0, true, 1.0, true, "a number in (0, 1)"},
                          [](Config& c) -> float& { return c.model.layer_norm_eps; }));
  k.push_back(real<float>("model.hidden_dropout_prob", kProbability,
                          [](Config& c) -> float& { return c.model.hidden_dropout_prob; }));
  k.push_back(real<float>("model.attention_probs_dropout_prob", kProbability,
                          [](Config& c) -> float& { return c.model.attention_probs_dropout_prob; }));
  k.push_back(
      real<float>("model.initializer_range", kPositive, [](Config& c) -> float& { return c.model.initializer_range; }));

  // data (runtime/data/data_config.hpp).
  k.push_back(text("data.corpus", "kjv, a UTF-8 text file or a directory of .txt files",
                   [](Config& c) -> std::string& { return c.data.corpus; }));
  k.push_back(boolean("data.mock", [](Config& c) -> bool& { return c.data.mock; }));
  k.push_back(integer("data.seq_length", 8, kMaxDim, [](Config& c) -> int& { return c.data.seq_length; }));
  k.push_back(boolean("data.dynamic_seq_length", [](Config& c) -> bool& { return c.data.dynamic_seq_length; }));
  k.push_back(real<float>("data.mlm_probability", {0.0, true, 1.0, true, "a number in (0, 1)"},
                          [](Config& c) -> float& { return c.data.mlm_probability; }));
  k.push_back(choice("data.tokenizer_type", {"bpe", "unigram"}, {},
                     [](Config& c) -> std::string& { return c.data.tokenizer_type; }));
  k.push_back(text("data.cache_dir", "a directory path", [](Config& c) -> std::string& { return c.data.cache_dir; }));
  k.push_back(real<double>("data.validation_fraction", {0.0, true, 0.5, false, "a number in (0, 0.5]"},
                           [](Config& c) -> double& { return c.data.validation_fraction; }));

  // training.
  k.push_back(
      integer("training.micro_batch_size", 1, 1 << 20, [](Config& c) -> int& { return c.training.micro_batch_size; }));
  k.push_back(integer("training.global_batch_size", 1, 1 << 30,
                      [](Config& c) -> int& { return c.training.global_batch_size; }));
  k.push_back(integer("training.max_steps", 1, kMaxSteps, [](Config& c) -> int& { return c.training.max_steps; }));
  k.push_back(
      integer("training.lr_decay_steps", 0, kMaxSteps, [](Config& c) -> int& { return c.training.lr_decay_steps; }));
  k.push_back(real<double, float>("training.lr", kPositive, [](Config& c) -> double& { return c.training.lr; }));
  k.push_back(real<double>("training.min_lr", kNonNegative, [](Config& c) -> double& { return c.training.min_lr; }));
  k.push_back(
      integer("training.warmup_steps", 0, kMaxSteps, [](Config& c) -> int& { return c.training.warmup_steps; }));
  k.push_back(choice("training.lr_schedule", {"cosine", "linear", "constant"}, {},
                     [](Config& c) -> std::string& { return c.training.lr_schedule; }));
  k.push_back(real<double, float>("training.weight_decay", kNonNegative,
                                  [](Config& c) -> double& { return c.training.weight_decay; }));
  k.push_back(
      real<double, float>("training.adam_beta1", kBeta, [](Config& c) -> double& { return c.training.adam_beta1; }));
  k.push_back(
      real<double, float>("training.adam_beta2", kBeta, [](Config& c) -> double& { return c.training.adam_beta2; }));
  k.push_back(
      real<double, float>("training.adam_eps", kPositive, [](Config& c) -> double& { return c.training.adam_eps; }));
  k.push_back(real<double>("training.grad_clip", {0.0, false, 1e300, false, "a number >= 0 (0 disables clipping)"},
                           [](Config& c) -> double& { return c.training.grad_clip; }));
  k.push_back({"training.seed", "an integer in [0, 2^64)",
               [](Config& c, std::string_view t) { c.training.seed = parse_uint64(t); },
               [](const Config& c) { return std::to_string(c.training.seed); }});
  k.push_back(
      integer("training.log_interval", 1, kMaxSteps, [](Config& c) -> int& { return c.training.log_interval; }));
  k.push_back(
      integer("training.eval_interval", 1, kMaxSteps, [](Config& c) -> int& { return c.training.eval_interval; }));
  k.push_back(integer("training.eval_steps", 1, kMaxSteps, [](Config& c) -> int& { return c.training.eval_steps; }));
  k.push_back(integer("training.eval_micro_batch_size", 0, 1 << 20,
                      [](Config& c) -> int& { return c.training.eval_micro_batch_size; }));
  k.push_back(integer("training.num_threads", 0, 4096, [](Config& c) -> int& { return c.training.num_threads; }));
  // The registered optimizers and compressors (component_registry.hpp).
  k.push_back(choice("training.optimizer", optimizer_names(),
                     not_registered({"adam", "sgd", "lamb", "adafactor"}, optimizer_names()),
                     [](Config& c) -> std::string& { return c.training.optimizer; }));

  // precision: storage dtype of weights, activations and gradients; loss scaling for fp16.
  k.push_back(choice("precision.dtype", {"fp32", "fp16", "bf16"}, {},
                     [](Config& c) -> std::string& { return c.precision.dtype; }));
  k.push_back(boolean("precision.fp32_grad_accumulation",
                      [](Config& c) -> bool& { return c.precision.fp32_grad_accumulation; }));
  k.push_back(choice("precision.bf16_gemm", {"auto", "native", "fp32"}, {},
                     [](Config& c) -> std::string& { return c.precision.bf16_gemm; }));
  k.push_back(boolean("precision.allow_tf32", [](Config& c) -> bool& { return c.precision.allow_tf32; }));
  k.push_back(real<double>("precision.loss_scale.initial_scale", kLossScale,
                           [](Config& c) -> double& { return c.precision.loss_scale.initial_scale; }));
  k.push_back(real<double>("precision.loss_scale.growth_factor", {1.0, true, 1e300, false, "a number > 1"},
                           [](Config& c) -> double& { return c.precision.loss_scale.growth_factor; }));
  k.push_back(real<double>("precision.loss_scale.backoff_factor", {0.0, true, 1.0, true, "a number in (0, 1)"},
                           [](Config& c) -> double& { return c.precision.loss_scale.backoff_factor; }));
  k.push_back(integer("precision.loss_scale.growth_interval", 1, kMaxSteps,
                      [](Config& c) -> int& { return c.precision.loss_scale.growth_interval; }));
  k.push_back(integer("precision.loss_scale.hysteresis", 1, kMaxSteps,
                      [](Config& c) -> int& { return c.precision.loss_scale.hysteresis; }));
  k.push_back(real<double>("precision.loss_scale.min_loss_scale", kLossScale,
                           [](Config& c) -> double& { return c.precision.loss_scale.min_loss_scale; }));
  k.push_back(integer("precision.loss_scale.max_skipped_steps_at_min", 1, kMaxSteps,
                      [](Config& c) -> int& { return c.precision.loss_scale.max_skipped_steps_at_min; }));

  // memory: allocator policy and options (memory/allocator_options.hpp).
  k.push_back(
      choice("memory.policy", memory::policy_names(), {}, [](Config& c) -> std::string& { return c.memory.policy; }));
  k.push_back(boolean("memory.trace", [](Config& c) -> bool& { return c.memory.trace; }));
  k.push_back({"memory.max_split_size", "a size above 20MiB (such as 256MiB or a byte count), or unset",
               [](Config& c, std::string_view t) {
                 if (t == "unset") {
                   c.memory.max_split_size = SIZE_MAX;
                   return;
                 }
                 const std::size_t bytes = parse_size(t);
                 // Note [max_split_size lower bound]
                 // As PyTorch (max_split_size_mb > 20) and MEMTRAIN_ALLOC_CONF: at or below the
                 // 20 MiB large-segment size the option would stop splitting blocks that exist to
                 // be split, which is not what it is for.
                 if (bytes <= (std::size_t{20} << 20)) throw ValueError("out of range");
                 c.memory.max_split_size = bytes;
               },
               [](const Config& c) {
                 return c.memory.max_split_size == SIZE_MAX ? std::string("unset")
                                                            : std::to_string(c.memory.max_split_size);
               }});
  k.push_back(real<double>("memory.garbage_collection_threshold",
                           {0.0, false, 1.0, true, "a number in [0, 1) (0 = off)"},
                           [](Config& c) -> double& { return c.memory.garbage_collection_threshold; }));
  k.push_back(boolean("memory.expandable_segments", [](Config& c) -> bool& { return c.memory.expandable_segments; }));
  k.push_back(boolean("memory.host_huge_pages", [](Config& c) -> bool& { return c.memory.host_huge_pages; }));
  k.push_back({"memory.capacity", "a size such as 40GiB or a byte count (0 = the device's capacity)",
               [](Config& c, std::string_view t) { c.memory.capacity = t == "0" ? 0 : parse_size(t); },
               [](const Config& c) { return std::to_string(c.memory.capacity); }});
  k.push_back(size_or_zero("memory.limit", "a size such as 2GiB or a byte count (0 = no limit)",
                           [](Config& c) -> std::size_t& { return c.memory.limit; }));
  k.push_back(size_or_zero("memory.reservation", "a size such as 1GiB or a byte count (0 = no reservation)",
                           [](Config& c) -> std::size_t& { return c.memory.reservation; }));
  k.push_back({"memory.ledger", "a name of 1 to 64 characters from [A-Za-z0-9._-]",
               [](Config& c, std::string_view t) {
                 if (!memory::SharedLedger::valid_name(t)) throw ValueError("is not a ledger name");
                 c.memory.ledger = std::string(t);
               },
               [](const Config& c) { return c.memory.ledger; }});
  k.push_back(integer("memory.release_timeout", 0, 3600, [](Config& c) -> int& { return c.memory.release_timeout; }));
  k.push_back(
      choice("memory.admission", {"fail", "wait"}, {}, [](Config& c) -> std::string& { return c.memory.admission; }));
  k.push_back(integer("memory.priority", -1000, 1000, [](Config& c) -> int& { return c.memory.priority; }));
  k.push_back(integer("memory.priority_aging", 0, 86400, [](Config& c) -> int& { return c.memory.priority_aging; }));
  k.push_back(boolean("memory.elastic", [](Config& c) -> bool& { return c.memory.elastic; }));
  k.push_back(integer("memory.elastic_min_micro_batch", 1, 1 << 20,
                      [](Config& c) -> int& { return c.memory.elastic_min_micro_batch; }));
  // Activation checkpointing (Megatron-LM --recompute-granularity/-method/-num-layers) and the
  // attention implementation.
  k.push_back(choice("memory.recompute", {"none", "selective", "full", "auto"}, {},
                     [](Config& c) -> std::string& { return c.memory.recompute; }));
  k.push_back(choice("memory.recompute_method", {"uniform", "block"}, {},
                     [](Config& c) -> std::string& { return c.memory.recompute_method; }));
  k.push_back(
      integer("memory.recompute_num_layers", 0, 1024, [](Config& c) -> int& { return c.memory.recompute_num_layers; }));
  k.push_back(size_or_zero("memory.budget", "a size such as 30GiB or a byte count (0 = unset)",
                           [](Config& c) -> std::size_t& { return c.memory.budget; }));
  k.push_back(choice("memory.attention", {"standard", "flash"}, {},
                     [](Config& c) -> std::string& { return c.memory.attention; }));

  // parallel: the data-parallel size is the rank count divided by tensor_model_parallel_size.
  k.push_back(integer("parallel.tensor_model_parallel_size", 1, 4096,
                      [](Config& c) -> int& { return c.parallel.tensor_model_parallel_size; }));
  k.push_back(boolean("parallel.sequence_parallel", [](Config& c) -> bool& { return c.parallel.sequence_parallel; }));
  k.push_back(integer("parallel.make_vocab_size_divisible_by", 1, 1 << 16,
                      [](Config& c) -> int& { return c.parallel.make_vocab_size_divisible_by; }));
  k.push_back(real<double>("parallel.bucket_size_mb", {0.0, true, 1048576.0, false, "a number of MiB in (0, 1048576]"},
                           [](Config& c) -> double& { return c.parallel.bucket_size_mb; }));
  k.push_back(
      boolean("parallel.overlap_grad_reduce", [](Config& c) -> bool& { return c.parallel.overlap_grad_reduce; }));
  // ZeRO stages 2 and 3 (gradient and parameter sharding) are not built.
  k.push_back({"parallel.zero_stage", "0 or 1",
               [](Config& c, std::string_view t) {
                 const auto stage = parse_integer(t, 0, 3);
                 if (stage >= 2) {
                   throw ValueError("ZeRO stage " + std::to_string(stage) +
                                    " is not supported (gradient and parameter sharding are not built)");
                 }
                 c.parallel.zero_stage = static_cast<int>(stage);
               },
               [](const Config& c) { return std::to_string(c.parallel.zero_stage); }});

  std::vector<std::string> methods = {"none"};
  for (const auto& name : compressor_names()) methods.push_back(name);
  k.push_back(choice("compression.method", methods,
                     not_registered({"fp16", "bf16", "int8", "topk", "randomk"}, compressor_names()),
                     [](Config& c) -> std::string& { return c.compression.method; }));
  k.push_back(integer("compression.rank", 1, 1 << 16, [](Config& c) -> int& { return c.compression.rank; }));
  k.push_back(
      integer("compression.start_iter", 0, kMaxSteps, [](Config& c) -> int& { return c.compression.start_iter; }));
  k.push_back(real<double>("compression.min_compression_rate", kPositive,
                           [](Config& c) -> double& { return c.compression.min_compression_rate; }));
  k.push_back(boolean("compression.warm_start", [](Config& c) -> bool& { return c.compression.warm_start; }));
  k.push_back(
      integer("compression.block_size", 0, 1 << 30, [](Config& c) -> int& { return c.compression.block_size; }));
  k.push_back(choice("compression.scale", {"mean_abs", "rms"}, {},
                     [](Config& c) -> std::string& { return c.compression.scale; }));
  k.push_back(
      integer("compression.freeze_step", 1, kMaxSteps, [](Config& c) -> int& { return c.compression.freeze_step; }));

  // checkpoint: runtime/checkpoint/ (docs/config.md, "checkpoint").
  k.push_back(integer("checkpoint.interval", 0, kMaxSteps, [](Config& c) -> int& { return c.checkpoint.interval; }));
  k.push_back(integer("checkpoint.keep_last", 1, 1 << 20, [](Config& c) -> int& { return c.checkpoint.keep_last; }));
  k.push_back(boolean("checkpoint.on_interrupt", [](Config& c) -> bool& { return c.checkpoint.on_interrupt; }));
  k.push_back(boolean("checkpoint.async", [](Config& c) -> bool& { return c.checkpoint.async; }));
  // health: runtime/train/health_check.hpp (docs/config.md, "health").
  k.push_back(integer("health.max_consecutive_skips", 0, 1 << 20,
                      [](Config& c) -> int& { return c.health.max_consecutive_skips; }));
  k.push_back(integer("health.consistency_interval", 0, kMaxSteps,
                      [](Config& c) -> int& { return c.health.consistency_interval; }));
  k.push_back(boolean("health.ecc_check", [](Config& c) -> bool& { return c.health.ecc_check; }));
  k.push_back(integer("health.max_rollbacks", 0, 1 << 20, [](Config& c) -> int& { return c.health.max_rollbacks; }));
  k.push_back(
      integer("health.stall_timeout", 0, 7 * 24 * 3600, [](Config& c) -> int& { return c.health.stall_timeout; }));
  return k;
}

}  // namespace

const std::vector<KeySpec>& config_keys() {
  static const std::vector<KeySpec> keys = make_keys();
  return keys;
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = {"model",    "data",        "training",   "precision", "memory",
                                                    "parallel", "compression", "checkpoint", "health"};
  return sections;
}

const KeySpec* find_key(std::string_view name) {
  for (const auto& k : config_keys()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::optional<std::string> not_built_key(std::string_view name) {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"parallel.pipeline_model_parallel_size", "pipeline parallelism is not built"},
      // Issue 14's deterministic mode: memtrain's CPU and CUDA kernels already reduce in a
      // fixed order, so there is nothing yet for the mode to switch (docs/cuda-backend.md).
      {"training.deterministic",
       "a deterministic mode is not built; memtrain's kernels already reduce in a fixed order"},
  };
  for (const auto& [key, why] : keys) {
    if (key == name) return why;
  }
  return std::nullopt;
}

namespace {

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const auto cut = s.find('_');
    if (cut != 0) out.push_back(s.substr(0, cut));
    if (cut == std::string_view::npos) break;
    s = s.substr(cut + 1);
  }
  return out;
}

std::string_view leaf_of(std::string_view name) {
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

}  // namespace

std::string closest_key(std::string_view name) {
  const std::string_view leaf = leaf_of(name);
  // Typos first: the whole name catches a misspelling, the leaf alone a right key in the wrong
  // section. A candidate more than a third rewritten is noise, not a typo.
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto& k : config_keys()) {
    const std::size_t d = std::min(edit_distance(name, k.name), edit_distance(leaf, leaf_of(k.name)));
    if (d < best_d) {
      best_d = d;
      best = k.name;
    }
  }
  // A key of one or two letters is not "two edits" from another: everything would be rewritten.
  if (best_d <= std::max<std::size_t>(2, leaf.size() / 3) && best_d < leaf.size()) return best;
  // Then a reworded key ("lr_warmup" for warmup_steps): the most letters in shared words, where
  // a shared word of four letters or more is needed to count as related.
  best.clear();
  std::size_t best_shared = 3;
  for (const auto& k : config_keys()) {
    std::size_t shared = 0;
    for (const auto a : words(leaf)) {
      for (const auto b : words(leaf_of(k.name))) shared += a == b ? a.size() : 0;
    }
    if (shared > best_shared) {
      best_shared = shared;
      best = k.name;
    }
  }
  return best;
}

}  // namespace memtrain::train
