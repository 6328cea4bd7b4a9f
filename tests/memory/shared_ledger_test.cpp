// The shared ledger within one process: the arithmetic of reservations, limits and the
// committed sum (Note [Shares: reservation, limit and the committed sum]), checked against
// hand-computed closed forms, and jobs as threads.
#include "memory/shared_ledger.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(SharedLedger, ReservationBeyondWhatOthersHoldIsRefusedWithTheirNames) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  ledger.join({"job-a", 600 * MiB, kNoLimit});
  try {
    ledger.join({"job-b", 500 * MiB, kNoLimit});
    FAIL() << "a 500 MiB reservation fits in 400 MiB";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reserve"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("job-a"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("; expected a reservation of at most 400.00 MiB"), std::string::npos)
        << e.what();
  }
  ledger.join({"job-b", 400 * MiB, kNoLimit});
  auto snap = ledger.snapshot();
  EXPECT_EQ(snap.reserved_bytes, 1000 * MiB);
  EXPECT_EQ(snap.jobs.size(), 2u);
}

TEST(SharedLedger, MemoryInUseByAnotherJobCannotBeReserved) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  auto a = ledger.join({"a", 0, kNoLimit});
  ASSERT_TRUE(ledger.try_charge(a, 700 * MiB).ok);
  EXPECT_THROW(ledger.join({"b", 301 * MiB, kNoLimit}), std::runtime_error);
  EXPECT_NO_THROW(ledger.join({"b", 300 * MiB, kNoLimit}));
}

TEST(SharedLedger, GrowthPastReservationTakesOnlyUnreservedCapacity) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  auto a = ledger.join({"a", 100 * MiB, kNoLimit});
  auto b = ledger.join({"b", 400 * MiB, kNoLimit});
  // a may hold at most 1000 - 400 = 600 MiB: its own 100 plus the 500 nobody reserved.
  EXPECT_TRUE(ledger.try_charge(a, 600 * MiB).ok);
  auto refused = ledger.try_charge(a, 1);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.refusal, ChargeRefusal::over_capacity);
  EXPECT_EQ(refused.available_bytes, 0u);
  // b's reservation is intact.
  EXPECT_TRUE(ledger.try_charge(b, 400 * MiB).ok);
  EXPECT_FALSE(ledger.try_charge(b, 1).ok);
  // a gives back 200 MiB; b can now grow by exactly that much.
  ledger.release(a, 200 * MiB);
  auto r = ledger.try_charge(b, 150 * MiB);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.available_bytes, 50 * MiB);
  EXPECT_EQ(ledger.snapshot().committed_bytes, 1000 * MiB - 50 * MiB);
}

TEST(SharedLedger, ChargePastLimitIsRefusedAsOverLimit) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  auto a = ledger.join({"a", 100 * MiB, 300 * MiB});
  EXPECT_TRUE(ledger.try_charge(a, 300 * MiB).ok);
  auto r = ledger.try_charge(a, 1);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.refusal, ChargeRefusal::over_limit);
  EXPECT_EQ(ledger.entry(a).in_use_bytes, 300 * MiB);
}

TEST(SharedLedger, RefusedChargeChangesNothing) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  auto a = ledger.join({"a", 0, kNoLimit});
  ASSERT_TRUE(ledger.try_charge(a, 999 * MiB).ok);
  EXPECT_FALSE(ledger.try_charge(a, 2 * MiB).ok);
  EXPECT_FALSE(ledger.try_charge(a, SIZE_MAX).ok);  // no wrap-around
  EXPECT_EQ(ledger.entry(a).in_use_bytes, 999 * MiB);
}

TEST(SharedLedger, LimitBelowReservationIsRejected) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  EXPECT_THROW(ledger.join({"a", 200 * MiB, 100 * MiB}), std::invalid_argument);
}

TEST(SharedLedger, OpeningWithAnotherCapacityIsRejectedWhileAJobIsIn) {
  ScopedDevice dev;
  SharedLedger first(dev.name, 1000 * MiB);
  const auto member = first.join({"member", 0, kNoLimit});
  EXPECT_THROW(SharedLedger(dev.name, 2000 * MiB), std::invalid_argument);
  EXPECT_THROW(SharedLedger(dev.name, 0), std::invalid_argument);
  SharedLedger second(dev.name, 1000 * MiB);  // same capacity: the same ledger
  auto a = second.join({"a", 10 * MiB, kNoLimit});
  EXPECT_EQ(first.entry(a).reservation, 10 * MiB);
  first.leave(member);
  second.leave(a);
}

// The ledger outlives its jobs in /dev/shm: once the last one has left, the next job may give
// another capacity (a finished run's capacity refused every later one).
TEST(SharedLedger, ALedgerWithNoJobsTakesTheNextJobsCapacity) {
  ScopedDevice dev;
  {
    SharedLedger first(dev.name, 1000 * MiB);
    first.leave(first.join({"done", 0, kNoLimit}));
  }
  SharedLedger next(dev.name, 2000 * MiB);
  EXPECT_EQ(next.capacity_bytes(), 2000 * MiB);
  next.join({"b", 1500 * MiB, kNoLimit});
  EXPECT_THROW(SharedLedger(dev.name, 1000 * MiB), std::invalid_argument);
}

TEST(SharedLedger, ReleasingMoreThanChargedOrAfterLeavingThrows) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  auto a = ledger.join({"a", 0, kNoLimit});
  ASSERT_TRUE(ledger.try_charge(a, 10).ok);
  EXPECT_THROW(ledger.release(a, 11), std::logic_error);
  ledger.leave(a);
  EXPECT_THROW(ledger.try_charge(a, 1), std::logic_error);
  EXPECT_THROW(ledger.release(a, 1), std::logic_error);
}

TEST(SharedLedger, LeavingReturnsTheJobsShare) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  auto a = ledger.join({"a", 300 * MiB, kNoLimit});
  ASSERT_TRUE(ledger.try_charge(a, 800 * MiB).ok);
  ledger.leave(a);
  EXPECT_EQ(ledger.snapshot().committed_bytes, 0u);
  EXPECT_NO_THROW(ledger.join({"b", 1000 * MiB, kNoLimit}));
}

TEST(SharedLedger, LockingTwiceFromOneThreadThrowsInsteadOfHanging) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  SharedLedger::LockGuard held(ledger);
  EXPECT_THROW(ledger.snapshot(), std::logic_error);
}

TEST(SharedLedger, SlotsRunOutWithAClearError) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  for (std::uint32_t i = 0; i < SharedLedger::kMaxJobs; ++i) ledger.join({"j", 0, kNoLimit});
  EXPECT_THROW(ledger.join({"one-too-many", 0, kNoLimit}), std::runtime_error);
}

TEST(SharedLedger, DeviceNamesBecomeSafeShmNames) {
  EXPECT_EQ(SharedLedger::shm_name("cuda:0"), "/memtrain-ledger-cuda_0");
  EXPECT_EQ(SharedLedger::shm_name("sim a100/40gb"), "/memtrain-ledger-sim_a100_40gb");
}

// Jobs as threads, each charging and releasing random amounts. A job that stays within its
// reservation must never be refused, whatever the others do; the committed sum never
// exceeds the capacity; nobody passes its limit.
TEST(SharedLedger, ThreadJobsWithinReservationAreNeverRefused) {
  ScopedDevice dev;
  const std::size_t capacity = 1024 * MiB;
  SharedLedger ledger(dev.name, capacity);
  constexpr int kJobs = 6;
  const std::size_t reservations[kJobs] = {0, 64 * MiB, 128 * MiB, 0, 256 * MiB, 32 * MiB};
  const std::size_t limits[kJobs] = {kNoLimit, 512 * MiB, 128 * MiB, 300 * MiB, kNoLimit, 600 * MiB};
  std::vector<JobId> ids;
  for (int j = 0; j < kJobs; ++j) ids.push_back(ledger.join({"t" + std::to_string(j), reservations[j], limits[j]}));
  std::atomic<int> wrongly_refused{0}, violations{0};
  std::vector<std::thread> threads;
  for (int j = 0; j < kJobs; ++j) {
    threads.emplace_back([&, j] {
      std::mt19937_64 rng(1234 + j);
      std::size_t mine = 0;  // what this job has charged, kept by the job itself
      for (int op = 0; op < 2000; ++op) {
        if (mine > 0 && rng() % 2 == 0) {
          std::size_t b = 1 + rng() % mine;
          ledger.release(ids[j], b);
          mine -= b;
        } else {
          std::size_t b = 1 + rng() % (96 * MiB);
          auto r = ledger.try_charge(ids[j], b);
          if (r.ok) mine += b;
          if (!r.ok && mine + b <= reservations[j]) ++wrongly_refused;
          if (r.in_use_bytes != mine) ++violations;
        }
        if (op % 50 == 0) {
          auto snap = ledger.snapshot();
          if (snap.committed_bytes > snap.capacity_bytes || snap.reserved_bytes > snap.capacity_bytes) ++violations;
          for (const auto& e : snap.jobs)
            if (e.in_use_bytes > e.limit) ++violations;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrongly_refused.load(), 0);
  EXPECT_EQ(violations.load(), 0);
}

}  // namespace
}  // namespace memtrain::memory
