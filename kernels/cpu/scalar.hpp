#pragma once
// Scalar-type plumbing shared by the CPU kernels.
#include <type_traits>

namespace memtrain::kernels {

// Note [Kernels are templates over the scalar type]
// Every kernel is a template over T, explicitly instantiated for float (training) and double
// (the finite-difference tests run the very same code in double precision). T is deduced from
// the mandatory tensor arguments only: scalars (lr, alpha, eps...) and pointers that may be
// nullptr take NoDeduce<T>, so `linear_forward(out, x, w, nullptr, ...)` or `alpha = 1.0` with
// float tensors still compiles and picks T = float.
template <class T>
using NoDeduce = std::type_identity_t<T>;

}  // namespace memtrain::kernels
