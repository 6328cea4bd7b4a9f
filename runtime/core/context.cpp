#include "runtime/core/context.hpp"

#include <utility>

#include "runtime/core/errors.hpp"

namespace memtrain::core {

Context::Context(std::shared_ptr<memory::Allocator> allocator, std::string device)
    : allocator_(std::move(allocator)), device_(std::move(device)) {
  if (!allocator_) {
    throw ConfigError("Context for device \"" + device_ + "\" needs an allocator; got null");
  }
}

void Context::set_workspace(std::shared_ptr<Workspace> workspace) {
  if (!workspace)
    throw ConfigError("Context for device \"" + device_ + "\": set_workspace needs a workspace; got null");
  workspace_ = std::move(workspace);
}

}  // namespace memtrain::core
