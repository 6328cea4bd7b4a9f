#include "runtime/config/config_validate.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "kernels/cpu/matmul_bf16.hpp"
#include "memory/allocation_policy_registry.hpp"
#include "memory/allocator_options.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/config/component_registry.hpp"
#include "runtime/config/config_alloc_conf.hpp"
#include "runtime/config/config_schema.hpp"

namespace memtrain::train {

namespace {

// The key's value as the user would write it (canonical text from the key table).
std::string value_of(const Config& c, const std::string& key) {
  if (const KeySpec* spec = find_key(key)) return spec->get(c);
  return "?";
}

[[noreturn]] void fail(const Config& c, const std::string& key, const std::string& what, const std::string& expected) {
  fail_key(c, key, what, expected);
}

std::string other(const Config& c, const std::string& key) { return key_and_value(c, key); }

std::string blamed(const Config& c, const std::string& a, const std::string& b) { return blamed_key(c, a, b); }

void check_model(const Config& c) {
  const auto& m = c.model;
  if (m.hidden_size % m.num_attention_heads != 0) {
    fail(c, "model.num_attention_heads", "does not divide " + other(c, "model.hidden_size"),
         "a divisor of " + std::to_string(m.hidden_size) + " (head size = hidden_size / num_attention_heads)");
  }
  if (c.data.seq_length > m.max_position_embeddings) {
    const std::string key = blamed(c, "data.seq_length", "model.max_position_embeddings");
    if (key == "data.seq_length") {
      fail(c, key, "exceeds " + other(c, "model.max_position_embeddings"),
           "at most " + std::to_string(m.max_position_embeddings));
    }
    fail(c, key, "is below " + other(c, "data.seq_length"), "at least " + std::to_string(c.data.seq_length));
  }
}

// Tensor parallelism splits heads and intermediate features evenly (Megatron-LM asserts the
// same divisibility); the world-size rule needs the rank count and is comms::check_grid's.
void check_parallel(const Config& c) {
  const int tp = c.parallel.tensor_model_parallel_size;
  if (tp == 1 && c.parallel.sequence_parallel) {
    fail(c, "parallel.sequence_parallel", "means nothing with " + other(c, "parallel.tensor_model_parallel_size"),
         "false, or tensor_model_parallel_size > 1 (sequence parallelism splits the regions a "
         "tensor-parallel group replicates)");
  }
  if (tp == 1) return;
  const std::string tp_key = "parallel.tensor_model_parallel_size";
  if (c.parallel.sequence_parallel) {
    if (c.data.seq_length % tp != 0) {
      fail(c, "data.seq_length", "not divisible by " + other(c, tp_key),
           "a multiple of " + std::to_string(tp) + " (parallel.sequence_parallel splits every sample's tokens evenly)");
    }
    if (c.data.dynamic_seq_length) {
      fail(c, "data.dynamic_seq_length", "is set with " + other(c, "parallel.sequence_parallel"),
           "false (sequence parallelism needs every micro-batch's length to split evenly)");
    }
  }
  for (const std::string key : {"model.num_attention_heads", "model.intermediate_size"}) {
    const int v = key == "model.num_attention_heads" ? c.model.num_attention_heads : c.model.intermediate_size;
    if (v % tp == 0) continue;
    if (blamed(c, key, tp_key) == tp_key) {
      fail(c, tp_key, "does not divide " + other(c, key),
           "a divisor of " + std::to_string(v) + " (each tensor-parallel rank holds 1/" + std::to_string(tp) + " of " +
               key + ")");
    }
    fail(c, key, "not divisible by " + other(c, tp_key),
         "a multiple of " + std::to_string(tp) + " (each tensor-parallel rank holds 1/" + std::to_string(tp) +
             " of it)");
  }
}

// A key owned by a component other than the selected ones (Note [Components own their
// settings], component_registry.hpp), set away from its default: refused, naming its owner.
void check_unselected_keys(const Config& c) {
  const CompressorEntry* compressor = find_compressor(c.compression.method);
  const ComponentSettings* optimizer = find_optimizer(c.training.optimizer);
  const auto read_by = [&](const ComponentSettings* s, const std::string& key) {
    return s != nullptr &&
           (std::count(s->keys.begin(), s->keys.end(), key) + std::count(s->reads.begin(), s->reads.end(), key)) > 0;
  };
  const auto refusable = [&](const std::string& key) {
    return !read_by(optimizer, key) && !read_by(compressor ? &compressor->settings : nullptr, key) &&
           set_away_from_default(c, key);
  };
  for (const auto& owner : optimizer_registry()) {
    if (&owner == optimizer) continue;
    for (const auto& key : owner.keys) {
      if (!refusable(key)) continue;
      fail(c, key,
           "is an option of training.optimizer = " + owner.name + ", which " + other(c, "training.optimizer") +
               " does not use",
           "no " + key + " with compression.method = " + c.compression.method +
               ", or training.optimizer = " + owner.name + owner.needs);
    }
  }
  for (const auto& entry : compressor_registry()) {
    const ComponentSettings& owner = entry.settings;
    if (&entry == compressor) continue;
    for (const auto& key : owner.keys) {
      if (!refusable(key)) continue;
      fail(c, key, "is a " + owner.title + " option and " + other(c, "compression.method") + " has no use for it",
           "no " + key + " with " + c.compression.method + ", or compression.method = " + owner.name + owner.needs);
    }
  }
}

// The compressors and the optimizer check their own keys (component_registry.hpp); what is left
// here holds for every compressor: the synchroniser sums buckets whole (ZeRO-1 reduce-scatters
// them; DeepSpeed's 1-bit Adam needs stage 0 too); 16-bit buckets are compressed in f32 (Note
// [16-bit gradients are compressed in f32], comms/gradient_synchronizer.hpp).
void check_compression(const Config& c) {
  for (const auto& entry : compressor_registry()) {
    if (entry.settings.check_values) entry.settings.check_values(c);
  }
  for (const auto& owner : optimizer_registry()) {
    if (owner.check_values) owner.check_values(c);
  }
  if (const ComponentSettings* optimizer = find_optimizer(c.training.optimizer); optimizer && optimizer->validate) {
    optimizer->validate(c);
  }
  if (c.compression.method == "none") return;
  check_unselected_keys(c);
  if (c.parallel.zero_stage != 0) {
    fail(c, blamed(c, "compression.method", "parallel.zero_stage"),
         "gradient compression needs ZeRO stage 0, and " + other(c, "parallel.zero_stage") +
             " reduce-scatters the gradients",
         "compression.method = none with zero_stage 1, or parallel.zero_stage = 0");
  }
  if (const CompressorEntry* compressor = find_compressor(c.compression.method);
      compressor && compressor->settings.validate) {
    compressor->settings.validate(c);
  }
}

void check_training(const Config& c) {
  const auto& t = c.training;
  if (t.global_batch_size % t.micro_batch_size != 0) {
    fail(c, "training.global_batch_size", "not a multiple of " + other(c, "training.micro_batch_size"),
         "a multiple of " + std::to_string(t.micro_batch_size) +
             " (global = micro x accumulation steps x data-parallel ranks)");
  }
  if (t.min_lr > t.lr) {
    fail(c, "training.min_lr", "above " + other(c, "training.lr"), "at most training.lr");
  }
}

// Note [A reservation needs a capacity]
// A reservation is a promise that no other job can take those bytes; the shared ledger keeps
// the sum of all jobs' holdings under the device's capacity to keep it. On the host there is
// no device whose memory memtrain controls: other programs take RAM without asking the ledger,
// so a reservation counted against the machine's RAM would promise what nobody can guarantee.
// memory.capacity names the part of the host the memtrain jobs divide among themselves; every
// job sharing the ledger gives the same one. A limit needs no capacity: it only caps this job
// (the ledger is then sized to the host's physical memory).
void check_quota(const Config& c) {
  const auto& m = c.memory;
  if (m.reservation > 0 && m.limit > 0 && m.reservation > m.limit) {
    const std::string key = blamed(c, "memory.reservation", "memory.limit");
    if (key == "memory.reservation") {
      fail(c, key, "exceeds " + other(c, "memory.limit"),
           "at most memory.limit (" + std::to_string(m.limit) + " bytes)");
    }
    fail(c, key, "is below " + other(c, "memory.reservation"),
         "at least memory.reservation (" + std::to_string(m.reservation) + " bytes), or 0 for no limit");
  }
  if (m.reservation > 0 && m.capacity == 0) {
    fail(c, "memory.reservation",
         "needs memory.capacity (device cpu has no capacity of its own to reserve from: other programs use the "
         "host's memory without the ledger)",
         "memory.capacity set as well (the same on every job sharing the host), or 0");
  }
  if (m.reservation > 0 && m.reservation > m.capacity) {
    fail(c, "memory.reservation", "exceeds " + other(c, "memory.capacity"),
         "at most memory.capacity (" + std::to_string(m.capacity) + " bytes)");
  }
  // Admission by plan (Note [Admission by plan]): the pool is the ledger of memory.capacity, and
  // the reservation is the plan's need, not a figure of the config.
  if (m.admission == "wait" && m.capacity == 0) {
    fail(c, "memory.admission", "needs memory.capacity (the pool the jobs are admitted to)",
         "memory.capacity set as well (the same on every job sharing the pool), or admission: fail");
  }
  if (m.admission == "wait" && m.reservation > 0) {
    fail(c, blamed(c, "memory.reservation", "memory.admission"),
         "cannot be set with memory.admission = wait, which reserves the job's planned need",
         "memory.reservation = 0 with admission: wait");
  }
  if (m.elastic && m.admission != "wait") {
    fail(c, "memory.elastic", "needs memory.admission = wait (an elastic job is asked to shrink by the queue)",
         "memory.admission: wait as well, or elastic: false");
  }
  // Keys that would do nothing are refused, not ignored.
  for (const char* key : {"memory.priority", "memory.priority_aging"}) {
    if (m.admission != "wait" && set_away_from_default(c, key)) {
      fail(c, key, "has no effect with memory.admission = fail (there is no queue)",
           "memory.admission: wait as well, or the key left out");
    }
  }
  if (!m.elastic && set_away_from_default(c, "memory.elastic_min_micro_batch")) {
    fail(c, "memory.elastic_min_micro_batch", "has no effect with memory.elastic = false",
         "memory.elastic: true as well, or the key left out");
  }
  if (m.elastic && m.elastic_min_micro_batch > c.training.micro_batch_size) {
    fail(c, "memory.elastic_min_micro_batch", "exceeds " + other(c, "training.micro_batch_size"),
         "at most training.micro_batch_size (" + std::to_string(c.training.micro_batch_size) + ")");
  }
  if (m.limit > 0 && m.capacity > 0 && m.limit > m.capacity) {
    fail(c, "memory.limit", "exceeds " + other(c, "memory.capacity") + " and would have no effect",
         "at most memory.capacity (" + std::to_string(m.capacity) + " bytes), or 0");
  }
}

// Note [Allocator options that do nothing]
// An option that cannot act under the chosen policy would let an experiment report "with
// max_split_size" results that are identical to the baseline. A policy that does not cache
// (no_cache) never caches, splits or grows a segment; a collection threshold is a fraction of a limit, and on the host there is no
// limit unless memory.capacity or memory.limit gives one. memory::validate_options holds the full rule set; the
// common cases are checked here first so that the message can name the line.
void check_memory(const Config& c) {
  const auto& m = c.memory;
  const memory::PolicyRegistration* policy = memory::find_policy(m.policy);
  if (policy != nullptr && !policy->caches) {
    const std::string why = "has no effect with " + other(c, "memory.policy") + " (nothing is cached, split or grown)";
    if (m.max_split_size != memory::kMaxSplitSizeUnset) {
      fail(c, "memory.max_split_size", why, "unset, or a caching memory.policy");
    }
    if (m.garbage_collection_threshold > 0) {
      fail(c, "memory.garbage_collection_threshold", why, "0, or a caching memory.policy");
    }
    if (m.expandable_segments) fail(c, "memory.expandable_segments", why, "false, or a caching memory.policy");
  }
  if (m.garbage_collection_threshold > 0 && m.capacity == 0 && m.limit == 0) {
    fail(c, "memory.garbage_collection_threshold",
         "has no effect without memory.capacity or memory.limit (no limit to measure the threshold against)",
         "memory.capacity or memory.limit set as well, or 0");
  }
  check_quota(c);
  try {
    memory::validate_options(allocator_options(m), m.limit);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(where_set(c, "memory.policy") + ": memory: " + e.what());
  }
}

void check_precision(const Config& c) {
  const auto& ls = c.precision.loss_scale;
  if (ls.min_loss_scale > ls.initial_scale) {
    const std::string key = blamed(c, "precision.loss_scale.min_loss_scale", "precision.loss_scale.initial_scale");
    if (key == "precision.loss_scale.min_loss_scale") {
      fail(
          c, key, "exceeds " + other(c, "precision.loss_scale.initial_scale"),
          "at most precision.loss_scale.initial_scale (the scale starts there and only backs off towards the minimum)");
    }
    fail(c, key, "is below " + other(c, "precision.loss_scale.min_loss_scale"),
         "at least precision.loss_scale.min_loss_scale");
  }
}

// Note [Recompute options that do nothing]
// As with the allocator options: a budget that no policy reads, or a layer count for a
// recompute that is off, would let an experiment report "with checkpointing" numbers that are
// the baseline's. Such settings are refused with the key that would make them act:
// - recompute_num_layers or recompute_method block with recompute none (no layer is
//   checkpointed, so which layers would be is moot);
// - recompute_num_layers with recompute auto (auto chooses the layers itself: it would be
//   overwritten);
// - recompute selective with attention flash: selective recomputes the attention core so as
//   not to keep the [B, NH, T, T] probabilities, and flash keeps none to begin with, so the
//   layers store exactly what they store without recompute.
void check_recompute(const Config& c) {
  const auto& m = c.memory;
  if (m.recompute_num_layers > c.model.num_hidden_layers) {
    const std::string key = blamed(c, "memory.recompute_num_layers", "model.num_hidden_layers");
    if (key == "memory.recompute_num_layers") {
      fail(c, key, "exceeds " + other(c, "model.num_hidden_layers"),
           "an integer in [0, " + std::to_string(c.model.num_hidden_layers) + "] (0 = every layer)");
    }
    fail(c, key, "is below " + other(c, "memory.recompute_num_layers"),
         "at least " + std::to_string(m.recompute_num_layers));
  }
  if (m.recompute_num_layers > 0 && m.recompute == "none") {
    fail(c, "memory.recompute_num_layers", "has no effect with " + other(c, "memory.recompute"),
         "0, or memory.recompute selective or full");
  }
  if (m.recompute_method == "block" && m.recompute == "none") {
    fail(c, "memory.recompute_method", "has no effect with " + other(c, "memory.recompute"),
         "uniform (the default), or memory.recompute selective or full");
  }
  if (m.recompute_num_layers > 0 && m.recompute == "auto") {
    fail(c, "memory.recompute_num_layers",
         "has no effect with " + other(c, "memory.recompute") + " (auto chooses the layers itself)",
         "0, or memory.recompute selective or full");
  }
  if (m.recompute == "selective" && m.attention == "flash") {
    const std::string key = blamed(c, "memory.recompute", "memory.attention");
    fail(c, key,
         "has no effect with " + other(c, key == "memory.recompute" ? "memory.attention" : "memory.recompute") +
             " (flash attention keeps no [B, NH, T, T] probabilities for selective recompute to drop)",
         key == "memory.recompute" ? "none or full with memory.attention = flash"
                                   : "standard with memory.recompute = selective");
  }
  if (m.recompute == "auto" && m.budget == 0) {
    fail(c, "memory.recompute", "needs memory.budget (the peak the choice must fit)",
         "memory.budget set (e.g. 30GiB), or none, selective or full");
  }
  if (m.budget > 0 && m.recompute != "auto") {
    fail(c, "memory.budget", "has no effect with " + other(c, "memory.recompute"), "0, or memory.recompute = auto");
  }
}

}  // namespace

void validate_corpus(const Config& c) {
  if (c.data.mock) return;  // mock data reads no corpus
  const std::string& corpus = c.data.corpus;
  if (corpus == "kjv") {
    if (find_program("bible").empty()) {
      fail(c, "data.corpus", "the `bible` program (Debian package bible-kjv) is not in PATH",
           "bible-kjv installed (scripts/install_deps.sh), a text file or directory, or data.mock: true");
    }
    return;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(corpus, ec);
  if (!fs::exists(status)) {
    // A dangling link or a loop of links exists as a name but not as a file: say which.
    const std::error_code why = ec;
    const bool link = fs::is_symlink(fs::symlink_status(corpus, ec));
    fail(c, "data.corpus",
         link ? "a symbolic link that leads to no file (" + (why ? why.message() : std::string("dangling")) + ")"
              : std::string("no such file or directory (relative paths are from the working directory)"),
         "kjv, a UTF-8 text file or a directory of .txt files");
  }
  if (fs::is_regular_file(status) && !std::ifstream(corpus)) {
    fail(c, "data.corpus", "cannot be read", "a readable UTF-8 text file");
  }
  if (!fs::is_regular_file(status) && !fs::is_directory(status)) {
    fail(c, "data.corpus", "is neither a file nor a directory", "a UTF-8 text file or a directory of .txt files");
  }
  // read_corpus refuses these too, but it no longer knows the line that set data.corpus.
  if (fs::is_directory(status)) {
    bool any_txt = false;
    for (fs::recursive_directory_iterator it(corpus, ec), end; !ec && !any_txt && it != end; it.increment(ec)) {
      any_txt = it->is_regular_file(ec) && it->path().extension() == ".txt";
    }
    if (!ec && !any_txt) fail(c, "data.corpus", "directory contains no .txt files", "a directory of UTF-8 .txt files");
    return;
  }
  std::ifstream in(corpus);
  bool any_text = false;
  for (std::string line; !any_text && std::getline(in, line);) {
    any_text = line.find_first_not_of(" \t\r\v\f") != std::string::npos;  // read_corpus's blank lines
  }
  if (!any_text) fail(c, "data.corpus", "is empty (no non-blank line)", "UTF-8 text to train on");
}

std::string where_set(const Config& c, const std::string& key) {
  const auto it = c.origin.find(key);
  return it == c.origin.end() ? c.path + " (default)" : it->second;
}

void fail_key(const Config& c, const std::string& key, const std::string& what, const std::string& expected) {
  throw ConfigError(where_set(c, key) + ": " + key + " = " + value_of(c, key) + ": " + what + "; expected " + expected);
}

std::string key_and_value(const Config& c, const std::string& key) {
  const auto it = c.origin.find(key);
  return key + " = " + value_of(c, key) + (it == c.origin.end() ? " (default)" : " (" + it->second + ")");
}

std::string blamed_key(const Config& c, const std::string& a, const std::string& b) {
  return c.origin.count(a) || !c.origin.count(b) ? a : b;
}

bool set_away_from_default(const Config& c, const std::string& key) {
  if (!c.origin.count(key)) return false;
  static const Config defaults;
  const KeySpec* spec = find_key(key);
  return spec == nullptr || spec->get(c) != spec->get(defaults);
}

std::string find_program(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    const std::string candidate = (std::filesystem::path(dir.empty() ? "." : dir) / program).string();
    if (::access(candidate.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  return {};
}

void validate_compute_host(const Config& c) {
  if (c.device != "cpu") return;  // a GPU run's GEMMs are not oneDNN's
  if (c.precision.dtype == "bf16" && c.precision.bf16_gemm == "native" && !kernels::bf16_gemm_native()) {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (cap == nullptr) cap = std::getenv("DNNL_MAX_CPU_ISA");
    fail(c, "precision.bf16_gemm",
         "oneDNN finds no bf16 dot products on this CPU (" + kernels::bf16_gemm_description() +
             (cap != nullptr ? std::string(", capped by ONEDNN_MAX_CPU_ISA=") + cap : std::string()) +
             "; native needs AVX512_BF16 or AMX)",
         "auto or fp32 here (both convert the bf16 operands to float for sgemm on such a CPU)");
  }
}

// Note [What a GPU run trains so far]
// The GPU path is built op by op (docs/cuda-backend.md): tensors on the device, every layer's
// kernel and AdamW through the op API, 16-bit storage through float views on the device, the
// batch's index arrays staged, checkpoints copied through host memory. What still stages
// through the host, or has no CUDA kernel, is refused here, before anything is allocated,
// instead of failing inside a step: fp32 gradients of 16-bit weights (AdamW's mixed update
// stages through the host), tensor parallelism (its layers' collectives are not NCCL's yet),
// ZeRO-1 and the compressors (host staging), selective recompute (attention_probs
// has no twin; auto may pick it), asynchronous checkpoints (a host staging buffer taken from the
// device allocator). memory.limit and reservation go through the GPU's own ledger (Note [One
// ledger per GPU], model_memory.cpp).
void validate_cuda_support(const Config& c) {
  if (c.device == "cpu") return;
  const std::string gpu = "training on " + c.device + " ";
  if (c.precision.dtype != "fp32" && c.precision.fp32_grad_accumulation) {
    fail(c, "precision.fp32_grad_accumulation",
         gpu + "has no update of 16-bit weights from fp32 gradients yet (it stages them through host memory)",
         "false, or device: cpu");
  }
  if (c.parallel.tensor_model_parallel_size > 1) {
    fail(c, "parallel.tensor_model_parallel_size", gpu + "has no tensor parallelism yet (NCCL is not in the trainer)",
         "1, or device: cpu");
  }
  if (c.parallel.zero_stage != 0) {
    fail(c, "parallel.zero_stage", gpu + "has no ZeRO-1 yet (its state is staged through host memory)",
         "0, or device: cpu");
  }
  if (const CompressorEntry* compressor = find_compressor(c.compression.method);
      compressor && !compressor->settings.runs_on_gpu) {
    fail(c, "compression.method", gpu + "has no gradient compression yet", "none, or device: cpu");
  }
  if (const ComponentSettings* optimizer = find_optimizer(c.training.optimizer); optimizer && !optimizer->runs_on_gpu) {
    std::string names;
    for (const auto& o : optimizer_registry()) {
      if (o.runs_on_gpu) names += (names.empty() ? "" : ", ") + o.title;
    }
    std::string gpu_names;
    for (const auto& o : optimizer_registry()) {
      if (o.runs_on_gpu) gpu_names += (gpu_names.empty() ? "" : " or ") + o.name;
    }
    fail(c, "training.optimizer", gpu + "runs " + names + " only so far", gpu_names + ", or device: cpu");
  }
  if (c.memory.recompute == "selective" || c.memory.recompute == "auto") {
    fail(c, "memory.recompute", gpu + "has no CUDA kernel for selective recompute's attention probabilities",
         "none or full, or device: cpu");
  }
  if (c.checkpoint.async) {
    fail(c, "checkpoint.async", gpu + "writes checkpoints synchronously so far", "false, or device: cpu");
  }
  // kernels/cuda/flash_attention.hpp's kFlashMaxHeadSize: a head's row lives in registers.
  constexpr int kGpuFlashMaxHeadSize = 128;
  const int head_size = c.model.hidden_size / c.model.num_attention_heads;
  if (c.memory.attention == "flash" && head_size > kGpuFlashMaxHeadSize) {
    fail(c, "memory.attention",
         gpu + "has no flash attention for heads of " + std::to_string(head_size) + " (" +
             other(c, "model.hidden_size") + " / " + other(c, "model.num_attention_heads") + "; at most " +
             std::to_string(kGpuFlashMaxHeadSize) + ")",
         "standard, or heads of at most 128");
  }
}

void validate_config(const Config& c, CorpusCheck corpus) {
  check_model(c);
  check_parallel(c);
  check_training(c);
  check_compression(c);
  check_precision(c);
  check_memory(c);
  check_recompute(c);
  if (corpus == CorpusCheck::required) validate_corpus(c);
}

}  // namespace memtrain::train
