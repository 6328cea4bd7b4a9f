#pragma once
// Names for the opaque tag ids that blocks carry (types.hpp). memory/ knows no model terms:
// the runtime registers "parameter", "gradient", ... and the allocator only sees small ids.
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memory/types.hpp"

namespace memtrain::memory {

// Process-wide, thread-safe map between tag names and ids. Id 0 is kUntagged ("untagged").
class TagRegistry {
 public:
  TagRegistry();
  // Idempotent: the same name always gives the same id. Throws std::invalid_argument for an
  // empty name and std::length_error when all 65535 ids are taken.
  TagId register_tag(std::string_view name);
  // The registered name; "tag<N>" for an id nobody registered (snapshots stay readable).
  std::string name(TagId id) const;
  // Number of ids handed out, kUntagged included.
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, TagId> ids_;
};

// The one registry of this process.
TagRegistry& tag_registry();

}  // namespace memtrain::memory
