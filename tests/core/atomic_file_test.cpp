#include "runtime/core/atomic_file.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "runtime/core/errors.hpp"
#include "tests/train/temp_dir.hpp"

namespace memtrain::core {
namespace {

namespace testing = memtrain::train::testing;

namespace fs = std::filesystem;

using testing::slurp;

TEST(WriteFileAtomically, WritesTheWholeFileAndLeavesNoTemporary) {
  testing::TempDir tmp;
  const std::string path = tmp.sub("memory_snapshot.json");
  write_file_atomically(path, [](std::ostream& out) { out << "{\"segments\": []}\n"; });
  EXPECT_EQ(slurp(path), "{\"segments\": []}\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// A stream failing half-way (what a full disk does) must not replace a good file with a prefix.
TEST(WriteFileAtomically, FailedWriteKeepsThePreviousFileAndRemovesTheTemporary) {
  testing::TempDir tmp;
  const std::string path = tmp.sub("memory_snapshot.json");
  write_file_atomically(path, [](std::ostream& out) { out << "{\"good\": true}\n"; });
  try {
    write_file_atomically(path, [](std::ostream& out) {
      out << "{\"trunc";
      out.setstate(std::ios::badbit);
    });
    ADD_FAILURE() << "a failed stream was not reported";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + path + ": "), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), "{\"good\": true}\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(WriteFileAtomically, ExceptionFromTheWriterRemovesTheTemporary) {
  testing::TempDir tmp;
  const std::string path = tmp.sub("memory_trace.csv");
  EXPECT_THROW(write_file_atomically(path,
                                     [](std::ostream& out) {
                                       out << "op,id";
                                       throw std::invalid_argument("bad event");
                                     }),
               std::invalid_argument);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// The message carries the OS's reason (strerror), here ENOENT for a missing directory.
TEST(WriteFileAtomically, MessageNamesTheOsReason) {
  testing::TempDir tmp;
  const std::string path = tmp.sub("missing/memory_snapshot.json");
  try {
    write_file_atomically(path, [](std::ostream& out) { out << "{}"; });
    ADD_FAILURE() << "writing into a missing directory succeeded";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write " + path + ": " + std::strerror(ENOENT));
  }
}

// /dev/full fails every write with ENOSPC: the disk-full case itself, where the platform has it.
TEST(WriteFileAtomically, DiskFullIsReportedWithItsReason) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  // The temporary is "<path>.tmp", so a symlink there points the write at /dev/full.
  testing::TempDir tmp;
  const std::string path = tmp.sub("memory_snapshot.json");
  fs::create_symlink("/dev/full", path + ".tmp");
  const std::string big(1 << 20, 'x');  // more than the stream buffers
  try {
    write_file_atomically(path, [&](std::ostream& out) { out << big; });
    ADD_FAILURE() << "writing to /dev/full succeeded";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace memtrain::core
