// libFuzzer target: any bytes as a constraint expression (tuner/spec/expr.h). Properties checked,
// beyond "no crash, no leak, no undefined behaviour, no hang":
//  - Expr::parse either throws mactune::InputError, one line naming the column, or returns an
//    expression whose names() are all known;
//  - eval() on any values of the names never crashes and holds() agrees with it (a NaN, from
//    a zero divisor or log2 of a negative, does not hold);
//  - a divisor that is zero whatever the names are is refused by parse, never evaluated.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "fuzz/fuzz_assert.h"
#include "kernels/error.h"
#include "tuner/spec/expr.h"

namespace {

using namespace mactune;
using namespace mactune::tuner;

const std::set<std::string>& known() {
  static const std::set<std::string> names = {"K",       "r",        "batch",    "context", "G",
                                              "q_heads", "kv_heads", "head_dim", "hit_rate"};
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The first 8 bytes (when there are more) seed the names' values; the rest is the text.
  std::uint64_t seed = 0x9e3779b97f4a7c15ull;
  if (size > 8) {
    std::memcpy(&seed, data, 8);
    data += 8;
    size -= 8;
  }
  if (size > 4096) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Expr e;
  try {
    e = Expr::parse(text, known());
  } catch (const InputError& err) {
    const std::string_view m = err.what();
    FUZZ_ASSERT(m.find(" at column ") != std::string_view::npos);
    return 0;
  }
  for (const auto& n : e.names()) FUZZ_ASSERT(known().count(n));
  // Values as the grid has them: small integers, powers of two, fractions, and zero.
  const double pool[] = {0, 1, 2, 3, 7, 64, 512, 4096, 131072, 0.5, 0.25, -1};
  for (int round = 0; round < 4; ++round) {
    std::uint64_t s = seed + 0x632be59bd9b4e019ull * static_cast<std::uint64_t>(round);
    const auto lookup = [&](const std::string& name) -> std::optional<double> {
      if (name == "hit_rate" && (s & 1)) return std::nullopt;  // a name that does not apply
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      return pool[(s >> 33) % (sizeof pool / sizeof pool[0])];
    };
    const auto v = e.eval(lookup);
    s = seed + 0x632be59bd9b4e019ull * static_cast<std::uint64_t>(round);
    const bool holds = e.holds(lookup);
    FUZZ_ASSERT(holds == (!v || (!std::isnan(*v) && *v != 0.0)));
  }
  return 0;
}
