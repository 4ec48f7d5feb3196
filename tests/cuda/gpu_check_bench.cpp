// The two Benches of mactune_gpu_check: cuda::Session steps timed with device events (the GPU)
// and placeholder numbers of the same shape (the dry run, no GPU).
#include "gpu_check_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/registry.h"
#include "kernels/error.h"

namespace mactune::cuda::check {

SessionOptions full_options(const SessionOptions& mac) {
  SessionOptions f = mac;
  f.mac_enabled = false;
  f.forced.enabled = false;
  return f;
}

std::string plan_text(const PlanChoice& c) {
  return std::string(c.kind == PlanKind::uniform ? "uniform" : "balanced") + " " +
         std::to_string(c.items) + " items";
}

namespace {

constexpr std::uint64_t kSeed = 11;

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return kNotMeasured;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// Samples of one session's step; summarize() turns them into StepTimes.
struct Samples {
  std::vector<double> step, match, plan, attend;

  void add(const Session& s) {
    step.push_back(s.last_step_ms());
    for (const auto& [phase, ms] : s.last_phase_ms()) {
      if (phase == Phase::match) match.push_back(ms);
      if (phase == Phase::plan) plan.push_back(ms);
      if (phase == Phase::attend) attend.push_back(ms);
    }
  }
  StepTimes summarize(const Session& s, const StepResult& last) const {
    StepTimes t;
    t.ms = quantile(step, 0.5);
    t.spread = (quantile(step, 0.75) - quantile(step, 0.25)) / t.ms;
    t.match_ms = quantile(match, 0.5);
    t.plan_ms = quantile(plan, 0.5);
    t.attend_ms = quantile(attend, 0.5);
    t.modeled_bytes = last.stats.modeled_bytes();
    t.skip = last.stats.skip_ratio();
    t.plan = s.last_plan();
    t.instance = s.instance_name();
    return t;
  }
};

class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    MACTUNE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceMemory() { cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

class GpuBench final : public Bench {
 public:
  bool dry() const override { return false; }

  DeviceInfo device() override {
    const DeviceFingerprint f = device_fingerprint(0);
    int l2 = 0;
    MACTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    return {f.name, f.arch, f.runtime, f.compute_units, f.memory_mib, l2 / 1048576.0};
  }

  double copy_gbs(std::size_t bytes, int repeats) override {
    DeviceMemory a(bytes), b(bytes);
    MACTUNE_CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
    cudaEvent_t e0, e1;
    MACTUNE_CUDA_CHECK(cudaEventCreate(&e0));
    MACTUNE_CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<double> gbs;
    for (int i = 0; i < repeats + 2; ++i) {
      MACTUNE_CUDA_CHECK(cudaEventRecord(e0));
      MACTUNE_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
      MACTUNE_CUDA_CHECK(cudaEventRecord(e1));
      MACTUNE_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      MACTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 2) gbs.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return quantile(gbs, 0.5);
  }

  std::vector<PairResult> pair(const PairSpec& spec) override {
    Session full(full_options(spec.mac)), mac(spec.mac);
    const int n = spec.mac.shape.batch;
    const StepInputs fin = prefilled_step(full, n, spec.context, kSeed);
    const StepInputs min = prefilled_step(mac, n, spec.context, kSeed);
    std::vector<PairResult> out;
    for (double hit : spec.hits) {
      ForcedHits forced = spec.mac.forced;
      forced.hit_rate = hit;
      mac.set_forced(forced);
      Samples sf, sm;
      const StepResult *rf = nullptr, *rm = nullptr;
      for (int i = 0; i < spec.warmup + spec.samples; ++i) {  // interleaved
        rf = &full.step(fin.ids, fin.q, fin.k, fin.v, false);
        if (i >= spec.warmup) sf.add(full);
        rm = &mac.step(min.ids, min.q, min.k, min.v, false);
        if (i >= spec.warmup) sm.add(mac);
      }
      out.push_back({hit, sf.summarize(full, *rf), sm.summarize(mac, *rm)});
    }
    return out;
  }

  StepTimes single(const SingleSpec& spec) override {
    Session s(spec.options);
    const StepInputs in = prefilled_step(s, spec.options.shape.batch, spec.context, kSeed);
    int l2 = 0;
    MACTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    std::unique_ptr<DeviceMemory> flush;
    if (spec.flush_l2)
      flush = std::make_unique<DeviceMemory>(std::max<std::size_t>(4 * std::size_t(l2), 64 << 20));
    Samples samples;
    const StepResult* last = nullptr;
    for (int i = 0; i < spec.warmup + spec.samples; ++i) {
      if (flush) {
        MACTUNE_CUDA_CHECK(cudaMemset(flush->get(), i & 0xff, flush->bytes()));
        MACTUNE_CUDA_CHECK(cudaDeviceSynchronize());
      }
      last = &s.step(in.ids, in.q, in.k, in.v, false);
      if (i >= spec.warmup) samples.add(s);
    }
    return samples.summarize(s, *last);
  }

  CompareResult compare(const CompareSpec& spec) override {
    SessionOptions mo = spec.mac;
    mo.forced.enabled = true;
    mo.forced.hit_rate = 0.0;
    mo.engine.poison = true;
    SessionOptions fo = full_options(mo);
    Session full(fo), mac(mo);
    const int n = mo.shape.batch;
    const StepInputs first = prefilled_step(full, n, spec.context, kSeed);
    const StepInputs second = prefilled_step(mac, n, spec.context, kSeed);
    double diff2 = 0, ref2 = 0, max_abs = 0;
    bool finite = true;
    for (int t = 0; t < spec.steps; ++t) {
      const StepInputs in = synthetic_step(mo.shape, n, step_seed(kSeed, t));
      const std::vector<float> want = full.step(first.ids, in.q, in.k, in.v).out;
      const std::vector<float>& got = mac.step(second.ids, in.q, in.k, in.v).out;
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(want[i]) || !std::isfinite(got[i])) {
          finite = false;
          continue;
        }
        const double d = double(got[i]) - double(want[i]);
        diff2 += d * d;
        ref2 += double(want[i]) * want[i];
        max_abs = std::max(max_abs, std::abs(d));
      }
    }
    return {ref2 > 0 ? std::sqrt(diff2 / ref2) : kNotMeasured, max_abs, finite};
  }

  int ctas_per_sm(const std::string& name) override {
    int ctas = -1;
    if (const FullInstance* f = find_instance(full_instances(), name))
      MACTUNE_CUDA_CHECK(f->ctas_per_sm(ctas));
    else if (const AttendInstance* a = find_instance(attend_instances(), name))
      MACTUNE_CUDA_CHECK(a->ctas_per_sm(ctas));
    return ctas;
  }
};

// No GPU: every number a fixed placeholder, every shape and name as the GPU run would have it.
class DryBench final : public Bench {
 public:
  bool dry() const override { return true; }
  DeviceInfo device() override { return {"none (dry run)", "none", "dry run", 0, 0, 0.0}; }
  double copy_gbs(std::size_t, int) override { return 4000.0; }

  std::vector<PairResult> pair(const PairSpec& spec) override {
    std::vector<PairResult> out;
    for (double hit : spec.hits)
      out.push_back({hit, times(full_options(spec.mac), spec.context, 0.0),
                     times(spec.mac, spec.context, hit)});
    return out;
  }
  StepTimes single(const SingleSpec& spec) override {
    const ForcedHits& f = spec.options.forced;
    return times(spec.options, spec.context, f.enabled ? f.hit_rate : 0.0);
  }
  CompareResult compare(const CompareSpec&) override { return {0.0, 0.0, true}; }
  int ctas_per_sm(const std::string&) override { return -1; }

 private:
  static StepTimes times(const SessionOptions& o, int context, double hit) {
    StepTimes t;
    const double skip = o.mac_enabled ? hit : 0.0;
    t.ms = 1.0 - 0.9 * skip + (o.mac_enabled ? 0.05 : 0.0);
    t.spread = 0.01;
    t.match_ms = o.mac_enabled ? 0.01 : kNotMeasured;
    t.plan_ms = 0.003;
    t.attend_ms = t.ms - 0.02;
    const Problem& p = o.shape;
    t.modeled_bytes =
        static_cast<long long>((1.0 - skip) * 2.0 * p.batch * p.kv_heads * (context + 1.0) *
                               p.head_dim * static_cast<double>(dtype_size(p.kv_dtype)));
    t.skip = skip;
    t.plan = {PlanKind::balanced, 0, 1, 1, 0};
    t.instance = o.mac_enabled ? o.engine.attend : o.engine.full;
    if (t.instance.empty()) t.instance = "auto";
    return t;
  }
};

}  // namespace

std::unique_ptr<Bench> gpu_bench() {
  const GpuStatus& st = gpu_status();
  if (!st.usable) throw Error("no usable GPU: " + st.why_not);
  return std::make_unique<GpuBench>();
}

std::unique_ptr<Bench> dry_bench() {
  return std::make_unique<DryBench>();
}

}  // namespace mactune::cuda::check
