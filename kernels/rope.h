// Rotary position embedding, Llama / GPT-NeoX "rotate half" convention, absolute positions:
//   inv_freq[i] = theta^(-2 i / D), ang[j] = pos * inv_freq[j mod D/2],
//   rope(x) = x * cos(ang) + rotate_half(x) * sin(ang), rotate_half(x) = (-x[D/2:], x[:D/2]).
// Angles are computed in double for every output type, so positions up to 2^30 stay exact.
#pragma once

#include <cmath>
#include <vector>

namespace mactune {

inline constexpr double kDefaultRopeTheta = 10000.0;

// cos/sin of the D/2 angles of one position: [D/2] each.
struct RopeAngles {
  std::vector<double> cos, sin;
};

inline RopeAngles rope_angles(int head_dim, long long pos, double theta) {
  const int half = head_dim / 2;
  RopeAngles a{std::vector<double>(half), std::vector<double>(half)};
  for (int i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * i / head_dim);
    const double ang = static_cast<double>(pos) * inv_freq;
    a.cos[i] = std::cos(ang);
    a.sin[i] = std::sin(ang);
  }
  return a;
}

// out = rope(in) for one head vector of length D; in and out may alias.
template <class In, class Out>
void apply_rope(const In* in, Out* out, int head_dim, const RopeAngles& a) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double x0 = static_cast<double>(in[i]);
    const double x1 = static_cast<double>(in[i + half]);
    out[i] = static_cast<Out>(x0 * a.cos[i] - x1 * a.sin[i]);
    out[i + half] = static_cast<Out>(x1 * a.cos[i] + x0 * a.sin[i]);
  }
}

}  // namespace mactune
