// The shared ledger across PROCESSES (fork): concurrent joins never over-reserve, a job's
// growth in one process never makes a job in another fail, and a process killed with SIGKILL
// (holding a share, or holding the lock) does not keep its share or wedge the ledger.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>
#include <vector>

#include "memory/shared_ledger.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using testing::Child;
using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

// Six processes race to reserve a quarter of the device each: exactly four can win
// (floor(capacity / quarter) = 4), and the ledger never shows more than the capacity reserved.
TEST(SharedLedgerProcesses, ConcurrentJoinsNeverReserveMoreThanCapacity) {
  ScopedDevice dev;
  const std::size_t capacity = 1024 * MiB;
  SharedLedger ledger(dev.name, capacity);
  int start[2], hold[2];
  ASSERT_EQ(::pipe(start), 0);
  ASSERT_EQ(::pipe(hold), 0);
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < 6; ++i) {
    children.push_back(std::make_unique<Child>([&](int ready) {
      ::close(start[1]);
      ::close(hold[1]);
      SharedLedger mine(dev.name, capacity);
      Child::signal_ready(ready);
      char c;
      (void)!::read(start[0], &c, 1);  // all start together when the parent closes `start`
      int won = 0;
      try {
        mine.join({"racer", capacity / 4, kNoLimit});
        won = 1;
      } catch (const std::runtime_error&) {}
      Child::signal_ready(ready);
      (void)!::read(hold[0], &c, 1);  // keep the reservation until the parent has looked
      return won ? 10 : 20;
    }));
  }
  for (auto& c : children) ASSERT_TRUE(c->wait_ready());
  ::close(start[0]);
  ::close(start[1]);
  for (auto& c : children) ASSERT_TRUE(c->wait_ready());
  auto during = ledger.snapshot();
  EXPECT_EQ(during.reserved_bytes, capacity);
  EXPECT_EQ(during.jobs.size(), 4u);
  ::close(hold[0]);
  ::close(hold[1]);
  int winners = 0, losers = 0;
  for (auto& c : children) {
    int code = c->wait();
    winners += code == 10;
    losers += code == 20;
  }
  EXPECT_EQ(winners, 4);
  EXPECT_EQ(losers, 2);
  // Everyone exited: their shares are reclaimed.
  EXPECT_EQ(ledger.snapshot().reserved_bytes, 0u);
}

TEST(SharedLedgerProcesses, KilledProcessShareIsReclaimed) {
  ScopedDevice dev;
  const std::size_t capacity = 1000 * MiB;
  SharedLedger ledger(dev.name, capacity);
  Child child([&](int ready) {
    SharedLedger mine(dev.name, capacity);
    auto job = mine.join({"doomed", 600 * MiB, kNoLimit});
    if (!mine.try_charge(job, 700 * MiB).ok) return 1;
    Child::signal_ready(ready);
    for (;;) ::pause();
  });
  ASSERT_TRUE(child.wait_ready());
  auto before = ledger.snapshot();
  ASSERT_EQ(before.jobs.size(), 1u);
  EXPECT_EQ(before.jobs[0].pid, child.pid());
  EXPECT_EQ(before.committed_bytes, 700 * MiB);
  EXPECT_THROW(ledger.join({"survivor", 301 * MiB, kNoLimit}), std::runtime_error);

  child.kill_hard();
  // Not reaped yet: a zombie holds nothing either. Poll until the kernel has marked it dead (up
  // to 60 s, far beyond what SIGKILL takes on a loaded machine; the bound only stops a hang).
  JobId survivor{};
  bool joined = false;
  for (int i = 0; i < 6000 && !joined; ++i) {
    try {
      survivor = ledger.join({"survivor", 1000 * MiB, kNoLimit});
      joined = true;
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_TRUE(joined);
  EXPECT_EQ(child.wait(), -SIGKILL);
  if (joined) {
    EXPECT_TRUE(ledger.try_charge(survivor, 1000 * MiB).ok);
  }
}

TEST(SharedLedgerProcesses, RefusedChargeReclaimsDeadProcessesFirst) {
  ScopedDevice dev;
  const std::size_t capacity = 1000 * MiB;
  SharedLedger ledger(dev.name, capacity);
  auto mine = ledger.join({"parent", 0, kNoLimit});
  Child child([&](int ready) {
    SharedLedger theirs(dev.name, capacity);
    auto job = theirs.join({"doomed", 0, kNoLimit});
    if (!theirs.try_charge(job, 900 * MiB).ok) return 1;
    Child::signal_ready(ready);
    for (;;) ::pause();
  });
  ASSERT_TRUE(child.wait_ready());
  EXPECT_FALSE(ledger.try_charge(mine, 200 * MiB).ok);
  child.kill_hard();
  EXPECT_EQ(child.wait(), -SIGKILL);
  EXPECT_TRUE(ledger.try_charge(mine, 1000 * MiB).ok);
}

TEST(SharedLedgerProcesses, ProcessKilledWhileHoldingTheLockDoesNotWedgeTheLedger) {
  ScopedDevice dev;
  const std::size_t capacity = 1000 * MiB;
  SharedLedger ledger(dev.name, capacity);
  Child child([&](int ready) {
    SharedLedger theirs(dev.name, capacity);
    theirs.join({"doomed", 500 * MiB, kNoLimit});
    SharedLedger::LockGuard held(theirs);
    Child::signal_ready(ready);
    for (;;) ::pause();
    return 0;
  });
  ASSERT_TRUE(child.wait_ready());
  child.kill_hard();
  EXPECT_EQ(child.wait(), -SIGKILL);
  auto snap = ledger.snapshot();  // would hang forever with a plain mutex
  EXPECT_EQ(ledger.recovered_owner_deaths(), 1u);
  EXPECT_TRUE(snap.jobs.empty());
  EXPECT_NO_THROW(ledger.join({"next", 1000 * MiB, kNoLimit}));
}

// Job B (another process) charges and releases within its 512 MiB reservation two thousand
// times while job A in this process grabs everything it can, over and over: B is never
// refused, and A never holds more than the 512 MiB nobody reserved.
TEST(SharedLedgerProcesses, GrowthInOneProcessNeverMakesAnotherFail) {
  ScopedDevice dev;
  const std::size_t capacity = 1024 * MiB;
  SharedLedger ledger(dev.name, capacity);
  int go[2], hold[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(hold), 0);
  Child b([&](int ready) {
    ::close(go[1]);
    ::close(hold[1]);
    SharedLedger theirs(dev.name, capacity);
    auto job = theirs.join({"b", 512 * MiB, kNoLimit});
    Child::signal_ready(ready);
    char c;
    (void)!::read(go[0], &c, 1);
    int refused = 0;
    std::size_t held = 0;
    for (int i = 0; i < 2000; ++i) {
      std::size_t want = (std::size_t(i) * 7919 % 512 + 1) * MiB;  // 1..512 MiB
      if (held + want > 512 * MiB) {
        theirs.release(job, held);
        held = 0;
      }
      if (theirs.try_charge(job, want).ok) {
        held += want;
      } else {
        ++refused;
      }
    }
    Child::signal_ready(ready);  // done; stay registered until the parent stops growing
    (void)!::read(hold[0], &c, 1);
    return refused == 0 ? 0 : 1;
  });
  ::close(go[0]);
  ::close(hold[0]);
  ASSERT_TRUE(b.wait_ready());
  auto a = ledger.join({"a", 0, kNoLimit});
  ::close(go[1]);  // start B
  std::size_t a_held = 0, a_max = 0;
  long rounds = 0;
  for (bool b_done = false; !b_done; ++rounds) {
    if (ledger.try_charge(a, 16 * MiB).ok) {
      a_held += 16 * MiB;
    } else if (a_held > 0) {
      ledger.release(a, a_held);
      a_held = 0;
    }
    a_max = std::max(a_max, a_held);
    b_done = b.wait_ready(0) || rounds > 50'000'000;
  }
  ::close(hold[1]);
  int status = b.wait();
  EXPECT_EQ(status, 0) << "job B was refused a charge inside its reservation";
  EXPECT_LE(a_max, 512 * MiB);
  EXPECT_GT(a_max, 0u);
}

}  // namespace
}  // namespace memtrain::memory
