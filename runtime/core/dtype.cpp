#include "runtime/core/dtype.hpp"

#include "runtime/core/errors.hpp"

namespace memtrain::core {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
  }
  throw RuntimeError("dtype_size: invalid DType value " + std::to_string(static_cast<int>(dtype)));
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
  }
  throw RuntimeError("dtype_name: invalid DType value " + std::to_string(static_cast<int>(dtype)));
}

DType dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::f32;
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  if (name == "I32") return DType::i32;
  throw ConfigError("unknown tensor dtype \"" + std::string(name) + "\"; expected one of F32, F16, BF16, I32");
}

}  // namespace memtrain::core
