// Jobs, not processes (Note [A job is its run directory]): processes that join with one key
// share one entry, its reservation and its limit; a dead process's charge leaves with it; the
// figures they publish come back per process. Hand-computed sums.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memory/shared_ledger.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using testing::Child;
using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

JobShare share(const std::string& key, std::size_t reservation, std::size_t limit) {
  JobShare s;
  s.name = "job";
  s.key = key;
  s.reservation = reservation;
  s.limit = limit;
  return s;
}

TEST(LedgerJobs, ProcessesWithOneKeyShareOneEntryAndItsLimit) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId rank0 = ledger.join(share("/runs/a", 200 * MiB, 500 * MiB));
  const JobId rank1 = ledger.join(share("/runs/a", 200 * MiB, 500 * MiB));
  EXPECT_EQ(rank0.slot, rank1.slot);
  EXPECT_NE(rank0.member, rank1.member);
  ASSERT_TRUE(ledger.try_charge(rank0, 300 * MiB).ok);
  // The limit is the job's: 500 - 300 = 200 MiB is left to both ranks together.
  EXPECT_FALSE(ledger.try_charge(rank1, 201 * MiB).ok);
  EXPECT_TRUE(ledger.try_charge(rank1, 200 * MiB).ok);
  const LedgerSnapshot snap = ledger.snapshot();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].members.size(), 2u);
  EXPECT_EQ(snap.jobs[0].in_use_bytes, 500 * MiB);
  // Reserved once for the job, not once per rank.
  EXPECT_EQ(snap.reserved_bytes, 200 * MiB);
  EXPECT_EQ(snap.committed_bytes, 500 * MiB);
}

TEST(LedgerJobs, TwoRunDirectoriesAreTwoJobs) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  ledger.join(share("/runs/a", 300 * MiB, kNoLimit));
  ledger.join(share("/runs/b", 300 * MiB, kNoLimit));
  const LedgerSnapshot snap = ledger.snapshot();
  EXPECT_EQ(snap.jobs.size(), 2u);
  EXPECT_EQ(snap.reserved_bytes, 600 * MiB);
}

TEST(LedgerJobs, ASecondProcessWithOtherFiguresIsRefused) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  ledger.join(share("/runs/a", 300 * MiB, kNoLimit));
  try {
    ledger.join(share("/runs/a", 100 * MiB, kNoLimit));
    FAIL() << "one job, two reservations";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected the same memory.reservation and memory.limit on every rank"),
              std::string::npos)
        << e.what();
  }
}

TEST(LedgerJobs, LeavingKeepsTheJobUntilItsLastProcessLeaves) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId r0 = ledger.join(share("/runs/a", 0, kNoLimit));
  const JobId r1 = ledger.join(share("/runs/a", 0, kNoLimit));
  ASSERT_TRUE(ledger.try_charge(r0, 100 * MiB).ok);
  ASSERT_TRUE(ledger.try_charge(r1, 50 * MiB).ok);
  ledger.leave(r0);
  LedgerSnapshot snap = ledger.snapshot();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].in_use_bytes, 50 * MiB);  // r0's 100 MiB went with it
  ledger.leave(r1);
  EXPECT_TRUE(ledger.snapshot().jobs.empty());
}

TEST(LedgerJobs, ADeadRanksChargeIsReclaimedAndTheJobStays) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId mine = ledger.join(share("/runs/a", 0, kNoLimit));
  ASSERT_TRUE(ledger.try_charge(mine, 10 * MiB).ok);
  {
    Child child([&](int ready) {
      SharedLedger theirs(dev.name, 1000 * MiB);
      const JobId r = theirs.join(share("/runs/a", 0, kNoLimit));
      if (!theirs.try_charge(r, 300 * MiB).ok) return 1;
      char b = 1;
      if (::write(ready, &b, 1) != 1) return 2;
      ::pause();
      return 0;
    });
    ASSERT_TRUE(child.wait_ready());
    LedgerSnapshot snap = ledger.snapshot();
    ASSERT_EQ(snap.jobs.size(), 1u);
    EXPECT_EQ(snap.jobs[0].members.size(), 2u);
    EXPECT_EQ(snap.jobs[0].in_use_bytes, 310 * MiB);
  }  // ~Child kills the child
  const LedgerSnapshot snap = ledger.snapshot();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].members.size(), 1u);
  EXPECT_EQ(snap.jobs[0].in_use_bytes, 10 * MiB);
}

TEST(LedgerJobs, PublishedFiguresComeBackPerProcess) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId r0 = ledger.join(share("/runs/a", 0, kNoLimit));
  MemberFigures f;
  f.allocated_bytes = 3 * MiB;
  f.reserved_bytes = 8 * MiB;
  f.releasable_bytes = 4 * MiB;
  f.step = 17;
  f.tokens_per_s = 1234.5;
  f.state = JobState::evaluating;
  f.policy = "best_fit";
  ledger.publish(r0, f);
  ledger.count_oom(r0);
  const LedgerEntry e = ledger.entry(r0);
  ASSERT_EQ(e.members.size(), 1u);
  const MemberFigures& g = e.members[0].figures;
  EXPECT_EQ(g.allocated_bytes, 3 * MiB);
  EXPECT_EQ(g.reserved_bytes, 8 * MiB);
  EXPECT_EQ(g.releasable_bytes, 4 * MiB);
  EXPECT_EQ(g.step, 17);
  EXPECT_EQ(g.tokens_per_s, 1234.5);
  EXPECT_EQ(g.state, JobState::evaluating);
  EXPECT_EQ(g.policy, "best_fit");
  EXPECT_EQ(g.num_ooms, 1);
  EXPECT_EQ(e.key, "/runs/a");
}

TEST(LedgerJobs, AReaderOpensTheLedgerWithItsCapacityAndNoneIsAnError) {
  ScopedDevice dev;
  EXPECT_THROW(SharedLedger::open_existing(dev.name), std::runtime_error);
  SharedLedger ledger(dev.name, 777 * MiB);
  auto reader = SharedLedger::open_existing(dev.name);
  EXPECT_EQ(reader->capacity_bytes(), 777 * MiB);
}

// A ledger left by a memtrain of the previous layout (version 1, 5184 bytes) is named as such at
// once, with the file to remove, instead of being waited on as a creator that crashed.
TEST(LedgerJobs, ALedgerOfAnOlderLayoutIsNamedWithTheFileToRemove) {
  ScopedDevice dev;
  const std::string name = SharedLedger::shm_name(dev.name);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 5184), 0);
  const std::uint32_t head[2] = {0x4D4C4447, 1};  // "MLDG", layout 1
  ASSERT_EQ(::pwrite(fd, head, sizeof head, 0), static_cast<ssize_t>(sizeof head));
  ::close(fd);
  try {
    SharedLedger ledger(dev.name, 1000 * MiB);
    FAIL() << "a ledger of layout 1 was opened";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("was created by another memtrain version (ledger layout 1, this one uses 3)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("rm /dev/shm" + name), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace memtrain::memory
