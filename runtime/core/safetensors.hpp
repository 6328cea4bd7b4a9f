#pragma once
// Reading and writing the safetensors format (https://github.com/huggingface/safetensors,
// "Format"): an 8-byte little-endian header length N, N bytes of JSON
// {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"<key>": "<string>"}}, then the raw little-endian tensor bytes, with
// offsets relative to the start of that byte buffer. Used for test fixtures and checkpoints.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace memtrain::core {

// One tensor held in host memory, as stored in the file.
struct HostArray {
  std::string dtype;                // safetensors name: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL
  std::vector<std::int64_t> shape;  // row-major
  std::vector<std::byte> data;      // numel * element size bytes, little-endian

  std::int64_t numel() const;
};

// Bytes per element of a safetensors dtype name; throws memtrain::RuntimeError if unknown.
std::size_t safetensors_dtype_size(const std::string& dtype);

// Reads every tensor of the file at `path` (the "__metadata__" entry goes to *metadata when
// given). Throws memtrain::RuntimeError naming the file and what is wrong when the file cannot
// be read, the header is truncated or not JSON, an entry lacks dtype/shape/data_offsets, a
// dtype is unknown, or an entry's byte range is out of bounds or disagrees with its shape.
std::map<std::string, HostArray> read_safetensors(const std::string& path,
                                                  std::map<std::string, std::string>* metadata = nullptr);

// The header of the file at `path`, checked as read_safetensors checks it (every entry's dtype,
// shape and byte range against the file), without reading the tensors: each array has its
// dtype and shape and no data. Throws memtrain::RuntimeError as read_safetensors does.
std::map<std::string, HostArray> read_safetensors_header(const std::string& path);

// Writes `tensors` (sorted by name, contiguous, header padded with spaces to a multiple of 8
// bytes as the reference implementation does). Throws memtrain::RuntimeError when the file
// cannot be written or an array's byte count disagrees with its dtype and shape.
// Writes in place, not atomically: checkpoints get atomicity from their temporary directory
// and rename (design.md, "Checkpoints and recovery").
void write_safetensors(const std::string& path, const std::map<std::string, HostArray>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The bytes write_safetensors writes (the whole file in memory), for writers that need them
// first (checkpoints: a durable write that counts its bytes). Throws memtrain::RuntimeError
// "safetensors: tensor ..." when an array's byte count disagrees with its dtype and shape.
std::vector<std::byte> encode_safetensors(const std::map<std::string, HostArray>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

// A tensor's bytes where they already are (a checkpoint writes parameters without copying them).
struct TensorView {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;  // numel * element size bytes, little-endian
};

// The first bytes of the file encode_safetensors would write for `tensors` (the 8-byte length
// and the padded JSON header); the file is these followed by each view's bytes in name order.
// Throws memtrain::RuntimeError "safetensors: tensor ..." as encode_safetensors.
std::vector<std::byte> safetensors_header(const std::map<std::string, TensorView>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

// An F32 array holding a copy of values[0, numel(shape)).
HostArray host_array_f32(const float* values, std::vector<std::int64_t> shape);
// An I32 array holding a copy of values[0, numel(shape)).
HostArray host_array_i32(const std::int32_t* values, std::vector<std::int64_t> shape);

// The elements converted to double (F64, F32, I64, I32 only; others throw RuntimeError).
std::vector<double> to_doubles(const HostArray& array);
// The elements converted to float (F64 rounds; F32, I32 as to_doubles).
std::vector<float> to_floats(const HostArray& array);
// The elements of an I32 or I64 array as int32 (throws RuntimeError otherwise).
std::vector<std::int32_t> to_int32s(const HostArray& array);

}  // namespace memtrain::core
