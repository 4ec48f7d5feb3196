// Writes a small dispatch table for this machine (its CPU fingerprint, instances from this
// build's default catalog) so the installed-package test can show the example accepting a
// table: make_device_table OUT.json. Exits 77 when this build has no CPU instances.
#include <cstdio>
#include <exception>

#include "dispatcher/catalog.h"
#include "dispatcher/table.h"
#include "kernels/device.h"

int main(int argc, char** argv) {
  namespace dispatch = mactune::dispatch;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  const dispatch::ShapeKey llama{128, 32, 8, mactune::DType::bf16, 16};
  const mactune::Problem p = llama.problem();
  const dispatch::Catalog& catalog = dispatch::default_catalog();
  const mactune::InstanceDesc* full =
      catalog.first_fit(mactune::Backend::cpu, mactune::Family::full, p);
  const mactune::InstanceDesc* mac =
      catalog.first_fit(mactune::Backend::cpu, mactune::Family::mac, p);
  if (!full || !mac) {
    std::fprintf(stderr, "this build's catalog has no CPU instance for head_dim 128 bf16\n");
    return 77;
  }
  const mactune::DeviceFingerprint device = mactune::cpu_fingerprint();
  dispatch::DispatchTable t;
  t.device = {device.backend, device.name, device.digest()};
  t.generated = {"0.1.0", "test", "none (tests/dispatcher/make_device_table)",
                 dispatch::utc_now_iso8601()};
  const dispatch::Params params = {{"chunk_tokens", std::int64_t{256}}};
  auto entry = [&](dispatch::Interval batch, dispatch::Interval context, bool use_mac,
                   std::optional<double> min_hit) {
    dispatch::Entry e;
    e.shape = llama;
    e.batch = batch;
    e.context = context;
    e.full = {full->name, params};
    if (use_mac) e.mac = dispatch::MacChoice{mac->name, 512, 256, 0.45, params};
    e.min_hit_rate = min_hit;
    return e;
  };
  t.entries = {entry({1, 8}, {1, 65535}, false, std::nullopt),
               entry({1, 8}, {65536, std::nullopt}, true, 0.85),
               entry({9, std::nullopt}, {1, std::nullopt}, true, 0.6)};
  try {
    dispatch::write_table(t, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_device_table: %s\n", e.what());
    return 2;
  }
  return 0;
}
