// mactune::cuda::Session: one decode step — staging, the five launches (or their graph),
// results and statistics.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cuda/detail/session_impl.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"
#include "kernels/error.h"

namespace mactune::cuda {

void Session::Impl::record(cudaEvent_t e, bool capturing) const {
  if (capturing)
    MACTUNE_CUDA_CHECK(cudaEventRecordWithFlags(e, stream, cudaEventRecordExternal));
  else
    MACTUNE_CUDA_CHECK(cudaEventRecord(e, stream));
}

void Session::Impl::start(std::span<const int> requests, std::span<const float> q,
                          std::span<const float> k, std::span<const float> v, bool advance,
                          const cudaStream_t* producer) {
  MACTUNE_REQUIRE(!pending.active, "step_async: the previous step was not waited for");
  const int n = static_cast<int>(requests.size());
  MACTUNE_REQUIRE(n >= 1 && n <= slots, "a step takes 1 to ", slots, " requests, got ", n);
  const std::size_t D = static_cast<std::size_t>(head_dim);
  MACTUNE_REQUIRE(q.size() == static_cast<std::size_t>(n) * q_heads * D, "q has ", q.size(),
                  " values, expected ", static_cast<std::size_t>(n) * q_heads * D);
  MACTUNE_REQUIRE(k.size() == static_cast<std::size_t>(n) * kv_heads * D && v.size() == k.size(),
                  "k and v must hold n x kv_heads x head_dim values");
  std::vector<char> seen(static_cast<std::size_t>(slots), 0);
  pending.ids.assign(requests.begin(), requests.end());
  pending.positions.resize(static_cast<std::size_t>(n));
  const detail::InLayout il = detail::in_layout(n, q_heads, kv_heads, head_dim);
  char* host = in_host.get<char>();
  StepRow* rows = reinterpret_cast<StepRow*>(host + il.rows);
  for (int b = 0; b < n; ++b) {
    const int id = requests[static_cast<std::size_t>(b)];
    check_id(id);
    MACTUNE_REQUIRE(!seen[static_cast<std::size_t>(id)], "request ", id,
                    " appears twice in one step");
    seen[static_cast<std::size_t>(id)] = 1;
    const int m = lengths[static_cast<std::size_t>(id)];
    MACTUNE_REQUIRE(m < opt.max_context, "request ", id, " is at max_context = ", opt.max_context,
                    " tokens");
    rows[b] = StepRow{id, m};
    pending.positions[static_cast<std::size_t>(b)] = m;
  }
  reinterpret_cast<StepHeader*>(host + il.header)->step = steps;
  if (producer == nullptr) {
    std::memcpy(host + il.q, q.data(), q.size_bytes());
    std::memcpy(host + il.k, k.data(), k.size_bytes());
    std::memcpy(host + il.v, v.data(), v.size_bytes());
    pending.dev_q = pending.dev_k = pending.dev_v = nullptr;
    pending.dev_out = nullptr;
  } else {  // device inputs: read in place, after whatever the caller's stream queued first
    pending.dev_q = q.data();
    pending.dev_k = k.data();
    pending.dev_v = v.data();
    MACTUNE_CUDA_CHECK(cudaEventRecord(ev_producer, *producer));
    MACTUNE_CUDA_CHECK(cudaStreamWaitEvent(stream, ev_producer, 0));
  }
  if (advance) ++steps;
  pending.advance = advance;
  PhaseScope whole(opt.phases, Phase::step, mac() ? attend->name : full->name);
  if (!opt.engine.graph || producer != nullptr) {
    enqueue(n, false);
  } else {
    auto it = graphs.find(n);
    if (it == graphs.end()) it = graphs.emplace(n, capture(n)).first;
    MACTUNE_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
  }
  pending.active = true;  // only once everything is enqueued: a failed launch leaves no step
}

// The whole step for n rows as an instantiated graph (copies, memsets, events, kernels).
cudaGraphExec_t Session::Impl::capture(int n) {
  MACTUNE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue(n, true);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);
    if (broken != nullptr) cudaGraphDestroy(broken);
    throw;
  }
  cudaGraph_t graph = nullptr;
  MACTUNE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  MACTUNE_CUDA_CHECK(e);
  return exec;
}

void Session::Impl::enqueue(int n, bool capturing) {
  const detail::InLayout il = detail::in_layout(n, q_heads, kv_heads, head_dim);
  const detail::OutLayout ol = detail::out_layout(n, q_heads, head_dim);
  char* din = in_block.get<char>();
  char* dout = out_block.get<char>();
  const StepHeader* header = reinterpret_cast<const StepHeader*>(din + il.header);
  const StepRow* rows = reinterpret_cast<const StepRow*>(din + il.rows);
  const bool device_io = pending.dev_q != nullptr;  // step_device: the caller's buffers
  float* out =
      pending.dev_out != nullptr ? pending.dev_out : reinterpret_cast<float*>(dout + ol.out);
  HeadDecision* decisions = reinterpret_cast<HeadDecision*>(dout + ol.decisions);
  std::int32_t* guard = reinterpret_cast<std::int32_t*>(dout + ol.guard);
  detail::StepScalars* scalars = reinterpret_cast<detail::StepScalars*>(dout + ol.scalars);
  const std::int32_t step_capacity = attend_capacity(n * kv_heads, budget, opt.engine.min_chunk);
  PhaseSink* sink = capturing ? nullptr : opt.phases;  // a graph launch is one step span
  const bool timed = opt.engine.time_phases;

  // The header and rows always; q, k, v unless the kernels read the caller's device buffers.
  MACTUNE_CUDA_CHECK(cudaMemcpyAsync(din, in_host.get(), device_io ? il.q : il.bytes,
                                     cudaMemcpyHostToDevice, stream));
  if (opt.engine.poison) {  // NaN everywhere a kernel must write before anything reads it
    MACTUNE_CUDA_CHECK(cudaMemsetAsync(out, 0xff, sizeof(float) * n * q_heads * head_dim, stream));
    MACTUNE_CUDA_CHECK(cudaMemsetAsync(partial_o.get(), 0xff, partial_o.bytes(), stream));
    MACTUNE_CUDA_CHECK(cudaMemsetAsync(partial_lse.get(), 0xff, partial_lse.bytes(), stream));
  }
  MACTUNE_CUDA_CHECK(cudaMemsetAsync(guard, 0, ol.bytes - ol.guard, stream));  // guard + scalars
  record(ev_start, capturing);
  int phase = 0;
  auto mark = [&] {
    if (timed) record(ev_phase[static_cast<std::size_t>(phase++)], capturing);
  };

  {
    PhaseScope ps(sink, Phase::rope, "prepare");
    PrepareParams p;
    p.rows = rows;
    p.q_in = device_io ? pending.dev_q : reinterpret_cast<const float*>(din + il.q);
    p.k_in = device_io ? pending.dev_k : reinterpret_cast<const float*>(din + il.k);
    p.v_in = device_io ? pending.dev_v : reinterpret_cast<const float*>(din + il.v);
    p.q_ring_out = q_ring.get();
    p.q_rot_out = q_rot.get<float>();
    p.kv = kv_cache();
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.kv_dtype = opt.shape.kv_dtype;
    p.rope_theta = opt.rope_theta;
    MACTUNE_CUDA_CHECK(launch_prepare(p, n, stream));
  }
  mark();
  if (mac() && pruned) {
    PhaseScope ps(sink, Phase::match, "match_pruned");
    PrunedMatchParams p;
    p.ring = ring();
    p.sketch = PrunedSketch{sk_codes.get<const std::uint8_t>(), sk_scale.get<const float>(),
                            sk_c2.get<const float>(), sk_err.get<const float>()};
    p.rows = rows;
    p.q_ring_in = q_ring.get();
    p.best = match_best.get<MatchPartial>();
    p.n = n;
    p.q_heads = q_heads;
    p.threshold = static_cast<float>(match_threshold(head_dim, opt.mac.tau));
    p.min_context = opt.mac.min_context;
    MACTUNE_CUDA_CHECK(launch_match_pruned(p, head_dim, opt.shape.kv_dtype, stream));
  } else if (mac()) {
    PhaseScope ps(sink, Phase::match, match->name);
    MatchParams p;
    p.ring = ring();
    p.rows = rows;
    p.q_ring_in = q_ring.get();
    p.partials = match_partials.get<MatchPartial>();
    p.counters = counters.get<std::uint32_t>();
    p.best = match_best.get<MatchPartial>();
    p.n = n;
    p.q_heads = q_heads;
    p.candidates_per_cta =
        opt.engine.match_candidates > 0
            ? opt.engine.match_candidates
            : match_candidates_per_cta(match->config, static_cast<std::int64_t>(n) * q_heads,
                                       opt.mac.ring_capacity,
                                       static_cast<std::int64_t>(match_ctas_per_sm) * sms);
    p.tiles = match_tiles(opt.mac.ring_capacity, p.candidates_per_cta);
    MACTUNE_CHECK(p.tiles <= max_match_tiles, "match tiles ", p.tiles, " > ", max_match_tiles);
    p.threshold = static_cast<float>(match_threshold(head_dim, opt.mac.tau));
    p.pick = opt.mac.pick;
    p.min_context = opt.mac.min_context;
    MACTUNE_CUDA_CHECK(match->launch(p, stream));
  }
  mark();
  {
    PhaseScope ps(sink, Phase::plan, "plan");
    PlanParams p;
    p.header = header;
    p.rows = rows;
    if (mac()) {
      p.match_best = match_best.get<MatchPartial>();
      p.decisions = decisions;
      p.ring = ring();
      p.threshold = static_cast<float>(match_threshold(head_dim, opt.mac.tau));
      p.pick = opt.mac.pick;
      p.min_context = opt.mac.min_context;
      p.forced = opt.forced;
      p.group_hits = opt.mac.group_hits;
    }
    p.spans = spans.get<GroupSpan>();
    p.items = items.get<WorkItem>();
    p.merge_plan = merge_plan.get<GroupItems>();
    p.dispatch = dispatch.get<DispatchEntry>();
    p.choice = &scalars->choice;
    p.error = &scalars->error;
    p.work_counter = work_counter.get<std::uint32_t>();
    p.n = n;
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.group = group;
    p.band = opt.mac.band;
    p.limits = attend_limits(budget, opt.engine.min_chunk);
    p.capacity = step_capacity;
    MACTUNE_CUDA_CHECK(launch_plan(p, stream));
  }
  mark();
  {
    PhaseScope ps(sink, Phase::attend, mac() ? attend->name : full->name);
    AttendParams p;
    p.kv = kv_cache();
    p.rows = rows;
    p.q_rot = q_rot.get<float>();
    p.decisions = mac() ? decisions : nullptr;
    p.items = items.get<WorkItem>();
    p.dispatch = dispatch.get<DispatchEntry>();
    p.choice = &scalars->choice;
    p.work_counter = work_counter.get<std::uint32_t>();
    p.partial_o = partial_o.get<float>();
    p.partial_lse = partial_lse.get<float>();
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.group = group;
    p.q_scale = static_cast<float>(opt.shape.scale() * 1.4426950408889634);  // * log2(e)
    const int grid = attend_grid(step_capacity, budget);
    MACTUNE_CUDA_CHECK(mac() ? attend->launch(p, grid, stream) : full->launch(p, grid, stream));
  }
  mark();
  {
    PhaseScope ps(sink, Phase::merge, merge->name);
    MergeParams p;
    if (mac()) p.ring = ring();
    p.rows = rows;
    p.q_ring_in = q_ring.get();
    p.decisions = mac() ? decisions : nullptr;
    p.merge_plan = merge_plan.get<GroupItems>();
    p.partial_o = partial_o.get<float>();
    p.partial_lse = partial_lse.get<float>();
    p.out = out;
    p.guard_fired = guard;
    p.n = n;
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.group = group;
    p.band = opt.mac.band;
    p.rectify = opt.mac.rectify;
    p.subtract_guard = static_cast<float>(opt.mac.subtract_guard);
    MACTUNE_CUDA_CHECK(merge->launch(p, stream));
    if (mac() && pruned) sketch(rows, n);  // the entries the merge just wrote
  }
  mark();
  record(ev_stop, capturing);
  // Results to the host: the outputs too, unless they went to the caller's device buffer.
  const std::size_t from = pending.dev_out != nullptr ? ol.decisions : 0;
  MACTUNE_CUDA_CHECK(cudaMemcpyAsync(out_host.get<char>() + from, dout + from, ol.bytes - from,
                                     cudaMemcpyDeviceToHost, stream));
}

const Session::Result& Session::Impl::finish() {
  MACTUNE_REQUIRE(pending.active, "wait(): no step is in flight");
  pending.active = false;
  MACTUNE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int n = static_cast<int>(pending.ids.size());
  const detail::OutLayout ol = detail::out_layout(n, q_heads, head_dim);
  const char* host = out_host.get<const char>();
  const auto* scalars = reinterpret_cast<const detail::StepScalars*>(host + ol.scalars);
  MACTUNE_CHECK(scalars->error == 0, "the device plan overflowed its ", capacity,
                " work items (a planner bug)");
  plan_last = scalars->choice;
  items_last = plan_last.items;
  chunk_last = plan_last.chunk;
  float ms = 0.0f;
  MACTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_start, ev_stop));
  step_ms = ms;
  phase_ms.clear();
  if (opt.engine.time_phases) {
    const Phase names[] = {Phase::rope, Phase::match, Phase::plan, Phase::attend, Phase::merge};
    cudaEvent_t before = ev_start;
    for (std::size_t i = 0; i < ev_phase.size(); ++i) {
      MACTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, before, ev_phase[i]));
      if (mac() || names[i] != Phase::match) phase_ms.emplace_back(names[i], ms);
      before = ev_phase[i];
    }
  }

  const std::size_t values = static_cast<std::size_t>(n) * q_heads * head_dim;
  const float* out = reinterpret_cast<const float*>(host + ol.out);
  if (pending.dev_out != nullptr) {  // step_device: the outputs stayed on the device
    result.out.clear();
  } else if (pending.into.empty()) {
    result.out.assign(out, out + values);
  } else {  // step_into: straight into the caller's buffer, as the CPU session does
    std::copy(out, out + values, pending.into.begin());
    result.out.clear();
  }
  pending.dev_q = pending.dev_k = pending.dev_v = nullptr;
  pending.dev_out = nullptr;
  result.decisions.assign(static_cast<std::size_t>(n) * q_heads, HeadDecision{});
  if (mac()) {
    const HeadDecision* d = reinterpret_cast<const HeadDecision*>(host + ol.decisions);
    std::copy(d, d + result.decisions.size(), result.decisions.begin());
  }
  result.groups.clear();
  result.stats = StepStats{};
  for (int b = 0; b < n; ++b)
    account_request(opt.shape, opt.mac, pending.positions[static_cast<std::size_t>(b)],
                    &result.decisions[static_cast<std::size_t>(b) * q_heads], result.groups,
                    result.stats, mac());
  if (mac() && opt.mac.rectify == Rectify::subtract) {
    const std::int32_t* g = reinterpret_cast<const std::int32_t*>(host + ol.guard);
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) * q_heads; ++i)
      result.stats.guard_fires += g[i];
  }
  if (pending.advance)
    for (int id : pending.ids) ++lengths[static_cast<std::size_t>(id)];
  return result;
}

const Session::Result& Session::step(std::span<const int> requests, std::span<const float> q,
                                     std::span<const float> k, std::span<const float> v,
                                     bool advance) {
  impl_->pending.into = {};
  impl_->start(requests, q, k, v, advance);
  return impl_->finish();
}

const Session::Result& Session::step_into(std::span<const int> requests, std::span<const float> q,
                                          std::span<const float> k, std::span<const float> v,
                                          std::span<float> out, bool advance) {
  MACTUNE_REQUIRE(out.size() == requests.size() * static_cast<std::size_t>(impl_->q_heads) *
                                    static_cast<std::size_t>(impl_->head_dim),
                  "step_into: out has ", out.size(), " values, expected n x q_heads x head_dim");
  impl_->start(requests, q, k, v, advance);
  impl_->pending.into = out;
  return impl_->finish();
}

const Session::Result& Session::step_device(std::span<const int> requests, const float* q_device,
                                            const float* k_device, const float* v_device,
                                            float* out_device, void* producer_stream,
                                            bool advance) {
  MACTUNE_REQUIRE(
      q_device != nullptr && k_device != nullptr && v_device != nullptr && out_device != nullptr,
      "step_device: a device buffer is null");
  const std::size_t n = requests.size();
  const std::size_t D = static_cast<std::size_t>(impl_->head_dim);
  const std::size_t qn = n * static_cast<std::size_t>(impl_->q_heads) * D;
  const std::size_t kn = n * static_cast<std::size_t>(impl_->kv_heads) * D;
  const cudaStream_t producer = static_cast<cudaStream_t>(producer_stream);
  impl_->pending.into = {};
  impl_->pending.dev_out = out_device;
  try {
    impl_->start(requests, {q_device, qn}, {k_device, kn}, {v_device, kn}, advance, &producer);
  } catch (...) {
    impl_->pending.dev_out = nullptr;  // a refused step leaves no device state behind
    throw;
  }
  return impl_->finish();
}

void Session::step_async(std::span<const int> requests, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, bool advance) {
  impl_->start(requests, q, k, v, advance);
  impl_->pending.into = {};
}

const Session::Result& Session::wait() {
  return impl_->finish();
}

}  // namespace mactune::cuda
