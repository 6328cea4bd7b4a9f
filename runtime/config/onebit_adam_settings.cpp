// 1-bit Adam's settings (runtime/train/onebit_adam.hpp): training.optimizer onebit_adam.
#include "runtime/config/component_registry.hpp"
#include "runtime/config/config_validate.hpp"

namespace memtrain::train {

ComponentSettings onebit_adam_optimizer_settings() {
  ComponentSettings s;
  s.name = "onebit_adam";
  s.title = "1-bit Adam";
  s.keys = {"compression.freeze_step"};
  s.reads = {"compression.block_size", "compression.scale"};  // its momentum's 1-bit compression
  s.needs = " with compression.method = none";
  s.per_rank_state = true;  // the momentum compressor's errors
  s.validate = [](const Config& c) {
    // The momentum is what goes 1-bit; gradients before the freeze are summed in full precision.
    if (c.compression.method != "none") {
      fail_key(c, blamed_key(c, "compression.method", "training.optimizer"),
               "compresses the gradients, and " + key_and_value(c, "training.optimizer") +
                   " compresses the momentum after compression.freeze_step instead",
               "compression.method = none with onebit_adam, or training.optimizer = adamw");
    }
    const std::string why = " (1-bit Adam is built for f32 replicated parameters)";
    if (c.precision.dtype != "fp32") {
      fail_key(c, "training.optimizer", "not supported yet with " + key_and_value(c, "precision.dtype") + why,
               "adamw, or precision.dtype = fp32");
    }
    if (c.parallel.zero_stage != 0) {
      fail_key(c, blamed_key(c, "training.optimizer", "parallel.zero_stage"),
               "needs ZeRO stage 0, and " + key_and_value(c, "parallel.zero_stage") + " shards the optimizer state",
               "training.optimizer = adamw with zero_stage 1, or parallel.zero_stage = 0");
    }
    if (c.parallel.tensor_model_parallel_size != 1) {
      fail_key(c, "training.optimizer",
               "not supported yet with " + key_and_value(c, "parallel.tensor_model_parallel_size") + why,
               "adamw, or tensor_model_parallel_size = 1");
    }
  };
  return s;
}

}  // namespace memtrain::train
