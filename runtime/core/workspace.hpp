#pragma once
// Scratch memory for the fp32 arithmetic of 16-bit tensors and for kernel tiles, kept outside
// the memory::Allocator (Note [Workspace outside the allocator]): host memory, or a GPU's for
// a context attached to one.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace memtrain::core {

// Note [Workspace outside the allocator]
// On CPU, 16-bit tensors are computed on by converting them to float, running the fp32
// kernels, and rounding the results back. The float copies are the CPU counterpart of what a
// GPU keeps in registers, shared memory or a cuBLAS workspace: per-op scratch, not tensors.
// They come from here, never from the allocator, because
//  - a dry run does no math and so converts nothing; if conversions allocated, the dry-run
//    trace would differ from the compute trace (design.md, "Execution modes");
//  - the allocator's per-tag stats then show the real 16-bit storage of weights, gradients
//    and activations, which is what mixed precision is for;
//  - the scratch is reused op after op: grow-only buffers cost one allocation per slot per
//    run instead of one per op.
// The price is memory the allocator does not see; reserved_bytes() reports it (its high-water
// mark), so a run can still print it beside the allocator's numbers.
//
// Slots: each buffer in use at a time needs its own slot. Take one with acquire() (or a
// Workspace::Lease) rather than a hard-coded number, so that nested users never share one.
// Not thread-safe: one Workspace per Context, used by the thread that drives the context
// (the kernels it feeds may use OpenMP inside).
class Workspace {
 public:
  // Where a slot's buffers come from: allocate(bytes) returns memory for that many bytes (or
  // throws std::bad_alloc), release(p, bytes) frees it, with the bytes
  // allocate was given. The default is host memory.
  struct Memory {
    std::function<void*(std::size_t)> allocate;
    std::function<void(void*, std::size_t)> release;
  };

  // Host memory: 64-byte aligned, every page written once when a buffer is made (Note
  // [Workspace growth is rare and touches its pages once]); with huge_pages, buffers of 2 MiB or
  // more in transparent huge pages (Note [Transparent huge pages for host memory],
  // memory/huge_pages.cpp), as memory.host_huge_pages asks of a CPU run.
  static Memory host_memory(bool huge_pages);

  // host_memory(false), as memory.host_huge_pages' default.
  Workspace();
  // Buffers from `memory`, such as a GPU's (core::CudaDevice: the scratch of its float views,
  // Note [Float views convert on the tensor's device]). Its allocate must return memory
  // aligned to 64 bytes at least.
  explicit Workspace(Memory memory);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // The buffer of `slot`, at least n floats (64-byte aligned), grown if needed; contents are
  // unspecified (growth does not preserve them). The pointer stays valid until the slot grows.
  // Throws memtrain::RuntimeError for a negative slot, std::bad_alloc when the host is full.
  float* floats(int slot, std::size_t n);

  // The lowest slot not in use, marked in use until release(slot).
  int acquire();
  // Marks `slot` free again (its buffer is kept for reuse). Throws memtrain::RuntimeError when
  // the slot is not in use.
  void release(int slot);
  // Slots currently acquired (a test can check that every view returned its slot).
  int slots_in_use() const;

  // Bytes held by all slots: the high-water mark of scratch, since buffers never shrink.
  std::size_t reserved_bytes() const { return reserved_bytes_; }

  // An acquired slot returned on destruction (RAII). Movable, not copyable.
  class Lease {
   public:
    Lease() = default;
    // Acquires a slot of ws and sizes it to n floats; on std::bad_alloc the slot is returned.
    Lease(Workspace& ws, std::size_t n);
    Lease(Lease&& o) noexcept : ws_(o.ws_), slot_(o.slot_), data_(o.data_) { o.ws_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }
    float* data() const { return data_; }
    void reset();

   private:
    Workspace* ws_ = nullptr;
    int slot_ = -1;
    float* data_ = nullptr;
  };
  Lease lease(std::size_t n) { return Lease(*this, n); }

 private:
  struct Slot {
    float* data = nullptr;     // from memory_
    std::size_t capacity = 0;  // floats
    bool in_use = false;
  };
  Memory memory_;
  std::vector<Slot> slots_;
  std::size_t reserved_bytes_ = 0;
};

}  // namespace memtrain::core
