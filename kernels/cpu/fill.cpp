#include "kernels/cpu/fill.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/parallel.hpp"

namespace memtrain::kernels {

void fill_zero(void* dst, std::size_t bytes) {
  constexpr std::size_t kPiece = std::size_t{1} << 20, kParallelBytes = std::size_t{8} << 20;
  auto* d = static_cast<unsigned char*>(dst);
  const auto pieces = static_cast<std::int64_t>((bytes + kPiece - 1) / kPiece);
  detail::parallel_for(pieces, bytes >= kParallelBytes, [=](std::int64_t i) {
    const std::size_t lo = static_cast<std::size_t>(i) * kPiece;
    std::memset(d + lo, 0, std::min(kPiece, bytes - lo));
  });
}

}  // namespace memtrain::kernels
