// libFuzzer target: any bytes as a sweep spec (tuner/spec/spec.h) on both backends. Properties
// checked, beyond "no crash, no leak, no undefined behaviour, no hang" (ASan/UBSan, -timeout):
//  - parse_spec and requested_backend either throw mactune::InputError or return; no other
//    exception escapes (a yaml-cpp exception or std::bad_alloc would reach the user as
//    "internal error");
//  - every InputError is one line naming the file ("fuzz.yaml:LINE: KEY: ...");
//  - a parsed spec has a name, a database and a dispatch path, and every axis has values;
//  - its grid (when small) expands or is refused with an InputError naming the file.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/fuzz_assert.h"
#include "kernels/error.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace {

using namespace mactune;
using namespace mactune::tuner;

void check_message(const InputError& e) {
  const std::string_view m = e.what();
  FUZZ_ASSERT(m.find('\n') == std::string_view::npos);
  FUZZ_ASSERT(m.rfind("fuzz.yaml", 0) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tuner::max_spec_bytes) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)requested_backend(text, "fuzz.yaml");
  } catch (const InputError& e) {
    check_message(e);
  }
  for (const Backend backend : {Backend::cpu, Backend::cuda}) {
    Spec spec;
    try {
      spec = parse_spec(text, "fuzz.yaml", backend);
    } catch (const InputError& e) {
      check_message(e);
      continue;
    }
    FUZZ_ASSERT(!spec.name.empty() && !spec.output.db.empty() && !spec.output.dispatch.empty());
    double points = 1;
    for (const Axis& a : spec.axes) {
      FUZZ_ASSERT(!a.values.empty());
      points *= static_cast<double>(a.values.size());
    }
    if (points > 4096) continue;  // the expansion of a large grid is linear work, not parsing
    try {
      const auto grid = expand_grid(spec);
      FUZZ_ASSERT(!grid.empty());
    } catch (const InputError& e) {
      check_message(e);
    }
  }
  return 0;
}
