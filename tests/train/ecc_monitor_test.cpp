// Note [ECC counts through NVML, loaded at run time]: NVML is loaded with dlopen and may be
// missing; the counts are read from a stand-in library (tests/fixtures/fake_nvml) whose values
// the test sets through the environment, so the expected lines follow from those values.
#include "runtime/train/ecc_monitor.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "comms/single_rank_communicator.hpp"

namespace memtrain::train {
namespace {

// Sets the fake's environment for one test and clears it after.
class FakeNvmlEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"FAKE_NVML_DEVICES", "FAKE_NVML_INIT_FAIL", "FAKE_NVML_NO_ECC", "FAKE_NVML_UNCORRECTED",
                             "FAKE_NVML_CORRECTED", "FAKE_NVML_RISE", "MEMTRAIN_NVML_LIBRARY"}) {
      ::unsetenv(name);
    }
  }
};

TEST_F(FakeNvmlEnv, AMissingLibraryIsUnavailableWithDlopensReason) {
  Nvml nvml("libmemtrain-no-such-nvml.so.1");
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.device_count(), 0);
  EXPECT_NE(nvml.reason().find("libmemtrain-no-such-nvml.so.1"), std::string::npos) << nvml.reason();
  EXPECT_FALSE(nvml.read(0).has_value());
  EccMonitor monitor(nvml);
  EXPECT_EQ(monitor.monitored_devices(), 0);
  comms::SingleRankCommunicator world;
  EXPECT_EQ(monitor.check(world, 1, 0), "");
}

TEST_F(FakeNvmlEnv, AFailedInitIsUnavailableWithNvmlsErrorString) {
  ::setenv("FAKE_NVML_INIT_FAIL", "1", 1);
  Nvml nvml(FAKE_NVML_LIBRARY);
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.reason(), "nvmlInit_v2: Driver Not Loaded");
}

TEST_F(FakeNvmlEnv, ALibraryWithoutTheEntryPointsIsUnavailable) {
  Nvml nvml("libm.so.6");  // loads, but is not NVML
  EXPECT_FALSE(nvml.available());
  EXPECT_NE(nvml.reason().find("lacks an NVML entry point"), std::string::npos) << nvml.reason();
}

TEST_F(FakeNvmlEnv, CountsAreReadPerDevice) {
  ::setenv("FAKE_NVML_DEVICES", "2", 1);
  ::setenv("FAKE_NVML_CORRECTED", "5", 1);
  ::setenv("FAKE_NVML_UNCORRECTED", "3", 1);
  Nvml nvml(FAKE_NVML_LIBRARY);
  ASSERT_TRUE(nvml.available()) << nvml.reason();
  EXPECT_EQ(nvml.device_count(), 2);
  const auto d0 = nvml.read(0), d1 = nvml.read(1);
  ASSERT_TRUE(d0 && d1);
  EXPECT_EQ(d0->corrected, 5u);
  EXPECT_EQ(d0->uncorrected, 3u);
  EXPECT_EQ(d1->corrected, 5u);
  EXPECT_EQ(d1->uncorrected, 0u);
  EXPECT_FALSE(nvml.read(2).has_value());
  EXPECT_FALSE(nvml.read(-1).has_value());
}

TEST_F(FakeNvmlEnv, DevicesWithoutEccAreNotMonitored) {
  ::setenv("FAKE_NVML_NO_ECC", "1", 1);
  Nvml nvml(FAKE_NVML_LIBRARY);
  ASSERT_TRUE(nvml.available());
  EXPECT_FALSE(nvml.read(0).has_value());
  EXPECT_EQ(EccMonitor(nvml).monitored_devices(), 0);
}

TEST_F(FakeNvmlEnv, ARiseInUncorrectedErrorsIsNamedOnceAndBecomesTheBaseline) {
  ::setenv("FAKE_NVML_UNCORRECTED", "1", 1);
  Nvml nvml(FAKE_NVML_LIBRARY);
  EccMonitor monitor(nvml);
  ASSERT_EQ(monitor.monitored_devices(), 1);
  comms::SingleRankCommunicator world;
  EXPECT_EQ(monitor.check(world, 5, 0), "");  // the count at start is the baseline, not an error
  ::setenv("FAKE_NVML_UNCORRECTED", "3", 1);
  EXPECT_EQ(monitor.check(world, 7, 5),
            "step 7: uncorrected ECC errors rose since step 5 on world rank 0 (GPU 0: 1 -> 3)");
  EXPECT_EQ(monitor.check(world, 9, 7), "");
  // Corrected errors only warn.
  ::setenv("FAKE_NVML_CORRECTED", "4", 1);
  EXPECT_EQ(monitor.check(world, 11, 9), "");
}

TEST_F(FakeNvmlEnv, TheDefaultLibraryIsTheDriversUnlessOverridden) {
  ::unsetenv("MEMTRAIN_NVML_LIBRARY");
  EXPECT_EQ(Nvml::default_library(), "libnvidia-ml.so.1");
  ::setenv("MEMTRAIN_NVML_LIBRARY", "/opt/x/libnvidia-ml.so", 1);
  EXPECT_EQ(Nvml::default_library(), "/opt/x/libnvidia-ml.so");
}

}  // namespace
}  // namespace memtrain::train
