// runtime/checkpoint/: the on-disk protocol of a checkpoint (Note [A checkpoint appears whole or
// not at all]), checked against what the files must hold: the sizes and XXH64 of the bytes
// written (computed here with the xxhash library over the test's own buffers), the directories
// left after pruning, and the problems verification reports for damaged files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/checkpoint/checkpoint_verify.hpp"
#include "runtime/checkpoint/durable_file.hpp"
#include "runtime/checkpoint/fault_injection.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/safetensors.hpp"

namespace memtrain::checkpoint {
namespace {

namespace fs = std::filesystem;

class Dir {
 public:
  Dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / ("memtrain_ckpt_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Dir() { fs::remove_all(path_); }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 131 + seed * 17) & 0xff);
  return b;
}

std::string hex(std::uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

// One complete checkpoint of `step` holding a.bin (1000 bytes) and b.bin (3 bytes).
std::string write_checkpoint(const std::string& root, std::int64_t step, int keep_last = 2) {
  const std::string tmp = begin_checkpoint(root, step);
  write_file_durably(tmp + "/a.bin", pattern(1000, static_cast<unsigned>(step)));
  write_file_durably(tmp + "/b.bin", pattern(3, 7));
  nlohmann::ordered_json meta;
  meta["step"] = step;
  return commit_checkpoint(root, step, meta, keep_last);
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(CheckpointStore, StepDirectoryNamesRoundTrip) {
  EXPECT_EQ(step_directory_name(12), "step-00000012");
  EXPECT_EQ(step_directory_name(123456789), "step-123456789");
  EXPECT_EQ(parse_step_directory_name("step-00000012"), 12);
  EXPECT_FALSE(parse_step_directory_name("step-00000012.tmp").has_value());
  EXPECT_FALSE(parse_step_directory_name("latest").has_value());
  EXPECT_FALSE(parse_step_directory_name("step-").has_value());
}

TEST(CheckpointStore, CommitWritesManifestOfTheBytesAndLatest) {
  Dir d;
  const std::string root = d.sub("checkpoints");
  const std::string path = write_checkpoint(root, 5);
  EXPECT_EQ(path, root + "/step-00000005");
  EXPECT_FALSE(fs::exists(root + "/step-00000005.tmp"));
  EXPECT_EQ(slurp(root + "/latest"), "step-00000005\n");

  const auto manifest = nlohmann::json::parse(slurp(path + "/manifest.json"));
  const auto a = pattern(1000, 5);
  EXPECT_EQ(manifest["files"]["a.bin"]["bytes"], 1000);
  EXPECT_EQ(manifest["files"]["a.bin"]["xxh64"], hex(XXH64(a.data(), a.size(), 0)));
  const std::string meta_text = slurp(path + "/meta.json");
  EXPECT_EQ(manifest["files"]["meta.json"]["xxh64"], hex(XXH64(meta_text.data(), meta_text.size(), 0)));
  const auto meta = nlohmann::json::parse(meta_text);
  EXPECT_EQ(meta["step"], 5);
  EXPECT_EQ(meta["files"]["a.bin"], 1000);
  EXPECT_EQ(meta["files"]["b.bin"], 3);
  EXPECT_TRUE(verify_checkpoint(path).ok());
}

TEST(CheckpointStore, KeepLastRemovesOlderOnesOnlyAfterTheNewOne) {
  Dir d;
  const std::string root = d.sub("checkpoints");
  for (int step : {2, 4, 6, 8}) write_checkpoint(root, step, /*keep_last=*/2);
  const auto left = list_checkpoints(root);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].step, 8);
  EXPECT_EQ(left[1].step, 6);
}

TEST(CheckpointStore, ACommitRemovesTheFutureAResumeAbandoned) {
  Dir d;
  const std::string root = d.sub("checkpoints");
  for (int step : {2, 4, 6}) write_checkpoint(root, step, 3);
  write_checkpoint(root, 3, 3);  // resumed from 2, checkpointing at 3: 4 and 6 are another past
  const auto left = list_checkpoints(root);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].step, 3);
  EXPECT_EQ(left[1].step, 2);
  EXPECT_EQ(slurp(root + "/latest"), "step-00000003\n");
}

TEST(CheckpointStore, BeginRemovesLeftoversOfACrashedWrite) {
  Dir d;
  const std::string root = d.sub("checkpoints");
  write_checkpoint(root, 2);
  fs::create_directories(root + "/step-00000004.tmp");
  std::ofstream(root + "/step-00000004.tmp/a.bin") << "partial";
  begin_checkpoint(root, 6);
  EXPECT_FALSE(fs::exists(root + "/step-00000004.tmp"));
  EXPECT_TRUE(fs::is_directory(root + "/step-00000006.tmp"));
  EXPECT_EQ(list_checkpoints(root).size(), 1u);  // a .tmp is never a checkpoint
}

TEST(CheckpointVerify, AFlippedByteIsReportedWithItsFile) {
  Dir d;
  const std::string path = write_checkpoint(d.sub("c"), 1);
  flip_byte(path + "/a.bin", 500);
  const auto r = verify_checkpoint(path);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].rfind("a.bin: XXH64 ", 0), 0u) << r.problems[0];
  EXPECT_NE(r.problems[0].find("(corrupted)"), std::string::npos);
}

TEST(CheckpointVerify, ATruncatedFileIsReportedWithBothSizes) {
  Dir d;
  const std::string path = write_checkpoint(d.sub("c"), 1);
  fs::resize_file(path + "/a.bin", 999);
  const auto r = verify_checkpoint(path);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0], "a.bin: 999 bytes, the manifest records 1000 (truncated or overwritten)");
}

// A file the manifest does not name is not part of the checkpoint, and no load reads it: a
// note, not a problem (issue 48: an extra file made an intact checkpoint "corrupt", and a
// resume skipped it). A missing file the manifest names stays a problem.
TEST(CheckpointVerify, MissingManifestMissingFileAndUnlistedFile) {
  Dir d;
  const std::string one = write_checkpoint(d.sub("c1"), 1);
  fs::remove(one + "/manifest.json");
  EXPECT_EQ(verify_checkpoint(one).problems, std::vector<std::string>{"manifest.json: missing"});

  const std::string two = write_checkpoint(d.sub("c2"), 1);
  fs::remove(two + "/b.bin");
  std::ofstream(two + "/extra.bin") << "x";
  const auto r = verify_checkpoint(two);
  EXPECT_EQ(r.problems, (std::vector<std::string>{"b.bin: missing"}));
  EXPECT_EQ(r.notes, (std::vector<std::string>{
                         "extra.bin: not in the manifest, so not part of the checkpoint (a load never reads it)"}));

  const std::string three = write_checkpoint(d.sub("c3"), 1);
  std::ofstream(three + "/manifest.json") << "{not json";
  EXPECT_EQ(verify_checkpoint(three).problems, std::vector<std::string>{"manifest.json: not valid JSON"});
}

// The manifest has no checksum of its own: a file removed together with its manifest entry is
// still caught, by the checksummed meta.json that lists every file (found by a new-user trial).
TEST(CheckpointVerify, AFileRemovedWithItsManifestEntryIsReported) {
  Dir d;
  const std::string path = write_checkpoint(d.sub("c"), 1);
  fs::remove(path + "/b.bin");
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(path + "/manifest.json"));
  manifest["files"].erase("b.bin");
  std::ofstream(path + "/manifest.json") << manifest.dump();
  EXPECT_EQ(verify_checkpoint(path).problems,
            std::vector<std::string>{"b.bin: listed in meta.json, not in the manifest (removed?)"});
}

// Checksums prove the bytes are the ones committed, not that they load: a tensor file whose
// header was damaged before the manifest was computed passed verification and then failed every
// load (found by a bad-input trial). Each .safetensors header is parsed; a sound one passes.
TEST(CheckpointVerify, ATensorFileWhoseHeaderCannotBeReadIsReported) {
  Dir d;
  const std::string root = d.sub("c");
  const std::string tmp = begin_checkpoint(root, 1);
  const float values[3] = {1.0f, 2.0f, 3.0f};
  core::write_safetensors(tmp + "/good.safetensors", {{"w", core::host_array_f32(values, {3})}});
  std::vector<std::byte> bad(64, std::byte{0});
  bad[7] = std::byte{0x80};  // header length 2^63, little-endian
  write_file_durably(tmp + "/bad.safetensors", bad);
  nlohmann::ordered_json meta;
  meta["step"] = 1;
  const std::string path = commit_checkpoint(root, 1, meta, 2);
  const auto r = verify_checkpoint(path);
  ASSERT_EQ(r.problems.size(), 1u) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.problems[0].rfind("bad.safetensors: unreadable: ", 0), 0u) << r.problems[0];
  EXPECT_NE(r.problems[0].find("header length 9223372036854775808"), std::string::npos) << r.problems[0];
}

// A meta.json that is not valid JSON (here a string with bytes that are not UTF-8) under a
// manifest recomputed over it: the problem is the parser's, without the library's tag, and the
// bytes are shown escaped.
TEST(CheckpointVerify, AMetaJsonThatDoesNotParseIsReportedWithoutRawBytes) {
  Dir d;
  const std::string path = write_checkpoint(d.sub("c"), 1);
  const std::string meta = "{\"step\": 1, \"data_key\": \"\xff\xfe\"}\n";
  std::ofstream(path + "/meta.json", std::ios::binary | std::ios::trunc) << meta;
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(path + "/manifest.json"));
  manifest["files"]["meta.json"] = {{"bytes", meta.size()}, {"xxh64", hex(XXH64(meta.data(), meta.size(), 0))}};
  std::ofstream(path + "/manifest.json", std::ios::trunc) << manifest.dump();
  const auto r = verify_checkpoint(path);
  ASSERT_EQ(r.problems.size(), 1u) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.problems[0].rfind("meta.json: parse error", 0), 0u) << r.problems[0];
  EXPECT_EQ(r.problems[0].find("[json.exception"), std::string::npos) << r.problems[0];
  EXPECT_EQ(r.problems[0].find('\xff'), std::string::npos) << r.problems[0];
}

// A manifest naming a file outside its directory, or of a later format, is not trusted.
TEST(CheckpointVerify, AManifestNamingFilesOutsideItsDirectoryIsRefused) {
  Dir d;
  const std::string dir = write_checkpoint(d.sub("c"), 1);
  std::ofstream(d.sub("outside.bin")) << "x";
  const std::string digest = "{\"bytes\": 1, \"xxh64\": \"0\"}";
  for (const std::string name : {"../outside.bin", "sub/a.bin", "..", ""}) {
    std::ofstream(dir + "/manifest.json") << "{\"version\": 1, \"files\": {\"" + name + "\": " + digest + "}}";
    const auto r = verify_checkpoint(dir);
    ASSERT_FALSE(r.problems.empty()) << name;
    EXPECT_EQ(r.problems[0],
              "manifest.json: entry \"" + name + "\" is not a file name inside the checkpoint directory");
  }
  std::ofstream(dir + "/manifest.json") << "{\"version\": 2, \"files\": {}}";
  EXPECT_EQ(verify_checkpoint(dir).problems,
            std::vector<std::string>{"manifest.json: has version 2; this memtrain reads version 1"});
}

// An extra file and an extra directory leave an intact checkpoint valid, named in notes.
TEST(CheckpointVerify, AnExtraFileOrDirectoryIsANoteAndTheCheckpointStaysValid) {
  Dir d;
  const std::string path = write_checkpoint(d.sub("c"), 1);
  std::ofstream(path + "/meta.json.orig") << "{}";
  fs::create_directories(path + "/stray");
  const auto r = verify_checkpoint(path);
  EXPECT_TRUE(r.ok()) << r.problems[0];
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_EQ(r.notes[0].rfind("meta.json.orig: not in the manifest", 0), 0u) << r.notes[0];
  EXPECT_EQ(r.notes[1].rfind("stray: not in the manifest", 0), 0u) << r.notes[1];
}

// verify_checkpoint(path).problems as an unprivileged user sees them: root opens any file, so
// as root the check runs in a child process that has become nobody (65534).
std::vector<std::string> problems_without_privileges(const std::string& path) {
  if (::geteuid() != 0) return verify_checkpoint(path).problems;
  int fds[2];
  if (::pipe(fds) != 0) return {"pipe failed"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    std::string text;
    for (const auto& p : verify_checkpoint(path).problems) text += p + "\n";
    const bool written = ::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::_exit(written ? 0 : 4);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {"the unprivileged child failed"};
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A file of the checkpoint that cannot be opened (permissions) is a problem with the OS's
// reason, not "corrupted" (issue 48).
TEST(CheckpointVerify, AFileThatCannotBeOpenedIsNamedWithTheOsReason) {
  Dir d;
  const std::string path = write_checkpoint(d.sub("c"), 1);
  fs::permissions(path + "/a.bin", fs::perms::none);
  const auto problems = problems_without_privileges(path);
  fs::permissions(path + "/a.bin", fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(problems, std::vector<std::string>{"a.bin: cannot be read (Permission denied)"});
  EXPECT_TRUE(verify_checkpoint(path).ok());
}

// Resume and rollback pass a load check (runtime/train's verify_loadable) to the choice: a
// checkpoint that verifies and is trusted but cannot load is skipped with each of its reasons.
TEST(CheckpointTrust, ACheckpointThatFailsTheLoadCheckIsSkippedWithItsReasons) {
  Dir d;
  const std::string root = d.sub("checkpoints");
  write_checkpoint(root, 2, 3);
  const std::string four = write_checkpoint(root, 4, 3);
  const std::string six = write_checkpoint(root, 6, 3);
  std::vector<std::string> warnings;
  std::vector<std::int64_t> asked;
  const auto chosen = newest_trusted_checkpoint(root, 100, &warnings, [&](const StoredCheckpoint& c) {
    asked.push_back(c.step);
    return c.step >= 4 ? std::vector<std::string>{"meta.json: one", "model-tp00.safetensors: two"}
                       : std::vector<std::string>{};
  });
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(chosen->step, 2);
  EXPECT_EQ(asked, (std::vector<std::int64_t>{6, 4, 2}));
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "skipping checkpoint " + six + ": meta.json: one",
                          "skipping checkpoint " + six + ": model-tp00.safetensors: two",
                          "skipping checkpoint " + four + ": meta.json: one",
                          "skipping checkpoint " + four + ": model-tp00.safetensors: two",
                      }));
  // Without a check (and with max_step), as before.
  warnings.clear();
  EXPECT_EQ(newest_trusted_checkpoint(root, 5, &warnings)->step, 4);
  EXPECT_TRUE(warnings.empty());
}

TEST(CheckpointVerify, TheNewestValidOneIsChosenAndTheSkippedOnesNamed) {
  Dir d;
  const std::string root = d.sub("checkpoints");
  write_checkpoint(root, 2, 3);
  write_checkpoint(root, 4, 3);
  const std::string newest = write_checkpoint(root, 6, 3);
  fs::resize_file(newest + "/b.bin", 1);
  std::vector<std::string> warnings;
  const auto chosen = newest_valid_checkpoint(root, &warnings);
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(chosen->step, 4);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "skipping checkpoint " + newest + ": b.bin: 1 bytes, the manifest records 3 (truncated or overwritten)");
  EXPECT_FALSE(newest_valid_checkpoint(d.sub("nothing-here"), &warnings).has_value());
}

TEST(DurableFile, AFailedWriteThrowsNamingThePath) {
  Dir d;
  try {
    write_file_durably(d.sub("no-such-dir/x.bin"), pattern(10, 1));
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write " + d.sub("no-such-dir/x.bin") + ": No such file or directory");
  }
}

// kill_in_checkpoint: the process dies by SIGKILL with exactly the budget's bytes on disk.
TEST(DurableFile, TheWriteBudgetKillsAfterItsBytes) {
  Dir d;
  const std::string path = d.sub("x.bin");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    WriteBudget budget(1234);
    write_file_durably(path, pattern(5000, 3), &budget);
    std::_Exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(fs::file_size(path), 1234u);
}

TEST(FaultPlan, ParsesTheDocumentedFaultsAndRefusesOthers) {
  const FaultPlan p = parse_fault_plan("kill_at_step=3,kill_in_checkpoint=4096");
  EXPECT_EQ(p.kill_at_step, 3);
  EXPECT_EQ(p.kill_in_checkpoint, 4096);
  EXPECT_FALSE(parse_fault_plan("").any());
  const auto error = [](const std::string& text) {
    try {
      parse_fault_plan(text);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("kill_at_stp=3").rfind("MEMTRAIN_FAULT=kill_at_stp=3: unknown fault kill_at_stp; expected ", 0), 0u);
  EXPECT_EQ(error("kill_at_step=-1")
                .rfind("MEMTRAIN_FAULT=kill_at_step=-1: kill_at_step = -1 is not a non-negative integer", 0),
            0u);
  EXPECT_EQ(error("kill_at_step").rfind("MEMTRAIN_FAULT=kill_at_step: kill_at_step has no value", 0), 0u);
  // kill_at_step=STEP:RANK kills one rank only.
  const FaultPlan one = parse_fault_plan("kill_at_step=3:1");
  EXPECT_TRUE(one.kills_after(3, 1));
  EXPECT_FALSE(one.kills_after(3, 0));
  EXPECT_FALSE(one.kills_after(2, 1));
  EXPECT_TRUE(p.kills_after(3, 0) && p.kills_after(3, 5));
  EXPECT_EQ(error("kill_at_step=3:x")
                .rfind("MEMTRAIN_FAULT=kill_at_step=3:x: kill_at_step = 3:x is not a non-negative integer (in x)", 0),
            0u);
  EXPECT_EQ(error("kill_in_checkpoint=3:1")
                .rfind("MEMTRAIN_FAULT=kill_in_checkpoint=3:1: kill_in_checkpoint = 3:1; expected BYTES", 0),
            0u);
  const FaultPlan nan = parse_fault_plan("nan_grad=4:1:3,flip_param=2:0");
  ASSERT_TRUE(nan.nan_grad && nan.flip_param);
  EXPECT_FALSE(nan.nan_grad->covers(3, 1));
  EXPECT_TRUE(nan.nan_grad->covers(4, 1) && nan.nan_grad->covers(6, 1));
  EXPECT_FALSE(nan.nan_grad->covers(7, 1) || nan.nan_grad->covers(5, 0));
  EXPECT_TRUE(nan.flip_param->covers(2, 0) && !nan.flip_param->covers(3, 0));
  EXPECT_EQ(
      error("nan_grad=4").rfind("MEMTRAIN_FAULT=nan_grad=4: nan_grad = 4; expected STEP:RANK or STEP:RANK:COUNT", 0),
      0u);
  EXPECT_EQ(
      error("nan_grad=4:0:0").rfind("MEMTRAIN_FAULT=nan_grad=4:0:0: nan_grad = 4:0:0: COUNT 0 injects nothing", 0), 0u);
  // A fault on a rank the job does not have would never fire.
  const auto rank_error = [](const std::string& text, int world) {
    try {
      check_fault_ranks(parse_fault_plan(text), world);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(rank_error("kill_at_step=3:1", 2), "no error");
  EXPECT_EQ(rank_error("kill_at_step=3", 1), "no error");
  EXPECT_EQ(rank_error("kill_at_step=3:2", 2), "MEMTRAIN_FAULT: kill_at_step names rank 2; the job has ranks 0..1");
  EXPECT_EQ(rank_error("nan_grad=1:5", 4), "MEMTRAIN_FAULT: nan_grad names rank 5; the job has ranks 0..3");
  EXPECT_EQ(rank_error("flip_param=1:1", 1), "MEMTRAIN_FAULT: flip_param names rank 1; the job has ranks 0..0");
}

}  // namespace
}  // namespace memtrain::checkpoint
