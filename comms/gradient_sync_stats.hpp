#pragma once
// What one step's data-parallel gradient synchronisation did on one rank.
#include <cstdint>

namespace memtrain::comms {

// What one step's synchronisation did on this rank.
struct GradientSyncStats {
  // Payload bytes handed to collectives: n x 4 per all-reduce of n f32 elements (16-bit
  // gradients travel as f32, Note [16-bit gradients are summed in f32]), whatever algorithm
  // MPI picks. metrics.jsonl comm_bytes.
  std::int64_t bytes = 0;
  // What the same collectives would have carried uncompressed (= bytes without compression):
  // metrics.jsonl compression_ratio = uncompressed_bytes / bytes.
  std::int64_t uncompressed_bytes = 0;
  std::int64_t calls = 0;  // collectives
  // Seconds inside the collectives (on the communication thread when it overlaps backward).
  double comm_s = 0;
  // Seconds finish() waited: the communication backward did not hide (all of it without
  // overlap). metrics.jsonl time_comm_exposed_s.
  double exposed_s = 0;
};

}  // namespace memtrain::comms
