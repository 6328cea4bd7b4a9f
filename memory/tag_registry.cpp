#include "memory/tag_registry.hpp"

#include <limits>
#include <stdexcept>

namespace memtrain::memory {

TagRegistry::TagRegistry() {
  names_.emplace_back("untagged");
  ids_.emplace("untagged", kUntagged);
}

TagId TagRegistry::register_tag(std::string_view name) {
  if (name.empty()) throw std::invalid_argument("tag_registry: a tag name must not be empty");
  std::lock_guard lock(mutex_);
  std::string key(name);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  if (names_.size() > std::numeric_limits<TagId>::max()) {
    throw std::length_error("tag_registry: all " + std::to_string(std::numeric_limits<TagId>::max()) +
                            " tag ids are taken; cannot register '" + key + "'");
  }
  const auto id = static_cast<TagId>(names_.size());
  names_.push_back(key);
  ids_.emplace(std::move(key), id);
  return id;
}

std::string TagRegistry::name(TagId id) const {
  std::lock_guard lock(mutex_);
  if (id < names_.size()) return names_[id];
  return "tag" + std::to_string(id);
}

std::size_t TagRegistry::size() const {
  std::lock_guard lock(mutex_);
  return names_.size();
}

TagRegistry& tag_registry() {
  static TagRegistry registry;
  return registry;
}

}  // namespace memtrain::memory
