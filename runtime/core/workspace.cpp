#include "runtime/core/workspace.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "memory/huge_pages.hpp"
#include "memory/out_of_memory.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::core {

namespace {
constexpr std::size_t kAlignment = 64;  // a cache line; also what AVX-512 loads want
}

Workspace::Memory Workspace::host_memory(bool huge_pages) {
  const auto huge = [huge_pages](std::size_t bytes) { return huge_pages && bytes >= memory::kHugePageBytes; };
  return Memory{[huge](std::size_t bytes) -> void* {
                  void* p = nullptr;
                  if (huge(bytes)) {
                    try {
                      p = memory::map_huge_pages(bytes, kAlignment);
                    } catch (const OutOfMemory&) {
                      throw std::bad_alloc();  // the workspace's contract, as aligned_alloc's failure
                    }
                  } else {
                    p = std::aligned_alloc(kAlignment, bytes);
                  }
                  if (p == nullptr) throw std::bad_alloc();
                  // Note [Workspace growth is rare and touches its pages once]
                  std::memset(p, 0, bytes);
                  return p;
                },
                [huge](void* p, std::size_t bytes) {
                  if (huge(bytes)) {
                    memory::unmap_huge_pages(p, bytes);
                  } else {
                    std::free(p);
                  }
                }};
}

Workspace::Workspace() : Workspace(host_memory(false)) {}

Workspace::Workspace(Memory memory) : memory_(std::move(memory)) {}

Workspace::~Workspace() {
  for (auto& s : slots_) {
    if (s.data != nullptr) memory_.release(s.data, s.capacity * sizeof(float));
  }
}

float* Workspace::floats(int slot, std::size_t n) {
  if (slot < 0) throw RuntimeError("Workspace::floats: slot " + std::to_string(slot) + " < 0");
  if (static_cast<std::size_t>(slot) >= slots_.size()) slots_.resize(slot + 1);
  Slot& s = slots_[slot];
  if (n > s.capacity) {
    if (n > (std::numeric_limits<std::size_t>::max() - kAlignment) / sizeof(float) / 2) {
      throw std::bad_alloc();
    }
    // Note [Workspace growth is rare and touches its pages once]
    // A slot's size follows its largest request, and some requests vary from step to step (the
    // MLM head's [masked, V] logits: the masked count is random), so a buffer sized exactly
    // would be replaced whenever a new maximum comes, each time by fresh pages that fault on
    // first touch inside the step. Buffers of 1 MiB or more therefore take an eighth more than
    // asked, and every new buffer is written once here: a row view (Note [Row views of
    // embedding tables]) touches a different few rows of its table-sized buffer every step, and
    // ran at 1.7 GB/s, a page fault a row, until all of its pages had been touched (issue 15).
    // The host Memory does that write.
    std::size_t bytes = (n * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
    if (bytes >= (std::size_t{1} << 20)) bytes = (bytes + bytes / 8 + kAlignment - 1) / kAlignment * kAlignment;
    auto* p = static_cast<float*>(memory_.allocate(bytes));
    if (s.data != nullptr) memory_.release(s.data, s.capacity * sizeof(float));
    reserved_bytes_ -= s.capacity * sizeof(float);
    s.data = p;
    s.capacity = bytes / sizeof(float);
    reserved_bytes_ += bytes;
  }
  return s.data;
}

int Workspace::acquire() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].in_use) {
      slots_[i].in_use = true;
      return static_cast<int>(i);
    }
  }
  slots_.emplace_back();
  slots_.back().in_use = true;
  return static_cast<int>(slots_.size()) - 1;
}

void Workspace::release(int slot) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= slots_.size() || !slots_[slot].in_use) {
    throw RuntimeError("Workspace::release: slot " + std::to_string(slot) + " is not in use");
  }
  slots_[slot].in_use = false;
}

int Workspace::slots_in_use() const {
  int n = 0;
  for (const auto& s : slots_) n += s.in_use ? 1 : 0;
  return n;
}

Workspace::Lease::Lease(Workspace& ws, std::size_t n) : ws_(&ws), slot_(ws.acquire()) {
  try {
    data_ = ws.floats(slot_, n);
  } catch (...) {
    ws.release(slot_);
    throw;
  }
}

Workspace::Lease& Workspace::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    ws_ = o.ws_;
    slot_ = o.slot_;
    data_ = o.data_;
    o.ws_ = nullptr;
  }
  return *this;
}

void Workspace::Lease::reset() {
  if (ws_ != nullptr) ws_->release(slot_);
  ws_ = nullptr;
  data_ = nullptr;
}

}  // namespace memtrain::core
