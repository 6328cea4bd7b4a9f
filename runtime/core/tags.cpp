#include "runtime/core/tags.hpp"

#include "memory/tag_registry.hpp"

namespace memtrain::core {

const Tags& tags() {
  static const Tags instance = [] {
    auto& registry = memory::tag_registry();
    Tags t{};
    t.parameter = registry.register_tag("parameter");
    t.master_weight = registry.register_tag("master_weight");
    t.gradient = registry.register_tag("gradient");
    t.optimizer_state = registry.register_tag("optimizer_state");
    t.activation = registry.register_tag("activation");
    t.temporary = registry.register_tag("temporary");
    t.communication = registry.register_tag("communication");
    t.checkpoint = registry.register_tag("checkpoint");
    return t;
  }();
  return instance;
}

}  // namespace memtrain::core
