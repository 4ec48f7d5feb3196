// Shared fixtures of the dispatch tests: a device, a catalog of instances and a table that
// uses every feature of the format.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dispatcher/catalog.h"
#include "dispatcher/dispatch.h"
#include "kernels/device.h"

namespace mactune::dispatch::testing {

inline DeviceFingerprint test_device() {
  DeviceFingerprint d;
  d.backend = Backend::cpu;
  d.name = "Test CPU 9000";
  d.compute_units = 4;
  d.memory_mib = 16384;
  d.arch = "avx2";
  d.threads = 4;
  return d;
}

// A description with no can_implement of its own: the catalog checks it by name (name_fits).
inline InstanceDesc info(std::string name, std::string_view backend, std::string_view family) {
  return InstanceDesc::named(std::move(name), parse_enum<Backend>(backend),
                             parse_enum<Family>(family));
}

// CPU instances for head_dim 128 (bf16, f32) and 64 (f16), a generic full path for 128/bf16
// listed second, and two CUDA instances (another backend).
inline Catalog test_catalog() {
  return Catalog({
      info("full_cpu_avx2_hd128_bf16", "cpu", "full"),
      info("full_cpu_generic_hd128_bf16", "cpu", "full"),
      info("mac_cpu_avx2_hd128_bf16", "cpu", "mac"),
      info("full_cpu_avx2_hd128_f32", "cpu", "full"),
      info("mac_cpu_avx2_hd128_f32", "cpu", "mac"),
      info("full_cpu_avx2_hd64_f16", "cpu", "full"),
      info("mac_cpu_avx2_hd64_f16", "cpu", "mac"),
      info("full_cuda_hd128_g4_bf16", "cuda", "full"),
      info("attend_cuda_hd128_g4_t64_s2_bf16", "cuda", "attend"),
  });
}

inline ShapeKey llama_shape() {
  return ShapeKey{128, 32, 8, DType::bf16, 16};
}

// Four buckets of the Llama shape (batch [1, 8] / [9, inf) x context [1, 32767] / [32768, inf))
// and one of a head_dim 64 shape; MAC where it won, with break-evens.
inline DispatchTable test_table(const DeviceFingerprint& device = test_device()) {
  DispatchTable t;
  t.device = {device.backend, device.name, device.digest()};
  t.generated = {"0.1.0", "abc123def456", "runs/test.db", "2026-02-03T04:05:06Z"};
  const Params cpu_params = {{"chunk_tokens", std::int64_t{256}},
                             {"block_rows", std::int64_t{16}},
                             {"threads", std::int64_t{4}},
                             {"isa", std::string("avx2")}};
  auto entry = [&](Interval batch, Interval context, bool mac, std::optional<double> min_hit) {
    Entry e;
    e.shape = llama_shape();
    e.batch = batch;
    e.context = context;
    e.full = {"full_cpu_avx2_hd128_bf16", cpu_params};
    if (mac) e.mac = MacChoice{"mac_cpu_avx2_hd128_bf16", 512, 256, 0.45, cpu_params};
    e.min_hit_rate = min_hit;
    return e;
  };
  t.entries.push_back(entry({1, 8}, {1, 32767}, false, std::nullopt));
  t.entries.push_back(entry({1, 8}, {32768, std::nullopt}, true, 0.7));
  t.entries.push_back(entry({9, std::nullopt}, {1, 32767}, true, std::nullopt));
  t.entries.push_back(entry({9, std::nullopt}, {32768, std::nullopt}, true, 0.55));
  t.entries.back().note = "ambiguous at 0.5";
  Entry small;
  small.shape = {64, 16, 2, DType::f16, 1};
  small.batch = {1, 64};
  small.context = {1024, 65536};
  small.full = {"full_cpu_avx2_hd64_f16", {{"fast", true}, {"ratio", 0.1}}};
  small.mac = MacChoice{"mac_cpu_avx2_hd64_f16", 256, 128, std::nullopt, {}};
  small.min_hit_rate = 0.0;
  t.entries.push_back(small);
  return t;
}

inline Problem problem_of(const ShapeKey& s, int batch) {
  return s.problem(batch);
}

// Collects warnings; each call is one line.
struct WarningLog {
  std::vector<std::string> lines;
  LoadOptions options(const Catalog* catalog, const DeviceFingerprint& device = test_device()) {
    LoadOptions o;
    o.device = device;
    o.catalog = catalog;
    o.warn = [this](std::string_view line) { lines.emplace_back(line); };
    return o;
  }
};

}  // namespace mactune::dispatch::testing
