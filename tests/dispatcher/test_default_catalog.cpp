// The default catalog of a build with the CPU engine: its instances, ordered so that the
// fallback takes the path the engine itself picks (isa = auto), and the engine's own shape
// checks as the fit predicate.
#include <gtest/gtest.h>

#include "dispatcher/dispatch.h"
#include "kernels/cpu/session.h"

namespace mactune::dispatch {
namespace {

Problem llama(int batch) {
  Problem p;
  p.batch = batch;
  p.q_heads = 32;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.kv_dtype = DType::bf16;
  return p;
}

TEST(DefaultCatalog, HoldsEveryCpuInstanceOfThisBuild) {
  const Catalog& c = default_catalog();
  for (const InstanceDesc& info : cpu::instances()) {
    const InstanceDesc* found = c.find(info.name);
    ASSERT_NE(found, nullptr) << info.name;
    EXPECT_EQ(found->family, info.family);
    EXPECT_EQ(found->backend, Backend::cpu);
  }
}

TEST(DefaultCatalog, FallbackIsTheEnginesOwnChoice) {
  for (const DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const int d : {64, 128, 256}) {
      cpu::SessionOptions o;
      o.shape = llama(1);
      o.shape.head_dim = d;
      o.shape.kv_dtype = t;
      o.mac_enabled = false;
      o.max_context = 64;
      const cpu::Session engine(o);  // isa = auto
      const Choice c = fallback_choice(default_catalog(), Backend::cpu, o.shape);
      EXPECT_EQ(c.instance(), engine.instance_name());
      EXPECT_FALSE(c.use_mac());
    }
  }
}

// The generic reading of names (name_fits: hd<D>, g<G>, the trailing dtype, the fallback for
// descriptions without a can_implement) says of every built CUDA instance what its own
// description says: the CUDA grammar (config.h) and the catalog's agree.
TEST(DefaultCatalog, CudaNamesFitAsTheirDescriptionsSay) {
  int cuda = 0, checked = 0;
  for (const InstanceDesc& info : default_catalog().instances()) {
    if (info.backend != Backend::cuda) continue;
    ++cuda;
    ASSERT_TRUE(info.can_implement) << info.name;
    for (const int d : {64, 96, 128, 256})
      for (const int q : {2, 4, 8, 16, 24, 32})
        for (const DType t : {DType::f32, DType::f16, DType::bf16}) {
          Problem p = llama(1);
          p.head_dim = d;
          p.q_heads = q;
          p.kv_heads = 2;
          p.kv_dtype = t;
          ASSERT_EQ(validate(p), "");
          EXPECT_EQ(name_fits(info.name, p), info.can_implement(p).empty())
              << info.name << " hd" << d << " G" << q / 2 << " " << dtype_name(t) << ": "
              << info.can_implement(p);
          ++checked;
        }
  }
  if (cuda == 0) GTEST_SKIP() << "no CUDA instance in this build";
  EXPECT_EQ(checked, cuda * 4 * 6 * 3);
}

TEST(DefaultCatalog, UsesTheEnginesShapeChecks) {
  Problem p = llama(1);
  p.q_heads = 64;
  p.kv_heads = 2;  // G = 32: the CPU engine takes G in 1..16
  cpu::SessionOptions o;
  o.shape = p;
  ASSERT_FALSE(cpu::validate(o).empty());
  EXPECT_EQ(fallback_choice(default_catalog(), Backend::cpu, p).instance(), "");
  p.head_dim = 96;  // no CPU path for head_dim 96
  p.kv_heads = 8;
  EXPECT_EQ(fallback_choice(default_catalog(), Backend::cpu, p).instance(), "");
}

// A table naming the instances this build has loads through the default options (this CPU,
// the default catalog) without a warning.
TEST(DefaultCatalog, AcceptsATableOfThisMachine) {
  const DeviceFingerprint here = cpu_fingerprint();
  const Catalog& c = default_catalog();
  const InstanceDesc* full = c.first_fit(Backend::cpu, Family::full, llama(1));
  const InstanceDesc* mac = c.first_fit(Backend::cpu, Family::mac, llama(1));
  ASSERT_NE(full, nullptr);
  ASSERT_NE(mac, nullptr);
  DispatchTable t;
  t.device = {here.backend, here.name, here.digest()};
  t.generated = {"0.1.0", "test", "none", utc_now_iso8601()};
  Entry e;
  e.shape = ShapeKey::of(llama(1));
  e.batch = {1, std::nullopt};
  e.context = {1, std::nullopt};
  e.full = {full->name, {}};
  e.mac = MacChoice{mac->name, 512, 256, std::nullopt, {}};
  e.min_hit_rate = 0.5;
  t.entries.push_back(e);
  std::vector<std::string> warnings;
  LoadOptions o;
  o.warn = [&warnings](std::string_view w) { warnings.emplace_back(w); };
  const Dispatcher d = Dispatcher::from_table(t, "here", o);
  ASSERT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(d.select(llama(4), 100000, 0.6).instance(), mac->name);
}

}  // namespace
}  // namespace mactune::dispatch
