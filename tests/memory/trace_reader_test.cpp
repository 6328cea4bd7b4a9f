#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "memory/replay.hpp"

namespace memtrain::memory {
namespace {

std::vector<TraceOp> parse(const std::string& text) {
  std::istringstream in(text);
  return parse_trace_csv(in, "t.csv");
}

// The message of the TraceFormatError `text` raises, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const TraceFormatError& e) {
    return e.what();
  }
  return "";
}

// Step rows (Note [Step boundaries in a trace]) carry a step number and nothing else.
TEST(TraceCsv, MalformedStepRowsNameTheLine) {
  EXPECT_EQ(error_of("op,id,bytes,stream,tag\nstep,,,,\n"), "t.csv:2: step row has no step number; expected step,N");
  EXPECT_EQ(error_of("op,id,bytes,stream,tag\nstep,1,5,,\n"),
            "t.csv:2: step row has more than a step number; expected step,N");
  EXPECT_EQ(error_of("op,id,bytes,stream,tag\nstep,x\n"),
            "t.csv:2: step 'x' is not a non-negative integer; expected step,N");
  EXPECT_EQ(error_of("op,id,bytes,stream,tag\nstop,1\n"), "t.csv:2: op 'stop' is not alloc, free or step");
  EXPECT_EQ(parse("op,id,bytes,stream,tag\nstep,0\nalloc,a,1,0,\nstep,1,,,\n").size(), 1u);
}

TEST(TraceCsv, ReadsRowsCommentsAndFreeRowsWithoutBytes) {
  const auto ops = parse(
      "# recorded by hand\n"
      "op,id,bytes,stream,tag\n"
      "\n"
      "alloc,a,1024,0,activation   # trailing comment\n"
      "alloc,b,2048,3,\n"
      "free,a,,,\n"
      "free,b\n");
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].kind, TraceOp::Kind::alloc);
  EXPECT_EQ(ops[0].id, "a");
  EXPECT_EQ(ops[0].bytes, 1024u);
  EXPECT_EQ(ops[0].tag, "activation");
  EXPECT_EQ(ops[0].line, 4u);
  EXPECT_EQ(ops[1].stream, 3u);
  EXPECT_EQ(ops[1].tag, "");
  EXPECT_EQ(ops[2].kind, TraceOp::Kind::free);
  EXPECT_EQ(ops[2].bytes, 0u);
  EXPECT_EQ(ops[3].id, "b");
  EXPECT_EQ(ops[3].line, 7u);
}

TEST(TraceCsv, WindowsLineEndingsAreAccepted) {
  EXPECT_EQ(parse("op,id,bytes,stream,tag\r\nalloc,a,1,0,x\r\n").size(), 1u);
}

// Spreadsheets save "CSV UTF-8" with a byte-order mark before the header; elsewhere the three
// bytes are still an error.
TEST(TraceCsv, AByteOrderMarkBeforeTheHeaderIsSkipped) {
  EXPECT_EQ(parse("\xEF\xBB\xBFop,id,bytes,stream,tag\nalloc,a,1,0,x\n").size(), 1u);
  EXPECT_NE(error_of("op,id,bytes,stream,tag\n\xEF\xBB\xBF"
                     "alloc,a,1,0,x\n"),
            "");
  std::istringstream rmm("\xEF\xBB\xBFThread,Time,Action,Pointer,Size,Stream\n");
  EXPECT_TRUE(parse_rmm_log_csv(rmm, "rmm.csv").empty());
}

TEST(TraceCsv, MalformedRowsNameFileLineAndProblem) {
  const std::string h = "op,id,bytes,stream,tag\n";
  EXPECT_NE(error_of("id,op,bytes\n").find("t.csv:1: header is 'id,op,bytes'"), std::string::npos);
  EXPECT_NE(error_of("").find("t.csv:1: empty trace"), std::string::npos);
  EXPECT_NE(error_of(h + "malloc,a,1,0,x\n").find("t.csv:2: op 'malloc'"), std::string::npos);
  EXPECT_NE(error_of(h + "alloc,,1,0,x\n").find("t.csv:2: id is empty"), std::string::npos);
  EXPECT_NE(error_of(h + "alloc,a,,0,x\n").find("t.csv:2: alloc row has no bytes"), std::string::npos);
  EXPECT_NE(error_of(h + "# c\nalloc,a,12x,0,x\n").find("t.csv:3: bytes '12x' is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(h + "alloc,a,-5,0,x\n").find("bytes '-5'"), std::string::npos);
  EXPECT_NE(error_of(h + "alloc,a,99999999999999999999,0,x\n").find("in range"), std::string::npos);
  EXPECT_NE(error_of(h + "alloc,a,1,s1,x\n").find("t.csv:2: stream 's1'"), std::string::npos);
  EXPECT_NE(error_of(h + "alloc,a,1,0,x,y\n").find("t.csv:2: 6 fields; expected at most 5"), std::string::npos);
  // A binary "header" is shown escaped and shortened, never sent to the terminal raw.
  const std::string binary = error_of(std::string("\x01\xff\x1b[2J") + std::string(100, 'z') + "\n");
  EXPECT_NE(binary.find("header is '\\x01\\xff\\x1b[2J"), std::string::npos) << binary;
  EXPECT_NE(binary.find("... (106 bytes)"), std::string::npos) << binary;
  EXPECT_EQ(binary.find('\x1b'), std::string::npos);
}

// RMM's logging_resource_adaptor format (rmm docs, "Logging and Profiling"): stream pointers
// become small ids, "allocate failure" rows never held memory and are skipped.
TEST(RmmLogCsv, ReadsAllocateAndFreeRowsAndNumbersStreams) {
  std::istringstream in(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n"
      "140573312345856,1634567890.2,allocate,0x7f8a40000400,2048,0x0\n"
      "140573312345856,1634567890.25,allocate failure,0x0,4096,0x0\n"
      "140573312345856,1634567890.3,deallocate,0x7f8a40000000,1024,0x7f8a38001020\n"
      "140573312345856,1634567890.4,free,0x7f8a40000400,2048,0x0\n");
  const auto ops = parse_rmm_log_csv(in, "rmm.csv");
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].kind, TraceOp::Kind::alloc);
  EXPECT_EQ(ops[0].id, "0x7f8a40000000");
  EXPECT_EQ(ops[0].bytes, 1024u);
  EXPECT_EQ(ops[0].stream, 1u);
  EXPECT_EQ(ops[1].stream, 0u);
  EXPECT_EQ(ops[2].kind, TraceOp::Kind::free);
  EXPECT_EQ(ops[2].stream, 1u);
  EXPECT_EQ(ops[3].kind, TraceOp::Kind::free);
  EXPECT_EQ(ops[3].line, 6u);
}

TEST(RmmLogCsv, MalformedRowsNameFileLineAndProblem) {
  std::istringstream in(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,2,reallocate,0x10,8,0x0\n");
  try {
    parse_rmm_log_csv(in, "rmm.csv");
    FAIL() << "accepted an unknown action";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("rmm.csv:2: Action 'reallocate'"), std::string::npos);
  }
}

TEST(ReadTraceFile, PicksTheParserFromTheHeaderAndReportsMissingFiles) {
  const std::string path = ::testing::TempDir() + "/rmm_log_for_reader.csv";
  {
    std::ofstream out(path);
    out << "# exported\nThread,Time,Action,Pointer,Size,Stream\n1,0.1,allocate,0x10,64,0x0\n";
  }
  const auto ops = read_trace_file(path);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].bytes, 64u);
  std::remove(path.c_str());
  try {
    read_trace_file(path);
    FAIL() << "read a missing file";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": cannot open"), std::string::npos);
  }
}

// A FIFO with no writer would block the read forever and /dev/zero never ends: both refused.
TEST(ReadTraceFile, RefusesFilesThatAreNotRegular) {
  const std::string fifo = ::testing::TempDir() + "/trace_fifo_" + std::to_string(::getpid()) + ".csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    try {
      read_trace_file(path);
      FAIL() << "read " << path;
    } catch (const TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": is not a regular file"), std::string::npos) << e.what();
    }
  }
  std::remove(fifo.c_str());
}

}  // namespace
}  // namespace memtrain::memory
