#pragma once
// Element types of tensors, with the names the safetensors format uses for them.
#include <cstddef>
#include <string>
#include <string_view>

namespace memtrain::core {

enum class DType { f32, f16, bf16, i32 };

// Bytes per element: 4 for f32 and i32, 2 for f16 and bf16.
std::size_t dtype_size(DType dtype);

// The safetensors name of a dtype ("F32", "F16", "BF16", "I32").
std::string dtype_name(DType dtype);

// Inverse of dtype_name. Throws memtrain::ConfigError naming `name` and the accepted names.
DType dtype_from_name(std::string_view name);

}  // namespace memtrain::core
