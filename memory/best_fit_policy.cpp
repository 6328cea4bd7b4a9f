#include <memory>

#include "memory/allocation_policy.hpp"
#include "memory/allocation_policy_registry.hpp"
#include "memory/best_fit_rules.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kAlignment = 256;  // the Allocator contract
constexpr std::size_t kSmallSize = std::size_t{1} << 20;
constexpr std::size_t kSmallSegment = std::size_t{2} << 20;
constexpr std::size_t kLargeRound = std::size_t{2} << 20;

// Note [best_fit: reserve only what is needed, reuse across streams]
// Best fit over free blocks ordered by (stream, size, address), splitting the chosen block
// and coalescing a freed block with free neighbours, as PyTorch does, with three changes aimed
// at peak reserved memory rather than at the number of device calls:
// - Sizes round to 256 B (the alignment every block needs), not 512 B.
// - Small requests stay out of large segments: up to 1 MiB they are served from their own
//   2 MiB segments. A 10 KiB tensor carved from a cached 4 GiB block pins the whole segment: the
//   next 4 GiB request cannot reuse it and the device needs 8 GiB for 4 GiB of live data.
// - A large request gets a segment of its size rounded to 2 MiB, never a 20 MiB buffer: the
//   buffer saves device calls but is reserved-and-unused memory, which is what this policy
//   minimises. A large-pool remainder is split off only above 1 MiB (smaller pieces could serve
//   no large request; they rejoin the block when it is freed).
// - A new segment that would raise peak reserved memory first returns cached whole segments
//   (of any stream) to the upstream: when a growing sequence length needs larger blocks, the
//   segments of the smaller ones would otherwise stay cached beside them, and the peak would
//   hold both. Below the peak nothing is released, so steady training loops keep their cache
//   and pay no device calls. Before releasing, another stream's whole cached segment that fits
//   is taken over (after waiting for that stream): no device call at all. With expandable
//   segments none of this is needed, they grow over their own free end.
// - Before failing, another stream's whole cached segment is taken over (after waiting for
//   that stream) instead of being returned to the device and allocated again, then cached whole
//   segments are released and the request retried once (CachingAllocator's failure order).
// max_split_size keeps PyTorch's meaning: blocks of at least that size are never split and
// serve only requests of at least that size wasting less than 20 MiB.
class BestFitPolicy final : public AllocationPolicy {
 public:
  // A large-pool remainder is split off only above 1 MiB.
  explicit BestFitPolicy(std::size_t max_split_size) : rules_{max_split_size, kSmallSize + 1} {}
  std::string_view name() const override { return "best_fit"; }
  std::size_t round_size(std::size_t bytes) const override { return round_up_checked(bytes, kAlignment); }
  Pool pool_for(std::size_t rounded) const override { return rounded <= kSmallSize ? Pool::small : Pool::large; }
  std::size_t segment_size(std::size_t rounded) const override {
    return rounded <= kSmallSize ? kSmallSegment : round_up_checked(rounded, kLargeRound);
  }
  bool may_serve(Pool, std::size_t block_size, std::size_t rounded) const override {
    return rules_.may_serve(block_size, rounded);
  }
  bool should_split(Pool pool, std::size_t block_size, std::size_t rounded) const override {
    return rules_.should_split(pool, block_size, rounded);
  }
  bool reclaims_other_streams() const override { return true; }
  bool holds_peak() const override { return true; }

 private:
  BestFitRules rules_;
};

}  // namespace

PolicyRegistration best_fit_policy_registration() {
  return {
      .name = "best_fit",
      .make = [](const AllocatorOptions& options, std::size_t) -> std::unique_ptr<AllocationPolicy> {
        return std::make_unique<BestFitPolicy>(options.max_split_size);
      },
  };
}

}  // namespace memtrain::memory
