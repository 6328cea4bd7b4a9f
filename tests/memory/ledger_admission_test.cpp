// Admission by plan (Note [Admission by plan], memory/shared_ledger.hpp): the queue's order,
// starting when the need fits, asking lower-priority jobs to shrink or stop, starting small,
// backfill and growing back. Sizes are hand-chosen so every expected figure is a sum by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "memory/shared_ledger.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

AdmissionRequest job(const std::string& key, std::size_t need, int priority = 0) {
  AdmissionRequest r;
  r.name = key;
  r.key = "/runs/" + key;
  r.need_bytes = need;
  r.floor_bytes = need;
  r.priority = priority;
  return r;
}

AdmissionRequest elastic(const std::string& key, std::size_t need, std::size_t floor, int priority = 0) {
  AdmissionRequest r = job(key, need, priority);
  r.floor_bytes = floor;
  r.elastic = true;
  return r;
}

TEST(LedgerAdmission, AJobThatFitsStartsWithItsNeedReserved) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId a = ledger.enqueue(job("a", 400 * MiB));
  const AdmissionStatus s = ledger.poll_admission(a);
  EXPECT_TRUE(s.admitted);
  EXPECT_EQ(s.granted_bytes, 400 * MiB);
  EXPECT_EQ(ledger.snapshot().reserved_bytes, 400 * MiB);
  EXPECT_EQ(ledger.admissions_of("/runs/a"), 1u);
}

TEST(LedgerAdmission, AJobThatDoesNotFitWaitsAndStartsWhenTheFirstEnds) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId a = ledger.enqueue(job("a", 600 * MiB));
  ASSERT_TRUE(ledger.poll_admission(a).admitted);
  const JobId b = ledger.enqueue(job("b", 600 * MiB));
  AdmissionStatus s = ledger.poll_admission(b);
  EXPECT_FALSE(s.admitted);
  EXPECT_EQ(s.jobs_ahead, 0u);
  EXPECT_EQ(s.free_bytes, 400 * MiB);
  EXPECT_FALSE(s.asked_others);  // a has the same priority: nobody is asked
  // While it waits, the view shows it (its ticket) as waiting, holding nothing.
  const LedgerSnapshot snap = ledger.snapshot();
  ASSERT_EQ(snap.jobs.size(), 2u);
  EXPECT_TRUE(snap.jobs[1].waiting);
  ASSERT_EQ(snap.jobs[1].members.size(), 1u);
  EXPECT_EQ(snap.jobs[1].members[0].figures.state, JobState::waiting);
  EXPECT_EQ(snap.committed_bytes, 600 * MiB);
  EXPECT_EQ(ledger.admissions_of("/runs/b"), 0u);
  ledger.leave(a);
  s = ledger.poll_admission(b);
  EXPECT_TRUE(s.admitted);
  EXPECT_EQ(s.granted_bytes, 600 * MiB);
  EXPECT_EQ(ledger.admissions_of("/runs/b"), 1u);
  // Admitted, its ticket is no longer shown as a process.
  EXPECT_TRUE(ledger.snapshot().jobs[0].members.empty());
}

TEST(LedgerAdmission, HigherPriorityGoesFirstThenArrival) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId full = ledger.enqueue(job("full", 1000 * MiB));
  ASSERT_TRUE(ledger.poll_admission(full).admitted);
  const JobId low = ledger.enqueue(job("low", 300 * MiB, 0));
  const JobId high = ledger.enqueue(job("high", 300 * MiB, 5));
  const JobId low2 = ledger.enqueue(job("low2", 300 * MiB, 0));
  EXPECT_EQ(ledger.poll_admission(high).jobs_ahead, 0u);
  EXPECT_EQ(ledger.poll_admission(low).jobs_ahead, 1u);
  EXPECT_EQ(ledger.poll_admission(low2).jobs_ahead, 2u);
  ledger.leave(full);
  // low fits, but high is ahead of it and fits too: high first.
  EXPECT_FALSE(ledger.poll_admission(low).admitted);
  EXPECT_TRUE(ledger.poll_admission(high).admitted);
  EXPECT_TRUE(ledger.poll_admission(low).admitted);
  EXPECT_TRUE(ledger.poll_admission(low2).admitted);
  EXPECT_EQ(ledger.snapshot().reserved_bytes, 900 * MiB);
}

TEST(LedgerAdmission, AWaitingJobGainsAPriorityLevelPerAgingPeriod) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId full = ledger.enqueue(job("full", 1000 * MiB));
  ASSERT_TRUE(ledger.poll_admission(full).admitted);
  AdmissionRequest old = job("old", 300 * MiB, 0);
  old.aging = std::chrono::seconds(1);
  const JobId o = ledger.enqueue(old);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  // After one period "old" has priority 0 + 1; a newcomer of priority 1 ties and arrived later.
  AdmissionRequest newer = job("newer", 300 * MiB, 1);
  newer.aging = std::chrono::seconds(1);
  const JobId n = ledger.enqueue(newer);
  EXPECT_EQ(ledger.poll_admission(o).jobs_ahead, 0u);
  EXPECT_EQ(ledger.poll_admission(n).jobs_ahead, 1u);
}

TEST(LedgerAdmission, WithoutAgingANewcomerOfHigherPriorityGoesAhead) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId full = ledger.enqueue(job("full", 1000 * MiB));
  ASSERT_TRUE(ledger.poll_admission(full).admitted);
  AdmissionRequest old = job("old", 300 * MiB, 0);
  old.aging = std::chrono::seconds(0);
  const JobId o = ledger.enqueue(old);
  const JobId n = ledger.enqueue(job("newer", 300 * MiB, 1));
  EXPECT_EQ(ledger.poll_admission(o).jobs_ahead, 1u);
  EXPECT_EQ(ledger.poll_admission(n).jobs_ahead, 0u);
}

TEST(LedgerAdmission, AHigherPriorityJobAsksElasticLowerOnesToShrinkLowestFirst) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId e1 = ledger.enqueue(elastic("e1", 500 * MiB, 200 * MiB, 1));
  ASSERT_TRUE(ledger.poll_admission(e1).admitted);
  const JobId e0 = ledger.enqueue(elastic("e0", 400 * MiB, 300 * MiB, 0));
  ASSERT_TRUE(ledger.poll_admission(e0).admitted);
  // 100 MiB free; h needs 400: e0 (lowest) gives its 100 above its floor, e1 the other 200.
  const JobId h = ledger.enqueue(job("h", 400 * MiB, 5));
  const AdmissionStatus s = ledger.poll_admission(h);
  EXPECT_FALSE(s.admitted);
  EXPECT_TRUE(s.asked_others);
  EXPECT_EQ(ledger.pool_request(e0).target_bytes, 300 * MiB);
  EXPECT_EQ(ledger.pool_request(e1).target_bytes, 300 * MiB);
  EXPECT_FALSE(ledger.pool_request(e0).preempt);
  EXPECT_EQ(ledger.pool_request(e0).waiting_jobs, 1u);
  // Growing is refused while someone waits.
  EXPECT_FALSE(ledger.set_reservation(e0, 450 * MiB));
  ASSERT_TRUE(ledger.set_reservation(e0, 300 * MiB));
  EXPECT_EQ(ledger.pool_request(e0).target_bytes, 0u);  // done
  EXPECT_FALSE(ledger.poll_admission(h).admitted);      // 200 free, needs 400
  ASSERT_TRUE(ledger.set_reservation(e1, 300 * MiB));
  EXPECT_TRUE(ledger.poll_admission(h).admitted);
  // With h gone the shrunk jobs grow back, as far as the room allows.
  ledger.leave(h);
  EXPECT_TRUE(ledger.set_reservation(e1, 500 * MiB));
  EXPECT_FALSE(ledger.set_reservation(e0, 501 * MiB));  // 500 + 501 > 1000
  EXPECT_TRUE(ledger.set_reservation(e0, 500 * MiB));
}

TEST(LedgerAdmission, WhenShrinkingIsNotEnoughTheLowestPreemptibleJobIsAskedToStop) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  AdmissionRequest p = elastic("p", 800 * MiB, 600 * MiB, 0);
  p.preemptible = true;
  const JobId pj = ledger.enqueue(p);
  ASSERT_TRUE(ledger.poll_admission(pj).admitted);
  // 200 free; h needs 700: shrinking p gives 200, not the 500 missing: p is preempted whole.
  const JobId h = ledger.enqueue(job("h", 700 * MiB, 1));
  EXPECT_TRUE(ledger.poll_admission(h).asked_others);
  const PoolRequest r = ledger.pool_request(pj);
  EXPECT_TRUE(r.preempt);
  EXPECT_EQ(r.target_bytes, 0u);
  ledger.requeue(pj, 42);
  // Back in the queue, the view shows it waiting at the step it had reached, holding nothing.
  LedgerSnapshot snap = ledger.snapshot();
  ASSERT_EQ(snap.jobs.size(), 2u);
  ASSERT_TRUE(snap.jobs[0].waiting);
  ASSERT_EQ(snap.jobs[0].members.size(), 1u);
  EXPECT_EQ(snap.jobs[0].members[0].figures.state, JobState::waiting);
  EXPECT_EQ(snap.jobs[0].members[0].figures.step, 42);
  EXPECT_EQ(snap.jobs[0].members[0].figures.reserved_bytes, 0u);
  EXPECT_TRUE(ledger.poll_admission(h).admitted);
  AdmissionStatus s = ledger.poll_admission(pj);
  EXPECT_FALSE(s.admitted);
  EXPECT_EQ(s.free_bytes, 300 * MiB);
  // 300 free is below p's floor of 600, so it cannot start small either; with h gone it starts
  // again with its whole need.
  ledger.leave(h);
  s = ledger.poll_admission(pj);
  EXPECT_TRUE(s.admitted);
  EXPECT_EQ(s.granted_bytes, 800 * MiB);
  EXPECT_EQ(ledger.admissions_of("/runs/p"), 2u);
}

TEST(LedgerAdmission, NobodyIsAskedWhenNothingCanMakeRoom) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId fixed = ledger.enqueue(job("fixed", 800 * MiB, 0));  // neither elastic nor preemptible
  ASSERT_TRUE(ledger.poll_admission(fixed).admitted);
  const JobId h = ledger.enqueue(job("h", 500 * MiB, 9));
  const AdmissionStatus s = ledger.poll_admission(h);
  EXPECT_FALSE(s.admitted);
  EXPECT_FALSE(s.asked_others);
  EXPECT_EQ(ledger.pool_request(fixed).target_bytes, 0u);
  EXPECT_FALSE(ledger.pool_request(fixed).preempt);
}

TEST(LedgerAdmission, AnElasticJobStartsWithWhatIsFreeWhenAtLeastItsFloor) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId fixed = ledger.enqueue(job("fixed", 700 * MiB));
  ASSERT_TRUE(ledger.poll_admission(fixed).admitted);
  const JobId e = ledger.enqueue(elastic("e", 500 * MiB, 200 * MiB));
  const AdmissionStatus s = ledger.poll_admission(e);
  EXPECT_TRUE(s.admitted);
  EXPECT_EQ(s.granted_bytes, 300 * MiB);
}

TEST(LedgerAdmission, ASmallJobBehindStartsInRoomTheHeadCannotUse) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId a = ledger.enqueue(job("a", 700 * MiB));
  ASSERT_TRUE(ledger.poll_admission(a).admitted);
  const JobId head = ledger.enqueue(job("head", 500 * MiB));
  const JobId small = ledger.enqueue(job("small", 200 * MiB));
  EXPECT_FALSE(ledger.poll_admission(head).admitted);
  const AdmissionStatus s = ledger.poll_admission(small);
  EXPECT_TRUE(s.admitted);
  EXPECT_EQ(ledger.snapshot().committed_bytes, 900 * MiB);
  // No backfill once the head is older than its aging period: it is not starved.
  AdmissionRequest patient = job("patient", 500 * MiB);
  patient.aging = std::chrono::seconds(0);  // 0: strict order, never passed
  ledger.leave(small);
  ledger.leave(head);
  const JobId p = ledger.enqueue(patient);
  const JobId small2 = ledger.enqueue(job("small2", 200 * MiB));
  EXPECT_FALSE(ledger.poll_admission(p).admitted);
  EXPECT_FALSE(ledger.poll_admission(small2).admitted);
}

TEST(LedgerAdmission, BadRequestsAreRefused) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  AdmissionRequest nokey = job("x", 100 * MiB);
  nokey.key.clear();
  EXPECT_THROW(ledger.enqueue(nokey), std::invalid_argument);
  AdmissionRequest upside = job("y", 100 * MiB);
  upside.floor_bytes = 200 * MiB;
  EXPECT_THROW(ledger.enqueue(upside), std::invalid_argument);
  ledger.enqueue(job("z", 100 * MiB));
  EXPECT_THROW(ledger.enqueue(job("z", 100 * MiB)), std::invalid_argument);
  EXPECT_THROW(ledger.admissions_of("/runs/none"), std::runtime_error);
}

TEST(LedgerAdmission, AnAdmittedJobsRanksJoinWhateverItsReservationIsNow) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId t = ledger.enqueue(job("r", 400 * MiB));
  ASSERT_TRUE(ledger.poll_admission(t).admitted);
  ASSERT_TRUE(ledger.set_reservation(t, 300 * MiB));
  JobShare rank;
  rank.name = "r";
  rank.key = "/runs/r";
  const JobId m = ledger.join(rank);
  EXPECT_EQ(m.slot, t.slot);
  ASSERT_TRUE(ledger.try_charge(m, 250 * MiB).ok);
  EXPECT_EQ(ledger.snapshot().committed_bytes, 300 * MiB);
}

TEST(LedgerAdmission, AJobThatDoesNotAnswerIsPassedOverAndOthersStartMeanwhile) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  const JobId a = ledger.enqueue(elastic("a", 800 * MiB, 300 * MiB, 0));
  ASSERT_TRUE(ledger.poll_admission(a).admitted);
  AdmissionRequest head = job("head", 500 * MiB, 5);
  head.answer_timeout = std::chrono::milliseconds(100);
  const JobId h = ledger.enqueue(head);
  const JobId small = ledger.enqueue(job("small", 150 * MiB, 0));
  AdmissionStatus s = ledger.poll_admission(h);
  EXPECT_TRUE(s.asked_others);
  EXPECT_TRUE(s.silent.empty());
  EXPECT_EQ(ledger.pool_request(a).target_bytes, 500 * MiB);  // it reached a boundary: asked, alive
  EXPECT_FALSE(ledger.poll_admission(small).admitted);        // the head asked: no backfill
  // a stops answering (SIGSTOP): no boundary within the head's 100 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  s = ledger.poll_admission(h);
  EXPECT_FALSE(s.admitted);
  EXPECT_FALSE(s.asked_others);
  ASSERT_EQ(s.silent.size(), 1u);
  EXPECT_NE(s.silent[0].find("'a' (pid "), std::string::npos) << s.silent[0];
  EXPECT_EQ(ledger.snapshot().jobs[0].target_bytes, 0u);
  // The queue moves on: the small job fits in the 200 MiB free and starts.
  EXPECT_TRUE(ledger.poll_admission(small).admitted);
  // a answers again: it is asked again, and its shrink lets the head in.
  ledger.pool_request(a);
  s = ledger.poll_admission(h);
  EXPECT_TRUE(s.asked_others);
  EXPECT_TRUE(s.silent.empty());
  const PoolRequest r = ledger.pool_request(a);
  ASSERT_EQ(r.target_bytes, 350 * MiB);  // 1000 - 150 (small) - 500 (head)
  ASSERT_TRUE(ledger.set_reservation(a, 350 * MiB));
  EXPECT_TRUE(ledger.poll_admission(h).admitted);
}

TEST(LedgerAdmission, AWaitingJobThatStopsPollingIsPassedOver) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  AdmissionRequest stopped = job("stopped", 600 * MiB);
  stopped.answer_timeout = std::chrono::milliseconds(100);
  const JobId s = ledger.enqueue(stopped);
  const JobId next = ledger.enqueue(job("next", 600 * MiB));
  const JobId full = ledger.enqueue(job("full", 1000 * MiB, 9));  // ahead of both, admitted
  ASSERT_TRUE(ledger.poll_admission(full).admitted);
  EXPECT_EQ(ledger.poll_admission(next).jobs_ahead, 1u);
  ledger.leave(full);
  // "stopped" heads the queue and fits, but is stopped (Ctrl-Z) and never polls again.
  EXPECT_FALSE(ledger.poll_admission(next).admitted);  // it is still within its 100 ms
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const AdmissionStatus st = ledger.poll_admission(next);
  EXPECT_TRUE(st.admitted);
  ASSERT_EQ(st.silent.size(), 0u);  // admitted: nothing to report
  // Continued, it polls again and is back in the queue, behind nobody now that "next" runs.
  const AdmissionStatus back = ledger.poll_admission(s);
  EXPECT_FALSE(back.admitted);
  EXPECT_EQ(back.jobs_ahead, 0u);
}

TEST(LedgerAdmission, AHeadAgedPastAHigherPriorityJobAsksWithThatJobsPriority) {
  ScopedDevice dev;
  SharedLedger ledger(dev.name, 1000 * MiB);
  AdmissionRequest low_runner = job("runner", 800 * MiB, 0);
  low_runner.preemptible = true;
  const JobId runner = ledger.enqueue(low_runner);
  ASSERT_TRUE(ledger.poll_admission(runner).admitted);
  AdmissionRequest aged = job("aged", 500 * MiB, 0);
  aged.aging = std::chrono::seconds(1);
  const JobId a = ledger.enqueue(aged);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const JobId high = ledger.enqueue(job("high", 500 * MiB, 1));
  // "aged" (0 + 1, earlier) heads the queue; by its own priority it could ask nobody, but
  // "high" waits behind it with priority 1 > the runner's 0: the runner is asked to stop.
  EXPECT_EQ(ledger.poll_admission(high).jobs_ahead, 1u);
  const AdmissionStatus s = ledger.poll_admission(a);
  EXPECT_FALSE(s.admitted);
  EXPECT_TRUE(s.asked_others);
  EXPECT_TRUE(ledger.pool_request(runner).preempt);
  // The room goes in queue order: "aged" first.
  ledger.requeue(runner);
  EXPECT_TRUE(ledger.poll_admission(a).admitted);
  EXPECT_TRUE(ledger.poll_admission(high).admitted);
}

}  // namespace
}  // namespace memtrain::memory
