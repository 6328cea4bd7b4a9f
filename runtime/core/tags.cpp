#include "runtime/core/tags.hpp"

#include "memory/tag_registry.hpp"

namespace memtrain::core {

const Tags& tags() {
  static const Tags instance = [] {
    auto& registry = memory::tag_registry();
    return Tags{registry.register_tag("parameter"),       registry.register_tag("gradient"),
                registry.register_tag("optimizer_state"), registry.register_tag("activation"),
                registry.register_tag("temporary"),       registry.register_tag("communication")};
  }();
  return instance;
}

}  // namespace memtrain::core
