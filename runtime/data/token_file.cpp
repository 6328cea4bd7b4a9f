#include "runtime/data/token_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <fstream>

#include "runtime/core/errors.hpp"

namespace memtrain::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; add byte swapping for this host");

constexpr char kMagic[8] = {'M', 'T', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr std::uint32_t kVersion = 1;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t reserved;
  std::uint64_t num_documents, num_segments, num_tokens;
};
static_assert(sizeof(Header) == 40);

template <class T>
void append_bytes(std::string& out, const T* data, std::size_t count) {
  out.append(reinterpret_cast<const char*>(data), count * sizeof(T));
}

bool ascending_from_zero(const std::vector<std::uint64_t>& offsets, std::uint64_t last) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != last) return false;
  for (std::size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) return false;
  }
  return true;
}

}  // namespace

void write_token_file(const std::string& path, const TokenizedSplit& split) {
  if (!ascending_from_zero(split.segment_offsets, split.tokens.size()) ||
      !ascending_from_zero(split.document_offsets, split.num_segments())) {
    throw RuntimeError("write_token_file: inconsistent offsets for " + path);
  }
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kVersion;
  header.num_documents = split.num_documents();
  header.num_segments = split.num_segments();
  header.num_tokens = split.tokens.size();
  std::string bytes;
  append_bytes(bytes, &header, 1);
  append_bytes(bytes, split.document_offsets.data(), split.document_offsets.size());
  append_bytes(bytes, split.segment_offsets.data(), split.segment_offsets.size());
  append_bytes(bytes, split.tokens.data(), split.tokens.size());

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError("cannot create token file " + path + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw RuntimeError("cannot write token file " + path + ": " + why);
    }
    done += static_cast<std::size_t>(wrote);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw RuntimeError("cannot flush token file " + path + ": " + std::strerror(errno));
  }
}

TokenizedSplit read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw RuntimeError("cannot open token file " + path);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  const auto bad = [&](const std::string& what) {
    return RuntimeError("token file " + path + " is corrupt: " + what +
                        "; delete the data cache directory to rebuild it");
  };
  Header header{};
  if (size < sizeof header || !in.read(reinterpret_cast<char*>(&header), sizeof header)) {
    throw bad("shorter than its header");
  }
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) throw bad("wrong magic bytes");
  if (header.version != kVersion) {
    throw bad("version " + std::to_string(header.version) + ", expected " + std::to_string(kVersion));
  }
  // Guard the multiplications below against absurd counts in a damaged header.
  const std::uint64_t limit = size / 4;
  if (header.num_documents > limit || header.num_segments > limit || header.num_tokens > limit) {
    throw bad("counts larger than the file");
  }
  const std::uint64_t expected =
      sizeof header + 8 * (header.num_documents + 1) + 8 * (header.num_segments + 1) + 4 * header.num_tokens;
  if (size != expected) {
    throw bad(std::to_string(size) + " bytes, header implies " + std::to_string(expected));
  }
  TokenizedSplit split;
  split.document_offsets.resize(header.num_documents + 1);
  split.segment_offsets.resize(header.num_segments + 1);
  split.tokens.resize(header.num_tokens);
  in.read(reinterpret_cast<char*>(split.document_offsets.data()),
          8 * static_cast<std::streamsize>(split.document_offsets.size()));
  in.read(reinterpret_cast<char*>(split.segment_offsets.data()),
          8 * static_cast<std::streamsize>(split.segment_offsets.size()));
  in.read(reinterpret_cast<char*>(split.tokens.data()), 4 * static_cast<std::streamsize>(split.tokens.size()));
  if (!in) throw bad("read failed");
  if (!ascending_from_zero(split.segment_offsets, header.num_tokens) ||
      !ascending_from_zero(split.document_offsets, header.num_segments)) {
    throw bad("offsets not ascending");
  }
  return split;
}

}  // namespace memtrain::data
