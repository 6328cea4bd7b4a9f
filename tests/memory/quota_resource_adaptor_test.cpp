// QuotaResourceAdaptor over a simulated device: refusals become memtrain::OutOfMemory without
// touching the upstream, every charge is returned, and one job cannot take another's share.
#include "memory/quota_resource_adaptor.hpp"

#include <gtest/gtest.h>

#include "memory/out_of_memory.hpp"
#include "memory/simulated_resource.hpp"
#include "tests/memory/ledger_test_util.hpp"

namespace memtrain::memory {
namespace {

using testing::ScopedDevice;
constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(QuotaResourceAdaptor, PastItsLimitAJobGetsOutOfMemoryAndTheUpstreamIsNotAsked) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedResource>(1024 * MiB, "sim");
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  QuotaResourceAdaptor job(device, ledger, {"small-job", 0, 300 * MiB});
  void* p = job.allocate(200 * MiB);
  try {
    job.allocate(200 * MiB);
    FAIL() << "400 MiB is past a 300 MiB limit";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested_bytes(), 200 * MiB);
    std::string msg = e.what();
    EXPECT_NE(msg.find("small-job"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit"), std::string::npos) << msg;
  }
  EXPECT_EQ(device->used_bytes(), 200 * MiB);
  EXPECT_EQ(job.charged_bytes(), 200 * MiB);
  job.deallocate(p, 200 * MiB);
  EXPECT_EQ(job.charged_bytes(), 0u);
  EXPECT_EQ(device->used_bytes(), 0u);
}

TEST(QuotaResourceAdaptor, UpstreamFailureReturnsTheCharge) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedResource>(100 * MiB, "tiny");
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  QuotaResourceAdaptor job(device, ledger, {"a", 0, kNoLimit});
  EXPECT_THROW(job.allocate(200 * MiB), OutOfMemory);
  EXPECT_EQ(job.charged_bytes(), 0u);
  EXPECT_EQ(job.capacity_bytes(), 100 * MiB);  // min of limit, ledger and upstream
}

TEST(QuotaResourceAdaptor, AJobCannotTakeAnotherJobsReservation) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedResource>(1024 * MiB, "sim");
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  QuotaResourceAdaptor a(device, ledger, {"a", 0, kNoLimit});
  QuotaResourceAdaptor b(device, ledger, {"b", 512 * MiB, kNoLimit});
  std::vector<void*> held;
  try {
    for (;;) held.push_back(a.allocate(64 * MiB));
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("other jobs hold 512.00 MiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(held.size(), 8u);  // (1024 - 512) / 64
  void* big = b.allocate(512 * MiB);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(device->used_bytes(), 1024 * MiB);
  b.deallocate(big, 512 * MiB);
  for (void* p : held) a.deallocate(p, 64 * MiB);
}

TEST(QuotaResourceAdaptor, DestroyingTheAdaptorLeavesTheLedger) {
  ScopedDevice dev;
  auto device = std::make_shared<SimulatedResource>(1024 * MiB, "sim");
  auto ledger = std::make_shared<SharedLedger>(dev.name, 1024 * MiB);
  {
    QuotaResourceAdaptor a(device, ledger, {"a", 800 * MiB, kNoLimit});
    EXPECT_THROW(QuotaResourceAdaptor(device, ledger, {"b", 800 * MiB, kNoLimit}), std::runtime_error);
  }
  EXPECT_TRUE(ledger->snapshot().jobs.empty());
  EXPECT_NO_THROW(QuotaResourceAdaptor(device, ledger, {"b", 800 * MiB, kNoLimit}));
}

}  // namespace
}  // namespace memtrain::memory
