// Note [Cross-job release]: a job whose request is refused while another job caches unused
// segments gets them once the other's LedgerAgent empties its cache; with no wait it fails as
// before; a job that never answers (no agent: a stopped process) bounds the wait and is named.
// Two caching allocators over quota adaptors on one ledger and one simulated device, as two
// processes on one GPU; the byte counts are the segments' sizes, computed by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "memory/caching_allocator.hpp"
#include "memory/ledger_agent.hpp"
#include "memory/out_of_memory.hpp"
#include "memory/quota_resource_adaptor.hpp"
#include "memory/simulated_resource.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using namespace std::chrono_literals;
using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

struct Job {
  std::shared_ptr<QuotaResourceAdaptor> quota;
  std::shared_ptr<CachingAllocator> allocator;
};

Job make_job(const std::shared_ptr<SimulatedResource>& device, const std::shared_ptr<SharedLedger>& ledger,
             const std::string& key, std::chrono::milliseconds wait) {
  JobShare s;
  s.name = key;
  s.key = key;
  s.release_wait = wait;
  Job j;
  j.quota = std::make_shared<QuotaResourceAdaptor>(device, ledger, s);
  AllocatorOptions o;
  o.policy = "best_fit";
  j.allocator = std::make_shared<CachingAllocator>(j.quota, o);
  return j;
}

// Job A allocates 60 MiB in one block and frees it: best_fit keeps the 60 MiB segment cached.
// The device and the ledger hold 100 MiB, so B, asking for 60 MiB, finds 40 MiB free.
struct TwoJobs : ::testing::Test {
  ScopedDevice dev;
  std::shared_ptr<SimulatedResource> device = std::make_shared<SimulatedResource>(100 * MiB, "sim");
  std::shared_ptr<SharedLedger> ledger = std::make_shared<SharedLedger>(dev.name, 100 * MiB);

  void cache_60_mib(Job& a) {
    Block b = a.allocator->allocate(60 * MiB);
    a.allocator->deallocate(b);
    ASSERT_EQ(a.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(60 * MiB));
  }
};

TEST_F(TwoJobs, CachedSegmentsOfAnotherJobAreReleasedBeforeAnyoneFails) {
  Job a = make_job(device, ledger, "a", 5s);
  cache_60_mib(a);
  LedgerAgent agent(ledger, a.quota->job(), *a.allocator, 5ms);
  Job b = make_job(device, ledger, "b", 5s);
  Block got = b.allocator->allocate(60 * MiB);
  EXPECT_EQ(a.allocator->stats().reserved_bytes.current, 0);
  EXPECT_EQ(agent.releases(), 1u);
  const LedgerEntry ea = ledger->entry(a.quota->job());
  EXPECT_EQ(ea.releases, 1u);
  EXPECT_EQ(ea.released_bytes, 60 * MiB);
  b.allocator->deallocate(got);
}

// Note [What a job may release]: A caches three 20 MiB segments but reported a working set of
// 40 MiB, so it gives B one segment (20 MiB) and keeps two for its next step.
TEST_F(TwoJobs, AJobKeepsItsWorkingSet) {
  Job a = make_job(device, ledger, "a", 5s);
  Block x = a.allocator->allocate(20 * MiB), y = a.allocator->allocate(20 * MiB), z = a.allocator->allocate(20 * MiB);
  a.allocator->deallocate(x);
  a.allocator->deallocate(y);
  a.allocator->deallocate(z);
  ASSERT_EQ(a.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(60 * MiB));
  EXPECT_EQ(a.allocator->take_window_peak_allocated(), 60 * MiB);
  LedgerAgent agent(ledger, a.quota->job(), *a.allocator, 5ms);
  agent.set_progress(1, 0.0, JobState::training, 40 * MiB);
  Job b = make_job(device, ledger, "b", 5s);
  Block got = b.allocator->allocate(50 * MiB);  // 40 MiB free + 10 MiB released
  EXPECT_EQ(a.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(40 * MiB));
  EXPECT_THROW(b.allocator->allocate(20 * MiB), OutOfMemory);  // A keeps its working set
  b.allocator->deallocate(got);
}

TEST_F(TwoJobs, WithoutReleaseTheSameRequestFails) {
  Job a = make_job(device, ledger, "a", 5s);
  cache_60_mib(a);
  LedgerAgent agent(ledger, a.quota->job(), *a.allocator, 5ms);
  Job b = make_job(device, ledger, "b", 0ms);
  EXPECT_THROW(b.allocator->allocate(60 * MiB), OutOfMemory);
  EXPECT_EQ(a.allocator->stats().reserved_bytes.current, static_cast<std::int64_t>(60 * MiB));
  EXPECT_EQ(ledger->entry(b.quota->job()).members[0].figures.num_ooms, 1);
}

TEST_F(TwoJobs, AJobThatNeverAnswersBoundsTheWaitAndIsNamed) {
  Job a = make_job(device, ledger, "silent-job", 5s);
  cache_60_mib(a);
  MemberFigures f;  // published once, as a process that stopped right after would have
  f.reserved_bytes = 60 * MiB;
  f.releasable_bytes = 60 * MiB;
  ledger->publish(a.quota->job(), f);
  Job b = make_job(device, ledger, "b", 200ms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    b.allocator->allocate(60 * MiB);
    FAIL() << "nobody released anything";
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'silent-job' (pid"), std::string::npos) << msg;
    EXPECT_NE(msg.find("did not answer within 200 ms"), std::string::npos) << msg;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
}

TEST_F(TwoJobs, MemoryInUseIsNotWaitedFor) {
  Job a = make_job(device, ledger, "a", 5s);
  Block held = a.allocator->allocate(60 * MiB);  // in use: nothing to release
  LedgerAgent agent(ledger, a.quota->job(), *a.allocator, 5ms);
  Job b = make_job(device, ledger, "b", 5s);
  const std::uint64_t before = ledger->release_sequence();
  EXPECT_THROW(b.allocator->allocate(60 * MiB), OutOfMemory);
  // Nothing was releasable, so B posted no request and had nothing to wait for.
  EXPECT_EQ(ledger->release_sequence(), before);
  EXPECT_EQ(agent.releases(), 0u);
  a.allocator->deallocate(held);
}

TEST_F(TwoJobs, TheOutOfMemoryMessageCountsWhatOtherJobsHold) {
  Job a = make_job(device, ledger, "a", 0ms);
  Block held = a.allocator->allocate(60 * MiB);
  Job b = make_job(device, ledger, "b", 0ms);
  try {
    b.allocator->allocate(60 * MiB);
    FAIL();
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    // B's allocator may reserve 100 MiB on its own, but only 40 MiB are left to it.
    EXPECT_NE(msg.find("capacity 100.00 MiB, 40.00 MiB free"), std::string::npos) << msg;
    EXPECT_NE(msg.find("40.00 MiB is left to this job"), std::string::npos) << msg;
  }
  a.allocator->deallocate(held);
}

}  // namespace
}  // namespace memtrain::memory
