#include "kernels/cpu/fill.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "kernels/cpu/threads.hpp"

namespace memtrain::kernels {
namespace {

// Every byte of [offset, offset + bytes) becomes zero and the guard bytes on both sides keep
// their pattern: sizes under the parallel threshold, exactly 1 MiB pieces, and a ragged last
// piece above it, at an odd offset, on 1 and 2 threads (the pieces' edges against memset's
// definition).
TEST(FillZero, ZeroesExactlyTheRangeOnOneAndTwoThreads) {
  const int saved = num_threads();
  constexpr std::size_t kMiB = std::size_t{1} << 20, kGuard = 64, kOffset = 3;
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, kMiB + 7, 8 * kMiB, 9 * kMiB + 5}) {
      std::vector<unsigned char> buf(kOffset + bytes + kGuard, 0xAB);
      fill_zero(buf.data() + kOffset, bytes);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < buf.size(); ++i) {
        const bool inside = i >= kOffset && i < kOffset + bytes;
        wrong += buf[i] != (inside ? 0x00 : 0xAB);
      }
      EXPECT_EQ(wrong, 0u) << bytes << " bytes on " << threads << " threads";
    }
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace memtrain::kernels
