#pragma once
// Deciding whether `memtrain train` resumes, and from which checkpoint (docs/checkpoints.md,
// "Resume").
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "runtime/config/config.hpp"
#include "runtime/train/pool_record.hpp"

namespace memtrain::train {

// `train --resume`: auto (the default) resumes when the run directory has a valid checkpoint
// and starts fresh otherwise; required refuses to start without one; never refuses a run
// directory that has checkpoints (starting over would overwrite them).
enum class ResumeMode { automatic, required, never };

// "auto", "required", "never"; throws ConfigError "--resume X: expected auto, required or never".
ResumeMode parse_resume_mode(const std::string& text);

// Where a run starts.
struct ResumePoint {
  bool resume = false;
  std::string checkpoint;      // the step-NNNNNNNN directory loaded
  std::int64_t step = 0;       // its step: training continues with step + 1
  int data_parallel_size = 0;  // the checkpoint's (the run's may differ)
  // The run directory had checkpoints but none verified (auto then starts from step 0).
  bool none_valid = false;
  // The checkpoint's meta.json "bf16_gemm" ("" when it has none): precision.bf16_gemm: auto
  // continues on it (Note [bf16_gemm: auto measures the step's GEMMs]).
  std::string bf16_gemm;
  // The checkpoint's meta.json "pool": a run in a shared pool starts its record there (Note [A
  // pool record travels with the checkpoints]).
  std::optional<PoolRecord> pool;
};

// Looks at run_dir/checkpoints: the newest checkpoint whose manifest verifies, that is trusted
// (checkpoint_trust.hpp) and that loads (verify_loadable: its meta.json, shard files and
// tensors agree with the model its config.yaml describes), each newer one skipped with
// "memtrain: warning: skipping checkpoint DIR: FILE: PROBLEM" on `warnings`; and checks that
// `config` may resume it (resume_compatibility.hpp). Throws ConfigError (exit 2):
// mode never and the directory has checkpoints; mode required and there is none, or none
// verifies; the config differs in keys that change the trajectory (every such key named,
// with both values); RuntimeError when the checkpoint's meta.json or config.yaml is unreadable.
ResumePoint find_resume_point(const std::string& run_dir, ResumeMode mode, const Config& config,
                              std::ostream& warnings);

}  // namespace memtrain::train
