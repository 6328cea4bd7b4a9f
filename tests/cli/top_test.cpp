// `memtrain top`'s bad input: each gets one message and exit 2 (usage) or 1 (no such ledger).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::LedgerCleanup;
using testing::Scratch;

std::string unique_ledger() { return "toptest-" + std::to_string(::getpid()); }

TEST(Top, ALedgerNoJobHasUsedIsNamed) {
  Scratch s;
  const auto r = s.memtrain("top --once --ledger " + unique_ledger());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "no ledger '" + unique_ledger() + "' on this host"));
}

TEST(Top, ALedgerNameNoJobCouldHaveIsAUsageError) {
  Scratch s;
  for (const std::string bad : {std::string("bad/name"), std::string("'a b'"), std::string(106, 'x')}) {
    const auto r = s.memtrain("top --once --ledger " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "is not a ledger name; expected 1 to 105 characters from [A-Za-z0-9._-]")) << r.err;
  }
  // The longest GPU ledger, a 64-character memory.ledger and "-gpu-<uuid>", is a name: there is
  // no such ledger here (exit 1), but it is looked up.
  std::string base = unique_ledger();
  base.resize(64, 'x');
  const std::string gpu = base + "-gpu-00112233-4455-6677-8899-aabbccddeeff";
  ASSERT_EQ(gpu.size(), 105u);
  const auto r = s.memtrain("top --once --ledger " + gpu);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "no ledger '" + gpu + "' on this host")) << r.err;
}

TEST(Top, BadServeAddressesAreUsageErrors) {
  Scratch s;
  for (const std::string bad : {"nonsense", "127.0.0.1:99999", "127.0.0.1:http", ":9400"}) {
    const auto r = s.memtrain("top --ledger " + unique_ledger() + " --serve " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--serve " + bad + ": ")) << bad;
    EXPECT_TRUE(contains(r.err, "expected HOST:PORT")) << bad;
  }
  const auto both = s.memtrain("top --serve 127.0.0.1:0 --json");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_TRUE(contains(both.err, "expected it without --once and --json"));
  const auto interval = s.memtrain("top --interval 0");
  EXPECT_EQ(interval.exit_code, 2);
  EXPECT_TRUE(contains(interval.err, "--interval"));
}

TEST(Top, APortThatIsTakenIsAUsageError) {
  Scratch s;
  // A ledger to serve: made by a job that ends at once.
  const std::string ledger = unique_ledger() + "-taken";
  const LedgerCleanup cleanup{ledger};
  s.write("c.yaml", std::string(testing::kTinyMockYaml) + "memory:\n  capacity: 1GiB\n  ledger: " + ledger + "\n");
  ASSERT_EQ(s.memtrain("train --config c.yaml --run-dir run").exit_code, 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const auto r = s.memtrain("top --ledger " + ledger + " --serve 127.0.0.1:" + port);
  ::close(fd);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot listen there"));
}

}  // namespace
}  // namespace memtrain::cli
