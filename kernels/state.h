// The attention-state algebra (DESIGN.md section 1), for any float type, on host and device.
//
// A state over a set J of key positions is (o, lse): o the softmax-weighted mean of the values
// (normalized, length D), lse = ln sum_{j in J} exp(s_j), natural log. The empty set is (0, -inf).
// Merge (+) combines disjoint sets; removal (-) recovers A from F = A u W. Neither makes a NaN.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/config.h"
#include "kernels/dtype.h"

namespace mactune {

template <class T>
MACTUNE_HD constexpr T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

// One stored element read as T (storage types bf16_t / f16_t go through float).
template <class T, class U>
MACTUNE_HD inline T widen(U x) {
  if constexpr (std::is_arithmetic_v<U>) {
    return static_cast<T>(x);
  } else {
    return static_cast<T>(to_float(x));
  }
}

template <class T>
MACTUNE_HD inline bool is_empty_lse(T lse) {
  return !(lse > neg_inf<T>());  // -inf, and NaN defensively, mean "no mass"
}

// Weights of a merge: L = max + ln(exp(l1 - max) + exp(l2 - max)), w_i = exp(l_i - L).
template <class T>
struct MergeWeights {
  T w1, w2, lse;
};

template <class T>
MACTUNE_HD inline MergeWeights<T> merge_weights(T l1, T l2) {
  using std::exp;
  using std::log1p;
  if (is_empty_lse(l2)) return {T(1), T(0), l1};
  if (is_empty_lse(l1)) return {T(0), T(1), l2};
  const T hi = l1 > l2 ? l1 : l2;
  const T lo = l1 > l2 ? l2 : l1;
  const T e = exp(lo - hi);  // in (0, 1]
  const T lse = hi + log1p(e);
  const T w_hi = T(1) / (T(1) + e);
  const T w_lo = e * w_hi;
  return l1 > l2 ? MergeWeights<T>{w_hi, w_lo, lse} : MergeWeights<T>{w_lo, w_hi, lse};
}

// (o1, l1) <- (o1, l1) (+) (o2, l2). Both o have length d. Two empty sides stay empty (o1 = 0).
template <class T, class U>
MACTUNE_HD inline void merge_into(T* o1, T& l1, const U* o2, T l2, int d) {
  if (is_empty_lse(l2)) {
    if (is_empty_lse(l1))
      for (int i = 0; i < d; ++i) o1[i] = T(0);
    return;
  }
  if (is_empty_lse(l1)) {  // copy: o1 may hold anything
    for (int i = 0; i < d; ++i) o1[i] = widen<T>(o2[i]);
    l1 = l2;
    return;
  }
  const MergeWeights<T> w = merge_weights(l1, l2);
  for (int i = 0; i < d; ++i) o1[i] = w.w1 * o1[i] + w.w2 * widen<T>(o2[i]);
  l1 = w.lse;
}

// Removal (-): from F = A u W (disjoint), recover A = (o_A, l_A):
// t = exp(l_W - l_F), l_A = l_F + ln(1 - t), o_A = (o_F - t o_W) / (1 - t).
// Ill-conditioned as t -> 1 (W holds nearly all the mass): when 1 - t <= guard the result is
// the empty state and the return value is true ("the guard fired"); the caller counts it.
template <class T, class U, class V>
MACTUNE_HD inline bool remove_into(T* o_a, T& l_a, const U* o_f, T l_f, const V* o_w, T l_w, int d,
                                   T guard) {
  using std::expm1;
  using std::log1p;
  if (is_empty_lse(l_w)) {  // nothing removed
    for (int i = 0; i < d; ++i) o_a[i] = widen<T>(o_f[i]);
    l_a = l_f;
    return false;
  }
  const T one_minus_t = is_empty_lse(l_f) ? T(0) : -expm1(l_w - l_f);
  if (!(one_minus_t > guard)) {
    for (int i = 0; i < d; ++i) o_a[i] = T(0);
    l_a = neg_inf<T>();
    return true;
  }
  const T t = T(1) - one_minus_t;
  const T inv = T(1) / one_minus_t;
  for (int i = 0; i < d; ++i) o_a[i] = (widen<T>(o_f[i]) - t * widen<T>(o_w[i])) * inv;
  l_a = l_f + log1p(-t);
  return false;
}

}  // namespace mactune
