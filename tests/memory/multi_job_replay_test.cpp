// Several jobs on one simulated device (memory/multi_job_replay.hpp). Every expected figure is
// computed by hand from the traces written here: sizes are multiples of 2 MiB and at least
// 20 MiB, which every policy serves with a segment of exactly the request (PyTorch's rule for
// requests over 10 MiB: round to 2 MiB; best_fit and vmm_stitch: 2 MiB pages), so a job that
// frees a block keeps exactly that many bytes cached.
#include "memory/multi_job_replay.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "memory/trace_format_error.hpp"

namespace memtrain::memory {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

JobTrace trace_of(const std::string& rows, const std::string& name = "t.csv") {
  std::istringstream in("op,id,bytes,stream,tag\n" + rows);
  std::vector<StepMark> steps;
  const std::vector<TraceOp> ops = parse_trace_csv(in, name, &steps);
  return JobTrace(ops, steps, name);
}

std::string alloc(const char* id, std::size_t mib) {
  return std::string("alloc,") + id + "," + std::to_string(mib * kMiB) + ",0,activation\n";
}
std::string free_(const char* id) { return std::string("free,") + id + ",,0,\n"; }

const std::vector<std::string> kCachingPolicies = {"pytorch", "best_fit", "vmm_stitch"};

// A caches 60 MiB in its first step and holds it through its second (empty) step; B, starting
// at tick 1, needs 60 MiB on a 100 MiB device, where only 40 MiB are free.
struct TwoJobs {
  JobTrace a = trace_of("step,0\n" + alloc("x", 60) + free_("x") + "step,1\nstep,2\n", "a.csv");
  JobTrace b = trace_of(alloc("z", 60) + free_("z"), "b.csv");
  std::vector<ScheduledJob> jobs{{"A", &a, 0, 2, 1, 0}, {"B", &b, 1, 1, 1, 0}};
};

TEST(MultiJobReplay, CachedSegmentsOfAnotherJobAreReleasedBeforeAJobFails) {
  TwoJobs w;
  for (const auto& policy : kCachingPolicies) {
    const MultiJobReport r = replay_jobs(w.jobs, policy, 100 * kMiB, {.release = true});
    EXPECT_EQ(r.failures, 0u) << policy;
    EXPECT_EQ(r.releases, 1u) << policy;
    EXPECT_EQ(r.released_bytes, 60 * kMiB) << policy;
    EXPECT_EQ(r.ticks, 2u) << policy;
    EXPECT_EQ(r.events, 4u) << policy;
    // Tick 0: A's 60 MiB live (60 of 60 reserved). Tick 1: B's 60 MiB live after A released.
    ASSERT_EQ(r.timeline.size(), 2u) << policy;
    for (const TickSample& s : r.timeline) {
      EXPECT_EQ(s.allocated_bytes, 60 * kMiB) << policy;
      EXPECT_EQ(s.reserved_bytes, 60 * kMiB) << policy;
    }
    EXPECT_EQ(r.timeline[1].active_jobs, 2u) << policy;
    EXPECT_EQ(r.peak_allocated_bytes, 60 * kMiB) << policy;
    EXPECT_EQ(r.peak_reserved_bytes, 60 * kMiB) << policy;
    EXPECT_DOUBLE_EQ(r.utilization, 1.0) << policy;
    EXPECT_DOUBLE_EQ(r.device_utilization, 0.6) << policy;
    EXPECT_DOUBLE_EQ(r.mean_utilization, 1.0) << policy;
  }
}

TEST(MultiJobReplay, WithoutReleaseTheJobFailsWhileAnotherCachesEnough) {
  TwoJobs w;
  for (const auto& policy : kCachingPolicies) {
    const MultiJobReport r = replay_jobs(w.jobs, policy, 100 * kMiB, {.release = false});
    ASSERT_EQ(r.failures, 1u) << policy;
    EXPECT_EQ(r.releases, 0u) << policy;
    const JobFailure& f = r.failure_list[0];
    EXPECT_EQ(f.job, "B") << policy;
    EXPECT_EQ(f.tick, 1u) << policy;
    EXPECT_EQ(f.step, 1u) << policy;
    EXPECT_EQ(f.line, 2u) << policy;  // b.csv: the header, then alloc z
    EXPECT_EQ(f.request_bytes, 60 * kMiB) << policy;
    EXPECT_EQ(f.device_free_bytes, 40 * kMiB) << policy;
    EXPECT_EQ(f.stranded_bytes, 60 * kMiB) << policy;
    EXPECT_EQ(f.stranded_releasable_bytes, 60 * kMiB) << policy;
    EXPECT_TRUE(f.cached_memory_would_cover) << policy;
    EXPECT_EQ(r.failures_cached_memory_would_cover, 1u) << policy;
    EXPECT_EQ(r.stranded_bytes_at_failures, 60 * kMiB) << policy;
    EXPECT_EQ(r.jobs[0].failed_runs, 0u) << policy;
    EXPECT_EQ(r.jobs[1].failed_runs, 1u) << policy;
    // Tick 1 never allocated: 0 of A's 60 MiB cache in use.
    EXPECT_EQ(r.timeline[1].allocated_bytes, 0u) << policy;
    EXPECT_EQ(r.timeline[1].reserved_bytes, 60 * kMiB) << policy;
    EXPECT_EQ(r.timeline[1].failures, 1u) << policy;
    EXPECT_DOUBLE_EQ(r.mean_utilization, 0.5) << policy;  // (60/60 + 0/60) / 2
  }
}

// no_cache returns every block at once: nothing is ever stranded, release or not. planned
// reserves A's whole arena (60 MiB) for both its ticks: B's arena does not fit beside it, and
// an arena is never released, so B fails either way with A's 60 MiB stranded, none releasable.
TEST(MultiJobReplay, PoliciesThatDoNotCacheHaveNothingToRelease) {
  TwoJobs w;
  for (const bool release : {true, false}) {
    const MultiJobReport none = replay_jobs(w.jobs, "no_cache", 100 * kMiB, {.release = release});
    EXPECT_EQ(none.failures, 0u);
    EXPECT_EQ(none.releases, 0u);
    EXPECT_EQ(none.peak_reserved_bytes, 60 * kMiB);

    const MultiJobReport planned = replay_jobs(w.jobs, "planned", 100 * kMiB, {.release = release});
    ASSERT_EQ(planned.failures, 1u);
    EXPECT_EQ(planned.failure_list[0].job, "B");
    EXPECT_EQ(planned.failure_list[0].line, 0u);  // its arena, at its start
    EXPECT_EQ(planned.failure_list[0].request_bytes, 60 * kMiB);
    EXPECT_EQ(planned.failure_list[0].stranded_bytes, 60 * kMiB);
    EXPECT_EQ(planned.failure_list[0].stranded_releasable_bytes, 0u);
    EXPECT_FALSE(planned.failure_list[0].cached_memory_would_cover);
    EXPECT_EQ(planned.releases, 0u);
  }
}

// Three jobs on 100 MiB: A caches 40 MiB and holds it for three ticks, B holds a live 40 MiB
// block for three ticks, C needs `c` MiB at tick 1. With c = 50: 20 MiB free + A's 40 cover it
// once A releases. With c = 70: 20 + 40 < 70, a true shortage: C fails even with release (A's
// cache was released for nothing) and nothing is stranded at that moment except without release.
TEST(MultiJobReplay, ThreeJobsWhoFailsAndWhatIsStranded) {
  const JobTrace a = trace_of("step,0\n" + alloc("a", 40) + free_("a") + "step,1\nstep,2\nstep,3\n", "a.csv");
  const JobTrace b = trace_of(alloc("b", 40) + "step,0\nstep,1\nstep,2\nstep,3\n" + free_("b"), "b.csv");
  const JobTrace c50 = trace_of(alloc("c", 50) + free_("c"), "c.csv");
  const JobTrace c70 = trace_of(alloc("c", 70) + free_("c"), "c.csv");
  for (const auto& policy : kCachingPolicies) {
    std::vector<ScheduledJob> jobs{{"A", &a, 0, 3, 1, 0}, {"B", &b, 0, 3, 1, 0}, {"C", &c50, 1, 1, 1, 0}};
    const MultiJobReport with = replay_jobs(jobs, policy, 100 * kMiB, {.release = true});
    EXPECT_EQ(with.failures, 0u) << policy;
    EXPECT_EQ(with.released_bytes, 40 * kMiB) << policy;
    // Tick 0: A's 40 MiB then B's 40 MiB (A freed in between): fullest 40 of 40 reserved.
    // Tick 1: B's 40 + C's 50 = 90 of 90. Tick 2: B's 40 of 40 (C ended, A released).
    ASSERT_EQ(with.timeline.size(), 3u) << policy;
    EXPECT_EQ(with.timeline[0].allocated_bytes, 40 * kMiB) << policy;
    EXPECT_EQ(with.timeline[0].reserved_bytes, 40 * kMiB) << policy;
    EXPECT_EQ(with.timeline[0].peak_reserved_bytes, 80 * kMiB) << policy;
    EXPECT_EQ(with.timeline[1].allocated_bytes, 90 * kMiB) << policy;
    EXPECT_EQ(with.timeline[1].reserved_bytes, 90 * kMiB) << policy;
    EXPECT_EQ(with.timeline[2].allocated_bytes, 40 * kMiB) << policy;
    EXPECT_EQ(with.timeline[2].reserved_bytes, 40 * kMiB) << policy;
    EXPECT_EQ(with.peak_allocated_bytes, 90 * kMiB) << policy;
    EXPECT_DOUBLE_EQ(with.device_utilization, 0.9) << policy;

    const MultiJobReport without = replay_jobs(jobs, policy, 100 * kMiB, {.release = false});
    ASSERT_EQ(without.failures, 1u) << policy;
    EXPECT_EQ(without.failure_list[0].job, "C") << policy;
    EXPECT_EQ(without.failure_list[0].device_free_bytes, 20 * kMiB) << policy;
    EXPECT_EQ(without.failure_list[0].stranded_bytes, 40 * kMiB) << policy;  // A's; B's block is live
    EXPECT_TRUE(without.failure_list[0].cached_memory_would_cover) << policy;

    jobs[2].trace = &c70;
    const MultiJobReport short_with = replay_jobs(jobs, policy, 100 * kMiB, {.release = true});
    ASSERT_EQ(short_with.failures, 1u) << policy;
    EXPECT_EQ(short_with.failure_list[0].job, "C") << policy;
    EXPECT_EQ(short_with.failure_list[0].device_free_bytes, 60 * kMiB) << policy;
    EXPECT_EQ(short_with.failure_list[0].stranded_bytes, 0u) << policy;
    EXPECT_FALSE(short_with.failure_list[0].cached_memory_would_cover) << policy;
    EXPECT_EQ(short_with.releases, 1u) << policy;

    const MultiJobReport short_without = replay_jobs(jobs, policy, 100 * kMiB, {.release = false});
    ASSERT_EQ(short_without.failures, 1u) << policy;
    EXPECT_EQ(short_without.failure_list[0].stranded_bytes, 40 * kMiB) << policy;
    EXPECT_FALSE(short_without.failure_list[0].cached_memory_would_cover) << policy;
  }
}

// Two jobs that start together reach the middle of their steps together (Note [The common
// clock of a multi-job replay]): both 30 MiB blocks are live at once, 60 MiB, not 30.
TEST(MultiJobReplay, JobsOfOneTickRunSideBySide) {
  const JobTrace a = trace_of(alloc("a", 30) + free_("a"), "a.csv");
  const JobTrace b = trace_of(alloc("b", 30) + free_("b"), "b.csv");
  const MultiJobReport r = replay_jobs({{"A", &a, 0, 1, 1, 0}, {"B", &b, 0, 1, 1, 0}}, "no_cache", 100 * kMiB);
  EXPECT_EQ(r.peak_allocated_bytes, 60 * kMiB);
  EXPECT_EQ(r.ticks, 1u);
}

// A failed run ends and frees what it held; its job's next run starts at its tick. Runs are
// `steps` + `gap` ticks apart: A's runs start at ticks 0 and 3 (2 steps, gap 1).
TEST(MultiJobReplay, AFailedRunEndsAndTheJobsNextRunStillStarts) {
  // Each run of A asks for 20 MiB in its first step and 90 MiB in its second.
  const JobTrace a = trace_of("step,0\n" + alloc("s", 20) + "step,1\n" + alloc("l", 90) + "step,2\n", "a.csv");
  const MultiJobReport r = replay_jobs({{"A", &a, 0, 2, 2, 1}}, "best_fit", 100 * kMiB);
  EXPECT_EQ(r.ticks, 5u);  // runs at ticks 0-1 and 3-4
  ASSERT_EQ(r.failures, 2u);
  EXPECT_EQ(r.failure_list[0].tick, 1u);
  EXPECT_EQ(r.failure_list[0].step, 2u);
  EXPECT_EQ(r.failure_list[1].run, 1u);
  EXPECT_EQ(r.failure_list[1].tick, 4u);
  EXPECT_EQ(r.jobs[0].runs, 2u);
  EXPECT_EQ(r.jobs[0].failed_runs, 2u);
  EXPECT_EQ(r.timeline[2].reserved_bytes, 0u);  // the idle tick between the runs: all freed
  EXPECT_EQ(r.timeline[2].active_jobs, 0u);
  EXPECT_EQ(r.timeline[3].allocated_bytes, 20 * kMiB);
}

// A run longer than its trace repeats the last recorded step; a shorter one stops after its
// steps and frees what it holds. Step 1 keeps a 20 MiB block; step 2 allocates 30 MiB and
// frees it; the epilogue frees the 20 MiB block.
TEST(MultiJobReplay, RunsLongerThanTheTraceRepeatItsLastStepAndShorterOnesAreCut) {
  const JobTrace a =
      trace_of("step,0\n" + alloc("k", 20) + "step,1\n" + alloc("t", 30) + free_("t") + "step,2\n" + free_("k"));
  EXPECT_EQ(a.recorded_steps(), 2u);
  const MultiJobReport longer = replay_jobs({{"A", &a, 0, 5, 1, 0}}, "no_cache", 100 * kMiB);
  EXPECT_EQ(longer.ticks, 5u);
  EXPECT_EQ(longer.events, 1u + 2u * 4u + 1u);
  EXPECT_EQ(longer.timeline[4].allocated_bytes, 50 * kMiB);
  const MultiJobReport shorter = replay_jobs({{"A", &a, 0, 1, 1, 0}}, "no_cache", 100 * kMiB);
  EXPECT_EQ(shorter.events, 1u);
  EXPECT_EQ(shorter.peak_allocated_bytes, 20 * kMiB);
}

// With three recorded steps the steady one, step 2, fills the ticks the trace does not cover
// and step 3 (its final evaluation: 40 MiB) comes last: ticks 1-3 hold 20 + 30 MiB at their
// fullest, tick 4 holds 20 + 40 MiB.
TEST(MultiJobReplay, TheStepBeforeTheLastFillsTheTicksBetween) {
  const JobTrace a = trace_of("step,0\n" + alloc("k", 20) + "step,1\n" + alloc("t", 30) + free_("t") + "step,2\n" +
                              alloc("e", 40) + free_("e") + "step,3\n" + free_("k"));
  EXPECT_EQ(a.repeated_step(), 2u);
  const MultiJobReport r = replay_jobs({{"A", &a, 0, 5, 1, 0}}, "no_cache", 100 * kMiB);
  ASSERT_EQ(r.timeline.size(), 5u);
  EXPECT_EQ(r.timeline[0].allocated_bytes, 20 * kMiB);
  for (int t = 1; t <= 3; ++t) EXPECT_EQ(r.timeline[t].allocated_bytes, 50 * kMiB) << t;
  EXPECT_EQ(r.timeline[4].allocated_bytes, 60 * kMiB);
  EXPECT_EQ(r.events, 1u + 3u * 2u + 2u + 1u);
}

// Step 1 here keeps its block: repeating it would allocate a live id twice.
TEST(MultiJobReplay, ALastStepThatIsNotSelfContainedCannotRepeat) {
  const JobTrace a = trace_of("step,0\n" + alloc("k", 20) + "step,1\n", "a.csv");
  EXPECT_NO_THROW(a.check_repeatable(1, "A"));
  try {
    a.check_repeatable(2, "A");
    FAIL() << "expected TraceFormatError";
  } catch (const TraceFormatError& e) {
    EXPECT_EQ(std::string(e.what()),
              "a.csv:3: job 'A' runs 2 steps and the trace recorded 1, so its step 1 repeats, but that step keeps "
              "id 'k' it allocates; record more steps (training.max_steps) or set the job's steps to at most 1");
  }
}

TEST(MultiJobReplay, RefusesWhatCannotRun) {
  const JobTrace a = trace_of(alloc("a", 20) + free_("a"));
  EXPECT_THROW(replay_jobs({{"A", &a, 0, 1, 1, 0}}, "first_fit", kMiB), std::invalid_argument);
  EXPECT_THROW(replay_jobs({{"A", &a, 0, 1, 1, 0}}, "best_fit", 0), std::invalid_argument);
  EXPECT_THROW(replay_jobs({{"A", &a, 0, 0, 1, 0}}, "best_fit", kMiB), std::invalid_argument);
  EXPECT_THROW(replay_jobs({{"A", &a, 0, 1, 0, 0}}, "best_fit", kMiB), std::invalid_argument);
  EXPECT_THROW(replay_jobs({{"A", nullptr, 0, 1, 1, 0}}, "best_fit", kMiB), std::invalid_argument);
}

}  // namespace
}  // namespace memtrain::memory
