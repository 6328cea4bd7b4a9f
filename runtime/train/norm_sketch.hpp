#pragma once
// An unbiased estimate of the norm of a sum that no rank holds: the AMS / CountSketch estimate
// of a vector's second moment (Alon, Matias and Szegedy, "The space complexity of approximating
// the frequency moments", STOC 1996; Charikar, Chen and Farach-Colton, "Finding frequent items
// in data streams", ICALP 2002), used by 1-bit Adam's clipping (Note [1-bit Adam clips by a
// sketch of the summed norm], onebit_adam.hpp).
#include <cstdint>
#include <vector>

#include "kernels/philox.hpp"

namespace memtrain::train {

// Note [A sketch of the norm of a sum]
// With signs s_j = +1 or -1 drawn independently for every element j and buckets b(j) = j mod K,
// the sketch S(x)_b = sum over j with b(j) = b of s_j x_j is linear in x, so the sketches of
// the ranks' gradients sum to the sketch of the summed gradient G (one all-reduce of K values
// instead of the gradients), and E ||S(G)||^2 = ||G||^2 (the cross terms s_i s_j x_i x_j have
// mean 0). Its variance is at most 2 ||G||^4 / K with signs 4-wise independent (Philox's are
// independent for practical purposes), a relative error of about sqrt(2 / K) on the square,
// half that on the norm: 3 % at K = 512. A non-finite x_j makes its bucket, and the estimate,
// non-finite (inf - inf is NaN), so the sketch is also the overflow check.
class NormSketch {
 public:
  static constexpr int kBuckets = 512;  // K

  // Signs of one step: every rank must pass the same seed and step.
  NormSketch(std::uint64_t seed, std::uint64_t step);
  // Adds the sketch of tensor `tensor` (x: [n] f32) to the buckets. A tensor's signs depend on
  // (seed, step, tensor, j) only, so tensors may be added in any order.
  void add(std::uint32_t tensor, const float* x, std::int64_t n);
  // The buckets, to be summed over the ranks (an all-reduce of kBuckets doubles).
  double* buckets() { return buckets_.data(); }
  // sqrt(||S||^2): the estimate of the norm of the sum of what was added (over every rank, once
  // the buckets have been summed).
  double norm() const;

 private:
  std::uint64_t seed_, step_;
  std::vector<double> buckets_;
};

}  // namespace memtrain::train
