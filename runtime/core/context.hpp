#pragma once
// The execution context of a rank: where tensors get their memory, on which stream work is
// queued, and whether ops compute or only plan (design.md, "Execution modes").
#include <memory>
#include <string>

#include "kernels/op_context.hpp"
#include "memory/allocator.hpp"
#include "memory/types.hpp"
#include "runtime/core/op_profile.hpp"
#include "runtime/core/workspace.hpp"

namespace memtrain::core {

class Context {
 public:
  // `allocator` serves every tensor of this context (it must not be null: throws
  // memtrain::ConfigError). `device` is the device name used in messages ("cpu", "cuda:0").
  explicit Context(std::shared_ptr<memory::Allocator> allocator, std::string device = "cpu");

  memory::Allocator& allocator() const { return *allocator_; }
  // Shared ownership, so a tensor's storage can keep the allocator alive past the context.
  const std::shared_ptr<memory::Allocator>& allocator_ptr() const { return allocator_; }
  const std::string& device() const { return device_; }

  // The stream new tensors are allocated on and ops are queued on.
  memory::StreamId stream() const { return stream_; }
  void set_stream(memory::StreamId stream) { stream_ = stream; }

  // In a dry run, ops allocate exactly what they would in compute mode but do no math, and
  // tensor memory is never read or written (the upstream may hand out addresses only).
  bool dry_run() const { return dry_run_; }
  void set_dry_run(bool dry_run) { dry_run_ = dry_run; }

  // What the op API (kernels/ops) runs this context's ops with: the device and, on a GPU, its
  // stream, cuBLASLt handle and fixed workspaces. The CPU's by default.
  const kernels::OpContext& op_context() const { return op_context_; }
  void set_op_context(const kernels::OpContext& k) { op_context_ = k; }

  // Scratch for fp32 arithmetic on 16-bit tensors and for kernel tiles, outside the allocator
  // (Note [Workspace outside the allocator]): host memory, or the GPU's for a context attached
  // to one. A dry run never touches it.
  Workspace& workspace() const { return *workspace_; }
  // Replaces the workspace (a GPU's device scratch: core::CudaDevice::attach). Throws
  // memtrain::ConfigError for null.
  void set_workspace(std::shared_ptr<Workspace> workspace);
  // Where the layers time their kernel calls (Note [Profiling ops in the step]); null = not
  // profiled. The profile is the caller's and must outlive its use here.
  OpProfile* op_profile() const { return op_profile_; }
  void set_op_profile(OpProfile* profile) { op_profile_ = profile; }

 private:
  std::shared_ptr<memory::Allocator> allocator_;
  std::string device_;
  memory::StreamId stream_ = memory::kDefaultStream;
  bool dry_run_ = false;
  kernels::OpContext op_context_;
  std::shared_ptr<Workspace> workspace_ = std::make_shared<Workspace>();
  OpProfile* op_profile_ = nullptr;
};

}  // namespace memtrain::core
