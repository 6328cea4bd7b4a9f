// Reading corpora: verse references, documents, directories, and every bad-input error.
#include <gtest/gtest.h>

#include "runtime/core/errors.hpp"
#include "runtime/data/corpus.hpp"
#include "runtime/data/kjv.hpp"
#include "tests/data/data_test_support.hpp"

namespace memtrain::data {
namespace {

using testing::expect_config_error;
using testing::TempDir;
using testing::write_file;

// Lines as `bible -f` prints them (bible-kjv 4.x book abbreviations).
TEST(SplitVerseReference, StripsReferencePrefix) {
  const struct {
    const char* line;
    const char* book;
    const char* text;
  } cases[] = {
      {"Ge1:1 In the beginning God created the heaven and the earth.", "Ge",
       "In the beginning God created the heaven and the earth."},
      {"1Sm3:4 That the LORD called Samuel", "1Sm", "That the LORD called Samuel"},
      {"SSol1:1 The song of songs, which is Solomon's.", "SSol", "The song of songs, which is Solomon's."},
      {"Rev22:21 The grace of our Lord Jesus Christ be with you all. Amen.", "Rev",
       "The grace of our Lord Jesus Christ be with you all. Amen."},
      {"3Jn1:15 Peace be to thee. Our friends salute thee.", "3Jn", "Peace be to thee. Our friends salute thee."},
  };
  for (const auto& c : cases) {
    const auto verse = split_verse_reference(c.line);
    ASSERT_TRUE(verse.has_value()) << c.line;
    EXPECT_EQ(verse->book, c.book);
    EXPECT_EQ(verse->text, c.text);
  }
}

TEST(SplitVerseReference, RejectsLinesWithoutReference) {
  for (const char* line : {"In the beginning", "Ge1 In the", "Ge1:1In the", "Ge:1 x", "1:1 x", "Ge1:x text", ""}) {
    EXPECT_FALSE(split_verse_reference(line).has_value()) << line;
  }
}

TEST(ReadCorpus, TextFileBlankLinesSeparateDocuments) {
  TempDir dir;
  // A byte-order mark, CRLF line ends and runs of blank lines.
  write_file(dir.file("c.txt"), "\xEF\xBB\xBFone.\r\ntwo.\r\n\r\n\r\nthree.\n  \nfour.\nfive.");
  const Corpus corpus = read_corpus(dir.file("c.txt"));
  EXPECT_EQ(corpus.segments, (std::vector<std::string>{"one.", "two.", "three.", "four.", "five."}));
  EXPECT_EQ(corpus.document_starts, (std::vector<std::size_t>{0, 2, 3}));
  EXPECT_EQ(corpus.source, dir.file("c.txt"));
}

TEST(ReadCorpus, DirectoryReadsTxtFilesRecursivelyInPathOrder) {
  TempDir dir;
  write_file(dir.file("b.txt"), "bee.\n");
  write_file(dir.file("a.txt"), "ay.\n\nay two.\n");
  write_file(dir.file("sub/c.txt"), "sea.\n");
  write_file(dir.file("notes.md"), "ignored.\n");
  const Corpus corpus = read_corpus(dir.path().string());
  EXPECT_EQ(corpus.segments, (std::vector<std::string>{"ay.", "ay two.", "bee.", "sea."}));
  EXPECT_EQ(corpus.document_starts, (std::vector<std::size_t>{0, 1, 2, 3}));
}

TEST(ReadCorpus, HashChangesWithContentAndFileNames) {
  TempDir dir;
  write_file(dir.file("d/a.txt"), "alpha.\n");
  const auto first = read_corpus(dir.file("d")).xxh64;
  EXPECT_EQ(read_corpus(dir.file("d")).xxh64, first);
  write_file(dir.file("d/a.txt"), "alphb.\n");
  const auto changed = read_corpus(dir.file("d")).xxh64;
  EXPECT_NE(changed, first);
  std::filesystem::rename(dir.file("d/a.txt"), dir.file("d/b.txt"));
  EXPECT_NE(read_corpus(dir.file("d")).xxh64, changed);
}

TEST(ReadCorpus, NonUtf8ByteReportsFileAndOffset) {
  TempDir dir;
  write_file(dir.file("bad.txt"), "first line.\nsec\xFFond line.\n");  // 0xFF at offset 15
  expect_config_error([&] { read_corpus(dir.file("bad.txt")); },
                      {"data.corpus: " + dir.file("bad.txt") + ":2: invalid UTF-8 at byte offset 15", "0xff"});
}

TEST(ReadCorpus, NonUtf8ByteInDirectoryNamesTheFile) {
  TempDir dir;
  write_file(dir.file("a.txt"), "fine.\n");
  write_file(dir.file("z/bad.txt"), "\xC0\xAF");
  expect_config_error([&] { read_corpus(dir.path().string()); }, {dir.file("z/bad.txt"), "byte offset 0"});
}

TEST(ReadCorpus, EmptyCorpusIsConfigError) {
  TempDir dir;
  write_file(dir.file("empty.txt"), "");
  write_file(dir.file("blank.txt"), "\n  \n\t\n");
  expect_config_error([&] { read_corpus(dir.file("empty.txt")); }, {"empty"});
  expect_config_error([&] { read_corpus(dir.file("blank.txt")); }, {"empty"});
  std::filesystem::create_directory(dir.path() / "nothing");
  write_file(dir.file("nothing/readme.md"), "not text to train on\n");
  expect_config_error([&] { read_corpus(dir.file("nothing")); }, {"no .txt files"});
}

TEST(ReadCorpus, MissingCorpusIsConfigError) {
  TempDir dir;
  expect_config_error([&] { read_corpus(dir.file("absent.txt")); }, {dir.file("absent.txt"), "not found"});
}

}  // namespace
}  // namespace memtrain::data
