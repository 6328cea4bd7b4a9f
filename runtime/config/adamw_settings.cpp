// AdamW's settings (runtime/train/optimizer.hpp; ZeroAdamW under parallel.zero_stage 1):
// training.optimizer adamw. Its keys, training.adam_* and training.weight_decay, are shared
// by every Adam-like optimizer and owned by none.
#include "runtime/config/component_registry.hpp"

namespace memtrain::train {

ComponentSettings adamw_optimizer_settings() {
  ComponentSettings s;
  s.name = "adamw";
  s.title = "AdamW";
  s.runs_on_gpu = true;
  return s;
}

}  // namespace memtrain::train
