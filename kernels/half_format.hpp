#pragma once
// The 16-bit floating-point storage formats the kernels convert to and from float: a name only,
// shared by the op API (kernels/ops), both backends and their callers; the conversions are the
// backends' (kernels/cpu/half_convert.hpp, kernels/cuda/half_convert.hpp).
//
// f16  = IEEE 754-2008 binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
// bf16 = bfloat16 (the top 16 bits of an IEEE binary32): 1 sign, 8 exponent (bias 127),
//        7 fraction bits.
namespace memtrain::kernels {

enum class HalfFormat { f16, bf16 };

}  // namespace memtrain::kernels
