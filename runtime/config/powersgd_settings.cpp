// PowerSGD's settings (comms/powersgd_compressor.hpp): compression.method powersgd.
#include "comms/powersgd_compressor.hpp"
#include "runtime/config/component_registry.hpp"

namespace memtrain::train {

CompressorEntry powersgd_compressor_entry() {
  ComponentSettings s;
  s.name = "powersgd";
  s.title = "PowerSGD";
  s.keys = {"compression.rank", "compression.min_compression_rate", "compression.warm_start"};
  s.per_rank_state = true;  // error feedback and warm-started Qs
  // The initial Q is drawn from training.seed: the same on every rank.
  return {std::move(s), [](const Config& c) {
            const auto& k = c.compression;
            return comms::powersgd_factory({k.rank, k.min_compression_rate, k.warm_start, c.training.seed});
          }};
}

}  // namespace memtrain::train
