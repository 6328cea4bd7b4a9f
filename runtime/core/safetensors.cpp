#include "runtime/core/safetensors.hpp"

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/core/errors.hpp"
#include "runtime/core/printable.hpp"

namespace memtrain::core {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; a big-endian host needs byte swaps");

namespace {

// The safetensors reference implementation refuses headers above 100 MB; so do we, so that a
// corrupt length cannot make us allocate the whole machine.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw RuntimeError("safetensors file " + path + ": " + what);
}

template <class T>
std::vector<T> convert(const HostArray& a) {
  std::vector<T> out(static_cast<std::size_t>(a.numel()));
  auto load = [&](auto tag) {
    using S = decltype(tag);
    for (std::size_t i = 0; i < out.size(); ++i) {
      S v;
      std::memcpy(&v, a.data.data() + i * sizeof(S), sizeof(S));
      out[i] = static_cast<T>(v);
    }
  };
  if (a.dtype == "F64") {
    load(double{});
  } else if (a.dtype == "F32") {
    load(float{});
  } else if (a.dtype == "I64") {
    load(std::int64_t{});
  } else if (a.dtype == "I32") {
    load(std::int32_t{});
  } else {
    throw RuntimeError("cannot convert a safetensors " + a.dtype + " array to numbers");
  }
  return out;
}

}  // namespace

std::int64_t HostArray::numel() const { return numel_of(shape); }

std::size_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  throw RuntimeError("unknown safetensors dtype \"" + dtype +
                     "\"; expected F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8 "
                     "or BOOL");
}

namespace {

std::map<std::string, HostArray> read_file(const std::string& path, std::map<std::string, std::string>* metadata,
                                           bool with_data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open for reading");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0, std::ios::beg);

  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    fail(path, "shorter than the 8-byte header length (" + std::to_string(file_size) + " bytes)");
  }
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    fail(path, "header length " + std::to_string(header_len) + " bytes exceeds the file (" + std::to_string(file_size) +
                   " bytes) or the 100 MB limit");
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len))) {
    fail(path, "cannot read the header");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    fail(path, "header is not valid JSON: " + json_error_text(e.what()));
  }
  if (!j.is_object()) fail(path, "header is not a JSON object");

  const std::uint64_t data_len = file_size - 8 - header_len;
  std::map<std::string, HostArray> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& e = it.value();
    if (name == "__metadata__") {
      if (metadata) {
        for (auto m = e.begin(); m != e.end(); ++m) {
          (*metadata)[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
        }
      }
      continue;
    }
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2) {
      fail(path, "tensor \"" + name +
                     "\": expected {\"dtype\": string, \"shape\": [ints], \"data_offsets\": "
                     "[begin, end]}, got " +
                     e.dump());
    }
    HostArray a;
    a.dtype = e["dtype"].get<std::string>();
    std::size_t elem = 0;
    try {
      elem = safetensors_dtype_size(a.dtype);
    } catch (const RuntimeError& err) {
      fail(path, "tensor \"" + name + "\": " + err.what());
    }
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0) {
        fail(path, "tensor \"" + name + "\": shape " + e["shape"].dump() + " must hold non-negative integers");
      }
      a.shape.push_back(d.get<std::int64_t>());
    }
    const auto& offs = e["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
      fail(path, "tensor \"" + name + "\": data_offsets " + offs.dump() + " must be non-negative integers");
    }
    const auto begin = offs[0].get<std::uint64_t>();
    const auto end = offs[1].get<std::uint64_t>();
    const auto expected = static_cast<std::uint64_t>(a.numel()) * elem;
    if (begin > end || end > data_len || end - begin != expected) {
      fail(path, "tensor \"" + name + "\": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] out of the " + std::to_string(data_len) + "-byte data section or not the " +
                     std::to_string(expected) + " bytes its dtype and shape need");
    }
    if (!with_data) {
      out.emplace(name, std::move(a));
      continue;
    }
    a.data.resize(expected);
    in.seekg(static_cast<std::streamoff>(8 + header_len + begin), std::ios::beg);
    if (expected > 0 && !in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(expected))) {
      fail(path, "cannot read the bytes of tensor \"" + name + "\"");
    }
    out.emplace(name, std::move(a));
  }
  return out;
}

}  // namespace

std::map<std::string, HostArray> read_safetensors(const std::string& path,
                                                  std::map<std::string, std::string>* metadata) {
  return read_file(path, metadata, true);
}

std::map<std::string, HostArray> read_safetensors_header(const std::string& path) {
  return read_file(path, nullptr, false);
}

std::vector<std::byte> safetensors_header(const std::map<std::string, TensorView>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, a] : tensors) {
    std::uint64_t numel = 1;
    for (const auto d : a.shape) numel *= static_cast<std::uint64_t>(d);
    const auto expected = numel * safetensors_dtype_size(a.dtype);
    if (a.data.size() != expected) {
      throw RuntimeError("safetensors: tensor \"" + name + "\" holds " + std::to_string(a.data.size()) +
                         " bytes; its dtype and shape need " + std::to_string(expected));
    }
    header[name] = {{"dtype", a.dtype}, {"shape", a.shape}, {"data_offsets", {offset, offset + expected}}};
    offset += expected;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> bytes(8 + text.size());
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>(n >> (8 * i));
  std::memcpy(bytes.data() + 8, text.data(), text.size());
  return bytes;
}

std::vector<std::byte> encode_safetensors(const std::map<std::string, HostArray>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  std::map<std::string, TensorView> views;
  for (const auto& [name, a] : tensors) views[name] = TensorView{a.dtype, a.shape, a.data};
  std::vector<std::byte> bytes = safetensors_header(views, metadata);
  std::size_t total = bytes.size();
  for (const auto& [name, a] : tensors) total += a.data.size();
  bytes.reserve(total);
  for (const auto& [name, a] : tensors) bytes.insert(bytes.end(), a.data.begin(), a.data.end());
  return bytes;
}

void write_safetensors(const std::string& path, const std::map<std::string, HostArray>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<std::byte> bytes;
  try {
    bytes = encode_safetensors(tensors, metadata);
  } catch (const RuntimeError& e) {
    fail(path, std::string(e.what()).substr(std::string("safetensors: ").size()));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, "cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) fail(path, "write failed (disk full or I/O error)");
}

HostArray host_array_f32(const float* values, std::vector<std::int64_t> shape) {
  HostArray a{"F32", std::move(shape), {}};
  a.data.resize(static_cast<std::size_t>(a.numel()) * sizeof(float));
  if (!a.data.empty()) std::memcpy(a.data.data(), values, a.data.size());
  return a;
}

HostArray host_array_i32(const std::int32_t* values, std::vector<std::int64_t> shape) {
  HostArray a{"I32", std::move(shape), {}};
  a.data.resize(static_cast<std::size_t>(a.numel()) * sizeof(std::int32_t));
  if (!a.data.empty()) std::memcpy(a.data.data(), values, a.data.size());
  return a;
}

std::vector<double> to_doubles(const HostArray& array) { return convert<double>(array); }

std::vector<float> to_floats(const HostArray& array) { return convert<float>(array); }

std::vector<std::int32_t> to_int32s(const HostArray& array) {
  if (array.dtype != "I32" && array.dtype != "I64") {
    throw RuntimeError("expected an I32 or I64 safetensors array, got " + array.dtype);
  }
  return convert<std::int32_t>(array);
}

}  // namespace memtrain::core
