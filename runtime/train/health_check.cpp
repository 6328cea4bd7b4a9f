#include "runtime/train/health_check.hpp"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

namespace memtrain::train {
namespace {

const void* bytes_of(const core::Tensor& t) {
  return t.dtype() == core::DType::f32   ? static_cast<const void*>(t.data<float>())
         : t.dtype() == core::DType::i32 ? static_cast<const void*>(t.data<std::int32_t>())
                                         : static_cast<const void*>(t.data<std::uint16_t>());
}

std::string hex(std::uint64_t h) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(h));
  return s;
}

// "" when every member of `group` has the same digest, else the line naming who differs.
std::string compare(comms::Communicator& group, comms::Communicator& world, std::uint64_t digest,
                    const char* what, std::int64_t step) {
  const int n = group.size();
  std::vector<std::int64_t> slots(static_cast<std::size_t>(2 * n), 0);  // digest, world rank
  std::int64_t bits = 0;
  std::memcpy(&bits, &digest, sizeof bits);
  slots[static_cast<std::size_t>(2 * group.rank())] = bits;
  slots[static_cast<std::size_t>(2 * group.rank() + 1)] = world.rank();
  if (n > 1) group.allreduce_sum(slots.data(), static_cast<std::int64_t>(slots.size()));
  std::map<std::int64_t, int> votes;
  for (int r = 0; r < n; ++r) ++votes[slots[static_cast<std::size_t>(2 * r)]];
  if (votes.size() <= 1) return "";
  std::int64_t majority = votes.begin()->first;
  int best = 0, ties = 0;
  for (const auto& [d, c] : votes) {
    if (c > best) best = c, majority = d, ties = 1;
    else if (c == best) ++ties;
  }
  std::string line = "step " + std::to_string(step) + ": the " + what + " replicas disagree:";
  for (int r = 0; r < n; ++r) {
    const std::int64_t d = slots[static_cast<std::size_t>(2 * r)];
    if (ties == 1 && d == majority) continue;  // the majority is presumed healthy
    std::uint64_t u = 0;
    std::memcpy(&u, &d, sizeof u);
    line += " world rank " + std::to_string(slots[static_cast<std::size_t>(2 * r + 1)]) + " has XXH64 " + hex(u);
    if (ties == 1) {
      std::uint64_t m = 0;
      std::memcpy(&m, &majority, sizeof m);
      line += " (the others " + hex(m) + ")";
    }
    line += ";";
  }
  line.pop_back();
  return line;
}

}  // namespace

std::uint64_t parameter_digest(const std::vector<models::Parameter>& params, bool replicated_only) {
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(), &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  for (const auto& p : params) {
    if (replicated_only && p.sharded()) continue;
    if (p.value.nbytes() > 0) XXH64_update(state.get(), bytes_of(p.value), p.value.nbytes());
    if (p.master.defined() && p.master.nbytes() > 0) XXH64_update(state.get(), bytes_of(p.master), p.master.nbytes());
  }
  return XXH64_digest(state.get());
}

std::string check_replicas(const std::vector<models::Parameter>& params, comms::ProcessGrid& grid,
                           std::int64_t step) {
  std::string found = compare(grid.dp(), grid.world(), parameter_digest(params, false), "data-parallel", step);
  if (grid.tp_size() > 1) {
    const std::string tp = compare(grid.tp(), grid.world(), parameter_digest(params, true),
                                   "tensor-parallel (replicated parameters)", step);
    if (!tp.empty()) found += (found.empty() ? "" : "; ") + tp;
  }
  // Every rank must take the same decision: the line of the first group that found one.
  std::int64_t length = static_cast<std::int64_t>(found.size());
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(grid.world().size()), 0);
  lengths[static_cast<std::size_t>(grid.world().rank())] = length;
  grid.world().allreduce_sum(lengths.data(), static_cast<std::int64_t>(lengths.size()));
  int source = -1;
  for (int r = 0; r < grid.world().size(); ++r) {
    if (lengths[static_cast<std::size_t>(r)] > 0) {
      source = r;
      break;
    }
  }
  if (source < 0) return "";
  std::string line = grid.world().rank() == source ? found : std::string();
  line.resize(static_cast<std::size_t>(lengths[static_cast<std::size_t>(source)]));
  grid.world().broadcast(line.data(), static_cast<std::int64_t>(line.size()), source);
  return line;
}

void inject_nan_gradient(models::BertForMaskedLM& model) {
  auto& p = model.parameters().front();
  if (p.grad.numel() == 0) return;
  if (p.grad.dtype() == core::DType::f32) {
    p.grad.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  } else {
    p.grad.data<std::uint16_t>()[0] = p.grad.dtype() == core::DType::bf16 ? 0x7fc0 : 0x7e00;
  }
}

void flip_parameter_bit(models::BertForMaskedLM& model) {
  auto& p = model.parameters().front();
  if (p.value.numel() == 0) return;
  if (p.value.dtype() == core::DType::f32) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, p.value.data<float>(), 4);
    bits ^= 1u << 22;
    std::memcpy(p.value.data<float>(), &bits, 4);
  } else {
    p.value.data<std::uint16_t>()[0] ^= 1u << 9;
  }
  if (p.master.defined()) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, p.master.data<float>(), 4);
    bits ^= 1u << 22;
    std::memcpy(p.master.data<float>(), &bits, 4);
  }
}

}  // namespace memtrain::train
