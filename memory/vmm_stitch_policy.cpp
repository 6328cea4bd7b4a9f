#include <algorithm>
#include <memory>
#include <stdexcept>

#include "memory/allocation_policy.hpp"
#include "memory/allocation_policy_registry.hpp"
#include "memory/best_fit_rules.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kAlignment = 256;
constexpr std::size_t kSmallSize = std::size_t{1} << 20;
constexpr std::size_t kSmallSegment = std::size_t{2} << 20;

// Note [vmm_stitch: map fragmented pages into one range]
// GMLake (Guo et al., ASPLOS 2024): on a virtual-memory upstream, memory is pages mapped into
// reserved address ranges, so free space need not be contiguous to be used. When no single free
// block fits a large request, the allocator reserves a new virtual range of the request's size
// and maps into it the physical pages of several free blocks of the request's stream (largest
// first, the last one split at a page boundary), plus fresh pages when the free ones are not
// enough. The stitched block is unmapped when freed and its source blocks become free again;
// nothing is copied and no physical memory is added for the part that was free.
// For that, every large-pool block must be whole pages: large requests round to the mapping
// granularity and large segments are made of page-sized chunks (one handle per page, because
// CUDA maps a chunk only whole, at offset 0). Small requests (up to 1 MiB) keep best_fit's
// separate 2 MiB segments: stitching sub-page blocks is impossible and they fragment least.
// Stitching runs before a new segment is requested when the stream's free large blocks add up
// to the request, and as the last resort before OutOfMemory (with fresh pages for the rest).
// Other rules are best_fit's (Note [best_fit: reserve only what is needed, reuse across streams]).
class VmmStitchPolicy final : public AllocationPolicy {
 public:
  // A large-pool remainder is split off when it is at least one page: whole pages only.
  VmmStitchPolicy(std::size_t max_split_size, std::size_t granularity)
      : rules_{max_split_size, granularity}, page_(granularity) {}
  std::string_view name() const override { return "vmm_stitch"; }
  std::size_t round_size(std::size_t bytes) const override {
    const std::size_t r = round_up_checked(bytes, kAlignment);
    return r <= kSmallSize ? r : round_up_checked(bytes, page_);
  }
  Pool pool_for(std::size_t rounded) const override { return rounded <= kSmallSize ? Pool::small : Pool::large; }
  std::size_t segment_size(std::size_t rounded) const override {
    return round_up_checked(rounded <= kSmallSize ? kSmallSegment : rounded, page_);
  }
  bool may_serve(Pool, std::size_t block_size, std::size_t rounded) const override {
    return rules_.may_serve(block_size, rounded);
  }
  bool should_split(Pool pool, std::size_t block_size, std::size_t rounded) const override {
    return rules_.should_split(pool, block_size, rounded);
  }
  bool reclaims_other_streams() const override { return true; }
  bool holds_peak() const override { return true; }
  bool stitches() const override { return true; }

 private:
  BestFitRules rules_;
  std::size_t page_;
};

}  // namespace

PolicyRegistration vmm_stitch_policy_registration() {
  return {
      .name = "vmm_stitch",
      .maps_pages = true,
      .make = [](const AllocatorOptions& options, std::size_t granularity) -> std::unique_ptr<AllocationPolicy> {
        if (granularity == 0 || (granularity & (granularity - 1)) != 0) {
          throw std::invalid_argument(
              "policy vmm_stitch needs a virtual-memory upstream (CUDA VMM, host memfd VMM or "
              "SimulatedVirtualMemoryResource); this upstream cannot map pages");
        }
        return std::make_unique<VmmStitchPolicy>(options.max_split_size, granularity);
      },
  };
}

}  // namespace memtrain::memory
