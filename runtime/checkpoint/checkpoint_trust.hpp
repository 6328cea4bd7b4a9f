#pragma once
// Whether a checkpoint may be resumed or rolled back to: only once a health check at or after
// its step has passed (Note [A checkpoint is trusted once a health check has passed]).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_store.hpp"

namespace memtrain::checkpoint {

// Note [A checkpoint is trusted once a health check has passed]
// A fault is detected after it happened: replicas that disagree are found at the next
// health.consistency_interval step, a NaN at the next step's gradient norm, a streak of
// skipped steps only when it ends. A checkpoint written between the fault and its detection
// holds the faulty state, verifies (its bytes are the ones written) and is newer than every
// good one, so a rollback or resume that takes "the newest valid" continues from the fault and
// ends with exit 0 and a wrong result. So a checkpoint carries a trust bit:
// - meta.json "trusted": true when the checks ran right before it was written and passed
//   (the step's replica check, a step that was not skipped, a stop's checks); false otherwise.
// - A checkpoint written untrusted becomes trusted when a later health check passes (the next
//   replica check, the next step that is not skipped): rank 0 then writes trusted.json into
//   its directory ({"trusted_at_step": t}), atomically. Not rewriting meta.json keeps the
//   manifest's checksums what was written: a crash mid-rewrite cannot spoil a good checkpoint.
// - Checkpoints written before trust was recorded (no "trusted" in meta.json) count as trusted.
// Resume and rollback take the newest checkpoint that verifies and is trusted; rotation
// (keep_last) never removes the newest trusted one; a rollback removes the checkpoints newer
// than the one it loads (they hold the fault's state; the steps run again and rewrite them).

// The file a later health check writes into an untrusted checkpoint.
inline constexpr const char* kTrustFile = "trusted.json";

struct Trust {
  bool trusted = false;
  // "at write" (its own step's checks passed), "by step N" (a later check), "not recorded"
  // (written before trust was recorded), or "no" (pending a health check).
  std::string how;
};

// The trust of the checkpoint directory `dir` from its meta.json and trusted.json. A meta.json
// or trusted.json that cannot be read counts as untrusted ("unreadable ..."). Throws nothing.
Trust read_trust(const std::string& dir);

// Records that the health check of step `checked_at_step` passed for the checkpoint in `dir`
// (writes trusted.json durably, through a temporary file and a rename). Throws
// memtrain::RuntimeError when it cannot be written.
void mark_trusted(const std::string& dir, std::int64_t checked_at_step);

// A further check of a candidate that verified and is trusted: the problems that stop it from
// loading ("<file>: <what>"), none when it loads. The layer that knows the model supplies it
// (runtime/train's verify_loadable): this one reads files, not models.
using LoadCheck = std::function<std::vector<std::string>(const StoredCheckpoint&)>;

// The newest checkpoint under `root` of step <= max_step that verifies, is trusted and, when
// `load_check` is given, has no problem by it. Each newer one that is skipped gets a line
// "skipping checkpoint <dir>: <why>" in *warnings (one per problem). Throws what load_check
// throws.
std::optional<StoredCheckpoint> newest_trusted_checkpoint(const std::string& root, std::int64_t max_step,
                                                          std::vector<std::string>* warnings,
                                                          const LoadCheck& load_check = {});

}  // namespace memtrain::checkpoint
