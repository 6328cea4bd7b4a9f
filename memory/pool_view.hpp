#pragma once
// What `memtrain top` shows of a shared ledger (design.md, "Many jobs on one pool"): one entry
// per job with its figures summed over its processes, as a table, a JSON document, or
// Prometheus's text exposition format.
#include <nlohmann/json.hpp>
#include <string>

#include "memory/shared_ledger.hpp"

namespace memtrain::memory {

// The JSON document of `memtrain top --json`:
//   {"ledger", "host", "capacity_bytes", "committed_bytes", "reserved_bytes",
//    "jobs": [{"run_dir", "name", "ranks", "pids", "state", "step", "allocated_bytes",
//              "reserved_bytes", "peak_reserved_bytes", "releasable_bytes", "charged_bytes",
//              "reservation_bytes", "limit_bytes" (null: none), "tokens_per_s", "fragmentation",
//              "policy", "num_ooms", "releases", "released_bytes", "per_rank": [...]}]}
// Bytes and counts are summed over a job's processes; step is the lowest (the job is as far as
// its slowest rank), tokens_per_s the sum, fragmentation the largest; state is the first
// process's, or "waiting" when any waits.
nlohmann::ordered_json pool_json(const std::string& ledger, const std::string& host, const LedgerSnapshot& snap);

// A fixed-width table for a terminal: a header line with the ledger's capacity and committed
// bytes, then one line per job (name, state, step, ranks, allocated, reserved, releasable,
// reservation, limit, tokens/s, OOMs). Sizes in binary units (format_byte_size).
std::string pool_table(const std::string& ledger, const std::string& host, const LedgerSnapshot& snap);

// Prometheus text format 0.0.4 (what `promtool check metrics` reads): gauges
// memtrain_pool_capacity_bytes, memtrain_pool_committed_bytes, memtrain_pool_jobs and per job
// memtrain_job_{allocated,reserved,peak_reserved,releasable,charged,reservation}_bytes,
// memtrain_job_step, memtrain_job_ranks, memtrain_job_tokens_per_second,
// memtrain_job_fragmentation_ratio; counters memtrain_job_ooms_total,
// memtrain_job_releases_total, memtrain_job_released_bytes_total. Labels: ledger, host, and per
// job job (its name) and run_dir (its key), escaped as the format requires.
std::string pool_prometheus(const std::string& ledger, const std::string& host, const LedgerSnapshot& snap);

}  // namespace memtrain::memory
