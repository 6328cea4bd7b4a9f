#include "runtime/train/rank_agreement.hpp"

#include <sstream>
#include <string>
#include <vector>

#include "comms/broadcast_string.hpp"
#include "runtime/config/config_hash.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/resume.hpp"

namespace memtrain::train {

// Note [Ranks agree before they start]
// mpirun starts every rank with the same command line, but an MPMD launch (`mpirun -np 1 A : -np
// 1 B`) or a config file that differs between nodes gives ranks other settings, and nothing in
// the collectives notices: other model sizes made MPI move buffers of other lengths (heap
// corruption, then a hang), another max_steps a truncated all-reduce, and another seed, lr or
// tensor-parallel size trained replicas that silently diverged while rank 0 recorded only its
// own config. So before the first collective that depends on the config, rank 0's settings
// (rank_settings) go to every rank, each compares them with its own, and the ranks that differ
// are named: the job stops with a config error (exit 2, printed once by rank 0) instead.
// Excluded: data.cache_dir and training.num_threads, which are this process's own; --run-dir,
// which only rank 0 uses (it writes the run directory and hands the others its checkpoint
// paths); and a dry run's --target, which sizes this rank's simulated device alone (a test
// gives one rank a device too small on purpose: tests/cli/rank_failure_test.cpp).

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const char* resume_name(ResumeMode m) {
  switch (m) {
    case ResumeMode::automatic:
      return "auto";
    case ResumeMode::required:
      return "required";
    case ResumeMode::never:
      return "never";
  }
  return "?";
}

// The first line where `mine` differs from `root`'s, as "<mine> where rank 0 has <root's>".
std::string first_difference(const std::vector<std::string>& root, const std::vector<std::string>& mine) {
  for (std::size_t i = 0; i < root.size() || i < mine.size(); ++i) {
    const std::string a = i < root.size() ? root[i] : "(nothing)";
    const std::string b = i < mine.size() ? mine[i] : "(nothing)";
    if (a != b) return b + " where rank 0 has " + a;
  }
  return "";
}

}  // namespace

std::string rank_settings(const Config& config, const RunOptions& options) {
  std::string out;
  // canonical_yaml: top-level "key: value" or "section:" then "  key: value" lines.
  std::string section;
  for (const std::string& line : lines_of(canonical_yaml(config))) {
    if (line.empty()) continue;
    const bool nested = line.rfind("  ", 0) == 0;
    if (!nested && line.back() == ':') {
      section = line.substr(0, line.size() - 1);
      continue;
    }
    const std::string key_value = nested ? section + "." + line.substr(line.find_first_not_of(' ')) : line;
    if (key_value.rfind("data.cache_dir:", 0) == 0 || key_value.rfind("training.num_threads:", 0) == 0) continue;
    out += key_value + "\n";
  }
  out += std::string("--resume: ") + resume_name(options.resume) + "\n";
  out += std::string("--dry-run: ") + (options.dry_run ? "yes" : "no") + "\n";
  out += std::string("--profile-ops: ") + (options.profile_ops ? "yes" : "no") + "\n";
  return out;
}

void check_ranks_agree(comms::Communicator& world, const Config& config, const RunOptions& options) {
  if (world.size() <= 1) return;
  const std::string mine = rank_settings(config, options);
  const std::string root = comms::broadcast_string(world, world.rank() == 0 ? mine : std::string());
  const std::string difference = root == mine ? std::string() : first_difference(lines_of(root), lines_of(mine));
  std::vector<std::int64_t> differs(static_cast<std::size_t>(world.size()), 0);
  differs[static_cast<std::size_t>(world.rank())] = difference.empty() ? 0 : 1;
  world.allreduce_sum(differs.data(), static_cast<std::int64_t>(differs.size()));
  int first = -1, count = 0;
  for (int r = 0; r < world.size(); ++r) {
    if (differs[static_cast<std::size_t>(r)] == 0) continue;
    if (first < 0) first = r;
    ++count;
  }
  if (first < 0) return;
  const std::string what = comms::broadcast_string(world, difference, first);
  throw ConfigError(
      "the ranks were started with different settings (an MPMD launch, or a config file that differs "
      "between nodes?): rank " +
      std::to_string(first) + " has " + what +
      (count > 1 ? " (" + std::to_string(count) + " ranks differ from rank 0)" : std::string()) +
      "; expected every rank to run the same config and options");
}

}  // namespace memtrain::train
