#include "runtime/core/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::core {
namespace {

// Per-process names: several build directories may run these tests at the same time.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "memtrain_" + std::to_string(::getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A file with the given JSON header and `data_bytes` zero bytes after it.
std::string file_with_header(const std::string& json, std::size_t data_bytes) {
  std::string s(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s + json + std::string(data_bytes, '\0');
}

const std::string kFixtureDir = std::string(MEMTRAIN_SOURCE_DIR) + "/tests/fixtures/";

TEST(Safetensors, WriteThenReadGivesBackEveryTensorAndTheMetadata) {
  const float f[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  const std::int32_t ints[3] = {7, -8, 2147483647};
  std::map<std::string, HostArray> in{{"a.weight", host_array_f32(f, {2, 3})},
                                      {"ids", host_array_i32(ints, {3})},
                                      {"empty", host_array_f32(nullptr, {0, 4})}};
  const std::string path = temp_path("roundtrip.safetensors");
  write_safetensors(path, in, {{"step", "12"}});
  std::map<std::string, std::string> meta;
  auto out = read_safetensors(path, &meta);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(meta.at("step"), "12");
  EXPECT_EQ(out.at("a.weight").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(out.at("a.weight").dtype, "F32");
  EXPECT_EQ(out.at("a.weight").data, in.at("a.weight").data);
  EXPECT_EQ(to_int32s(out.at("ids")), (std::vector<std::int32_t>{7, -8, 2147483647}));
  EXPECT_EQ(out.at("empty").numel(), 0);
}

// The Python generator (tests/fixtures/make_bert_fixtures.py) writes format_check.safetensors
// with its own writer, following the published format: arange values in several dtypes. Reading
// it checks our reader against an independent writer; writing the same content must give the
// same bytes (both sort keys, write compact JSON and pad the header with spaces to 8 bytes).
TEST(Safetensors, ReadsAFileWrittenByTheIndependentPythonWriterByteForByte) {
  const std::string path = kFixtureDir + "format_check.safetensors";
  std::map<std::string, std::string> meta;
  auto t = read_safetensors(path, &meta);
  EXPECT_EQ(meta.at("format"), "pt");
  const auto& f32 = t.at("arange_f32");
  ASSERT_EQ(f32.shape, (std::vector<std::int64_t>{3, 4}));
  auto fv = to_floats(f32);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(fv[i], 0.5f * static_cast<float>(i) - 1.0f);
  auto dv = to_doubles(t.at("arange_f64"));
  ASSERT_EQ(dv.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dv[i], static_cast<double>(i) / 3.0);
  auto iv = to_int32s(t.at("arange_i32"));
  ASSERT_EQ(iv.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(iv[i], i - 3);

  const std::string again = temp_path("format_check_again.safetensors");
  write_safetensors(again, t, meta);
  EXPECT_EQ(slurp(again), slurp(path));
}

void expect_error_mentioning(const std::string& path, const std::string& needle) {
  try {
    read_safetensors(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(SafetensorsErrors, MissingFileNamesThePath) {
  expect_error_mentioning(temp_path("does_not_exist.safetensors"), "cannot open");
}

TEST(SafetensorsErrors, FileShorterThanTheLengthField) {
  const auto p = temp_path("short.safetensors");
  write_bytes(p, "abc");
  expect_error_mentioning(p, "shorter than the 8-byte header length");
}

TEST(SafetensorsErrors, HeaderLengthBeyondTheEndOfTheFile) {
  const auto p = temp_path("long_header.safetensors");
  std::string s = file_with_header("{}", 0);
  s[0] = 100;  // claims 100 header bytes, has 2
  write_bytes(p, s);
  expect_error_mentioning(p, "exceeds the file");
}

TEST(SafetensorsErrors, HeaderThatIsNotJson) {
  const auto p = temp_path("bad_json.safetensors");
  write_bytes(p, file_with_header("{\"a\": [1,", 0));
  expect_error_mentioning(p, "not valid JSON");
}

TEST(SafetensorsErrors, EntryWithoutDataOffsets) {
  const auto p = temp_path("no_offsets.safetensors");
  write_bytes(p, file_with_header(R"({"w": {"dtype": "F32", "shape": [2]}})", 8));
  expect_error_mentioning(p, "tensor \"w\"");
}

TEST(SafetensorsErrors, UnknownDtype) {
  const auto p = temp_path("bad_dtype.safetensors");
  write_bytes(p, file_with_header(R"({"w": {"dtype": "F31", "shape": [2], "data_offsets": [0, 8]}})", 8));
  expect_error_mentioning(p, "F31");
}

TEST(SafetensorsErrors, OffsetsBeyondTheDataSection) {
  const auto p = temp_path("truncated_data.safetensors");
  write_bytes(p, file_with_header(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8));
  expect_error_mentioning(p, "data_offsets [0, 16]");
}

TEST(SafetensorsErrors, OffsetsThatDisagreeWithTheShape) {
  const auto p = temp_path("wrong_size.safetensors");
  write_bytes(p, file_with_header(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8));
  expect_error_mentioning(p, "12 bytes its dtype and shape need");
}

TEST(SafetensorsErrors, WritingAnArrayWhoseBytesDisagreeWithItsShape) {
  HostArray bad{"F32", {3}, std::vector<std::byte>(8)};
  EXPECT_THROW(write_safetensors(temp_path("bad_write.safetensors"), {{"w", bad}}), RuntimeError);
}

TEST(SafetensorsErrors, WritingIntoAMissingDirectory) {
  EXPECT_THROW(write_safetensors(temp_path("no/such/dir/x.safetensors"), {}), RuntimeError);
}

}  // namespace
}  // namespace memtrain::core
