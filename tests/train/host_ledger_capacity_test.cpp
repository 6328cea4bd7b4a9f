// Issue 44, section 4: with memory.capacity 0 the host ledger's capacity is the cgroup's
// memory limit (v2 memory.max, v1 memory.limit_in_bytes) where one is set, not the machine's RAM. The reference reads the same two kernel
// interfaces in the test's own way (the v2 line of /proc/self/cgroup, sysconf).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "runtime/train/model_memory.hpp"

namespace memtrain::train {
namespace {

TEST(HostLedgerCapacity, IsTheCgroupsMemoryMaxWhenSetAndThePhysicalMemoryOtherwise) {
  const std::size_t physical =
      static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t expected = physical;
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    std::string file;
    if (line.rfind("0::", 0) == 0) file = "/sys/fs/cgroup" + line.substr(3) + "/memory.max";  // v2
    const auto memory = line.find(":memory:");                                                // v1
    if (memory != std::string::npos)
      file = "/sys/fs/cgroup/memory" + line.substr(memory + 8) + "/memory.limit_in_bytes";
    std::ifstream max_file(file);
    std::string value;
    if (!file.empty() && max_file >> value && value != "max") {
      expected = std::min(expected, static_cast<std::size_t>(std::stoull(value)));
    }
  }
  EXPECT_EQ(host_ledger_capacity(), expected);
  EXPECT_GT(host_ledger_capacity(), 0u);
}

}  // namespace
}  // namespace memtrain::train
