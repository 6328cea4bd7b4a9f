#pragma once
// Writing one checkpoint file so that, once the call returns, its bytes are on the disk.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace memtrain::checkpoint {

// Bytes a process may still write into checkpoint files before it SIGKILLs itself
// (MEMTRAIN_FAULT=kill_in_checkpoint=N); unlimited when not armed.
class WriteBudget {
 public:
  WriteBudget() = default;
  explicit WriteBudget(std::int64_t bytes) : armed_(true), left_(bytes) {}
  // How many of `n` bytes may be written before the fault fires (n when unarmed).
  std::size_t allow(std::size_t n) const;
  // Counts `n` written bytes; SIGKILLs the process when the budget is used up.
  void spend(std::size_t n);

 private:
  bool armed_ = false;
  std::int64_t left_ = 0;
};

// Creates (or truncates) `path`, writes `bytes` with write(2), fsyncs and closes it. Throws
// memtrain::RuntimeError "cannot write <path>: <strerror>" on any failure (ENOSPC included),
// after removing the partial file. `budget` (optional) counts the bytes for fault injection.
void write_file_durably(const std::string& path, std::span<const std::byte> bytes, WriteBudget* budget = nullptr);
// The same for a file made of `pieces` in order (a header, then tensors written straight from
// their memory, with no copy of the whole file). Same errors.
void write_file_durably(const std::string& path, std::span<const std::span<const std::byte>> pieces,
                        WriteBudget* budget = nullptr);

}  // namespace memtrain::checkpoint
