// libFuzzer target: any bytes through the dispatch-table loader. Properties checked, beyond
// "no crash, no leak, no undefined behaviour" (ASan/UBSan):
//  - parse_table either throws mactune::InputError or returns a table that check_structure()
//    accepts; no other exception escapes;
//  - a Dispatcher refuses a table with exactly one single-line warning, or accepts it with none;
//  - an accepted table round-trips: to_json -> parse_table gives the same table, and its
//    header form is written without error;
//  - select() answers every probe, from the table only when the entry holds the problem.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dispatcher/dispatch.h"
#include "fuzz/fuzz_assert.h"
#include "kernels/error.h"

namespace {

using namespace mactune;
using namespace mactune::dispatch;

const Catalog& fuzz_catalog() {
  static const Catalog catalog({
      InstanceDesc::named("full_cpu_avx2_hd128_bf16", Backend::cpu, Family::full),
      InstanceDesc::named("mac_cpu_avx2_hd128_bf16", Backend::cpu, Family::mac),
      InstanceDesc::named("full_cpu_avx2_hd64_f16", Backend::cpu, Family::full),
      InstanceDesc::named("mac_cpu_avx2_hd64_f16", Backend::cpu, Family::mac),
      InstanceDesc::named("full_cuda_hd128_g4_t64_bf16", Backend::cuda, Family::full),
      InstanceDesc::named("attend_cuda_hd128_g4_t64_s2_bf16", Backend::cuda, Family::attend),
  });
  return catalog;
}

DeviceFingerprint fuzz_device() {
  DeviceFingerprint d;
  d.backend = Backend::cpu;
  d.name = "Fuzz CPU";
  d.compute_units = 2;
  d.memory_mib = 1024;
  d.arch = "avx2";
  d.threads = 2;
  return d;
}

void probe(const Dispatcher& d, const Entry* e) {
  Problem p = e ? e->shape.problem() : Problem{};
  const std::int64_t contexts[] = {1, 4096, e ? e->context.lo : 7,
                                   e && e->context.hi ? *e->context.hi : 1 << 20};
  const int batches[] = {1, e ? static_cast<int>(e->batch.lo) : 3, 64};
  for (std::int64_t ctx : contexts)
    for (int b : batches)
      for (double h : {0.0, 0.5, 1.0}) {
        p.batch = b;
        const Choice c = d.select(p, ctx, h);
        if (c.source == ChoiceSource::table) {
          FUZZ_ASSERT(d.table() && c.entry >= 0 &&
                      static_cast<std::size_t>(c.entry) < d.table()->entries.size());
          const Entry& hit = d.table()->entries[static_cast<std::size_t>(c.entry)];
          FUZZ_ASSERT(hit.shape == ShapeKey::of(p));
          FUZZ_ASSERT(hit.batch.contains(p.batch) && hit.context.contains(ctx));
          FUZZ_ASSERT(!c.use_mac() || (hit.min_hit_rate && h >= *hit.min_hit_rate));
        } else {
          FUZZ_ASSERT(!c.use_mac());
        }
        (void)describe(c);
      }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The parser alone.
  try {
    const DispatchTable t = parse_table(text, "fuzz");
    FUZZ_ASSERT(check_structure(t).empty());
  } catch (const InputError&) {
  }

  // The loader, device check off so that valid-looking tables reach the instance checks.
  int warnings = 0;
  LoadOptions o;
  o.device = fuzz_device();
  o.check_device = false;
  o.catalog = &fuzz_catalog();
  o.warn = [&warnings](std::string_view line) {
    ++warnings;
    FUZZ_ASSERT(line.find('\n') == std::string_view::npos);
    FUZZ_ASSERT(!line.empty());
  };
  const Dispatcher d = Dispatcher::from_text(text, "fuzz", o);
  if (const DispatchTable* t = d.table()) {
    FUZZ_ASSERT(warnings == 0);
    FUZZ_ASSERT(parse_table(to_json(*t), "round trip") == *t);
    FUZZ_ASSERT(!to_header(*t).empty());
    LoadOptions checked = o;
    checked.check_device = true;
    (void)validate_table(*t, checked);
    probe(d, nullptr);
    for (const Entry& e : t->entries) probe(d, &e);
  } else {
    FUZZ_ASSERT(warnings == 1);
    probe(d, nullptr);
  }
  return 0;
}
