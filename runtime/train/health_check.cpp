#include "runtime/train/health_check.hpp"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "models/f32_access.hpp"

namespace memtrain::train {
namespace {

// edit(bytes) on the tensor's bytes in host memory: in place on the CPU; on a GPU through a host
// copy written back after (Note [A tensor's bytes are touched by its device]).
template <class Edit>
void edit_on_host(core::Tensor& t, Edit&& edit) {
  if (t.device() == kernels::Device::cpu) {
    edit(static_cast<std::byte*>(models::raw_bytes(t)));
    return;
  }
  std::vector<std::byte> host(t.nbytes());
  t.copy_to_host(host.data());
  edit(host.data());
  t.copy_from_host(host.data());
}

// XXH64_update over the tensor's bytes, read where they are on the CPU, copied back from a GPU.
void hash_tensor(XXH64_state_t* state, const core::Tensor& t) {
  if (t.device() == kernels::Device::cpu) {
    XXH64_update(state, models::raw_bytes(t), t.nbytes());
    return;
  }
  std::vector<std::byte> host(t.nbytes());
  t.copy_to_host(host.data());
  XXH64_update(state, host.data(), host.size());
}

// Elements of `t` whose stored exponent is all ones (inf or NaN) in its dtype.
std::int64_t non_finite_elements(const core::Tensor& t) {
  std::vector<std::byte> host;
  const std::byte* bytes = nullptr;
  if (t.device() == kernels::Device::cpu) {
    bytes = static_cast<const std::byte*>(models::raw_bytes(t));
  } else {
    host.resize(t.nbytes());
    t.copy_to_host(host.data());
    bytes = host.data();
  }
  std::int64_t bad = 0;
  const std::int64_t n = t.numel();
  if (t.dtype() == core::DType::f32) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint32_t u = 0;
      std::memcpy(&u, bytes + 4 * i, 4);
      bad += (u & 0x7f800000u) == 0x7f800000u ? 1 : 0;
    }
    return bad;
  }
  const std::uint16_t exponent = t.dtype() == core::DType::bf16 ? 0x7f80 : 0x7c00;  // bf16 | f16
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t u = 0;
    std::memcpy(&u, bytes + 2 * i, 2);
    bad += (u & exponent) == exponent ? 1 : 0;
  }
  return bad;
}

std::string hex(std::uint64_t h) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(h));
  return s;
}

// "" when every member of `group` has the same digest, else the line naming who differs.
std::string compare(comms::Communicator& group, comms::Communicator& world, std::uint64_t digest, const char* what,
                    std::int64_t step) {
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
    if (c > best)
      best = c, majority = d, ties = 1;
    else if (c == best)
      ++ties;
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
    if (p.value.nbytes() > 0) hash_tensor(state.get(), p.value);
    if (p.master.defined() && p.master.nbytes() > 0) hash_tensor(state.get(), p.master);
  }
  return XXH64_digest(state.get());
}

std::string check_replicas(const std::vector<models::Parameter>& params, comms::ProcessGrid& grid, std::int64_t step) {
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

std::string check_finite(const std::vector<models::Parameter>& params, comms::ProcessGrid& grid, std::int64_t step) {
  std::int64_t bad = 0;
  for (const auto& p : params) {
    if (p.value.nbytes() > 0) bad += non_finite_elements(p.value);
    if (p.master.defined() && p.master.nbytes() > 0) bad += non_finite_elements(p.master);
  }
  if (grid.world().size() > 1) grid.world().allreduce_sum(&bad, 1);
  if (bad == 0) return "";
  return "step " + std::to_string(step) + ": " + std::to_string(bad) + " parameter elements are inf or NaN";
}

void inject_nan_gradient(models::BertForMaskedLM& model) {
  auto& p = model.parameters().front();
  if (p.grad.numel() == 0) return;
  const bool f32 = p.grad.dtype() == core::DType::f32;
  const std::uint16_t half_nan = p.grad.dtype() == core::DType::bf16 ? 0x7fc0 : 0x7e00;
  edit_on_host(p.grad, [&](std::byte* b) {
    if (f32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(b, &nan, 4);
    } else {
      std::memcpy(b, &half_nan, 2);
    }
  });
}

void flip_parameter_bit(models::BertForMaskedLM& model) {
  auto& p = model.parameters().front();
  if (p.value.numel() == 0) return;
  const auto flip_f32 = [](std::byte* b) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, b, 4);
    bits ^= 1u << 22;
    std::memcpy(b, &bits, 4);
  };
  if (p.value.dtype() == core::DType::f32) {
    edit_on_host(p.value, flip_f32);
  } else {
    edit_on_host(p.value, [](std::byte* b) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, b, 2);
      bits ^= 1u << 9;
      std::memcpy(b, &bits, 2);
    });
  }
  if (p.master.defined()) edit_on_host(p.master, flip_f32);
}

}  // namespace memtrain::train
