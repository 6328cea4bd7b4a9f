#pragma once
// Creates and owns the parameters of a model in a fixed order; layers keep handles to the
// tensors (Tensor handles share storage), so the list can grow without invalidating them.
#include <cstdint>
#include <string>
#include <vector>

#include "comms/gradient_bucket.hpp"
#include "models/model_options.hpp"
#include "models/parameter.hpp"
#include "runtime/core/context.hpp"

namespace memtrain::models {

// How init_parameters fills a parameter (Hugging Face BertPreTrainedModel._init_weights).
enum class ParameterInit { normal, zeros, ones };

class ParameterSet {
 public:
  // options.compute_dtype and options.fp32_grad_accumulation decide the storage of each
  // parameter (see add); the other options do not matter here.
  // bucketed: gradients are created unbound and get their memory from pack_gradients (Note
  // [Gradients live in buckets]); otherwise each gradient is a tensor of its own.
  explicit ParameterSet(core::Context& ctx, const ModelOptions& options = {}, bool bucketed = false)
      : ctx_(ctx), options_(options), bucketed_(bucketed) {}

  // A new parameter appended to the list: value in the compute dtype (tag parameter), a zeroed
  // grad (tag gradient) in the compute dtype or f32 with fp32_grad_accumulation, and when the
  // value is 16-bit an f32 master (tag master_weight; not with options.master_weights false). Bytes per element: f32 4 + 4;
  // f16/bf16 2 + 2 (or 4) + 4. Returns a copy of the handles. Throws memtrain::RuntimeError if
  // `name` is taken.
  // `shape` is this rank's shard; `shard` says where it sits in the unsharded tensor
  // (replicated by default).
  Parameter add(const std::string& name, std::vector<std::int64_t> shape, ParameterInit init, bool weight_decay,
                ShardSpec shard = {});

  // Note [Gradients live in buckets]
  // The data-parallel sum runs per bucket, and a bucket is summed without a copy only when its
  // gradients are contiguous. So a model's gradients are views into flat buffers (comms'
  // GradientBucket), laid out in the order backward finishes them: the parameters are created
  // first with unbound gradients (layers copy the handles), and once every parameter exists the
  // model packs them. The buckets hold exactly the gradients' bytes, and zero_grad is one memset
  // per bucket.
  //
  // Binds every gradient into buckets of at most options.gradient_bucket_bytes, in `order`
  // (parameter indices, each exactly once: the order in which backward finishes them). Entry
  // keys are the parameter indices. The parameters in `split_rows` have their entries marked
  // split_rows (GradientBucketEntry). Throws memtrain::RuntimeError when the set is not
  // bucketed, is packed already, or `order` is not a permutation of the parameters.
  void pack_gradients(const std::vector<std::size_t>& order, const std::vector<std::size_t>& split_rows = {});
  std::vector<comms::GradientBucket>& gradient_buckets() { return buckets_; }
  const std::vector<comms::GradientBucket>& gradient_buckets() const { return buckets_; }

  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  ParameterInit init_of(std::size_t i) const { return inits_[i]; }

 private:
  core::Context& ctx_;
  ModelOptions options_;
  bool bucketed_;
  std::vector<Parameter> params_;
  std::vector<comms::GradientBucket> buckets_;
  std::vector<ParameterInit> inits_;
};

}  // namespace memtrain::models
