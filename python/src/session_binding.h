// The decode-session API both engines share (cpu::Session, cuda::Session: the DecodeSession
// contract of kernels/session.h), bound once as a template: requests, step, prefill, ring state,
// forced hits, engine changes. Inputs are seen in place (no copies); the GIL is released while the
// engine runs, so other Python threads (a serving loop's scheduler) go on meanwhile.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "kernels/forced.h"
#include "kernels/problem.h"
#include "kernels/session.h"
#include "kernels/stats.h"
#include "python/src/common.h"

namespace mactune::py {

// What a step (n requests) or a prefill (T positions of one request) returns: the outputs and
// every per-head decision and per-group mode, rows = n or T.
struct StepResult {
  nb::object out;                       // float32 [rows, q_heads, head_dim] (or the caller's `out`)
  std::vector<HeadDecision> decisions;  // [rows, q_heads]
  std::vector<GroupInfo> groups;        // [rows, kv_heads]
  StepStats stats;
  std::size_t rows = 0, q_heads = 0, kv_heads = 0;
};

// One ring slot as stored: pos = -1 when it holds nothing yet.
struct RingEntry {
  int pos = -1;
  nb::object q, o;  // float32 [head_dim]: pre-RoPE query and summary o, as stored (widened)
  float lse = 0.0f;
};

void bind_step_result(nb::module_& m);  // StepResult and RingEntry (bind_cpu.cpp)
void add_stats(StepStats& total, const StepStats& s);

// requests: an int (one request; q may then drop its leading dimension) or a sequence of ints.
inline bool parse_requests(nb::handle requests, std::vector<int>& ids) {
  ids.clear();
  if (PyLong_Check(requests.ptr())) {
    ids.push_back(nb::cast<int>(requests));
    return true;
  }
  try {
    ids = nb::cast<std::vector<int>>(requests);
  } catch (const nb::cast_error&) {
    input_error("requests: expected an int or a sequence of ints, got ",
                nb::cast<std::string>(nb::str(requests.type().attr("__name__"))));
  }
  return false;
}

// One step of `requests` on host arrays (see the docstring of Session.step below).
template <DecodeSession S>
StepResult host_step(S& s, nb::handle requests, nb::handle q_arg, nb::handle k_arg,
                     nb::handle v_arg, nb::handle out, bool advance, int device_type) {
  const AnyArray q = array_arg(q_arg, "q"), k = array_arg(k_arg, "k"), v = array_arg(v_arg, "v");
  const Problem& p = s.options().shape;
  std::vector<int> ids;
  const bool single = parse_requests(requests, ids);
  const auto n = static_cast<std::int64_t>(ids.size());
  const bool squeeze = single && q.ndim() == 2;
  const std::int64_t H = p.q_heads, Hk = p.kv_heads, D = p.head_dim;
  if (squeeze) {
    check_f32(q, "q", {H, D}, "(q_heads, head_dim)", device_type);
    check_f32(k, "k", {Hk, D}, "(kv_heads, head_dim)", device_type);
    check_f32(v, "v", {Hk, D}, "(kv_heads, head_dim)", device_type);
  } else {
    check_f32(q, "q", {n, H, D}, "(requests, q_heads, head_dim)", device_type);
    check_f32(k, "k", {n, Hk, D}, "(requests, kv_heads, head_dim)", device_type);
    check_f32(v, "v", {n, Hk, D}, "(requests, kv_heads, head_dim)", device_type);
  }
  check_finite(q, "q");
  check_finite(k, "k");
  check_finite(v, "v");
  StepResult r;
  std::span<float> dst;
  if (out.is_none()) {
    Owned<float> buf = allocate<float>(std::size_t(n * H * D));
    dst = {buf.data, std::size_t(n * H * D)};
    r.out = squeeze ? nb::cast(numpy_array(std::move(buf), {std::size_t(H), std::size_t(D)}))
                    : nb::cast(numpy_array(std::move(buf),
                                           {std::size_t(n), std::size_t(H), std::size_t(D)}));
  } else {
    AnyArrayMut o;
    if (!nb::try_cast(out, o))
      input_error("out: expected a writable float32 array, got ",
                  nb::cast<std::string>(nb::str(out.type().attr("__name__"))));
    if (squeeze)
      check_f32(read_only(o), "out", {H, D}, "(q_heads, head_dim)", device_type);
    else
      check_f32(read_only(o), "out", {n, H, D}, "(requests, q_heads, head_dim)", device_type);
    dst = f32_span(o);
    r.out = nb::borrow(out);
  }
  r.rows = std::size_t(n);
  r.q_heads = std::size_t(H);
  r.kv_heads = std::size_t(Hk);
  {
    nb::gil_scoped_release unlocked;
    const auto& res = s.step_into(ids, f32_span(q), f32_span(k), f32_span(v), dst, advance);
    r.decisions = res.decisions;
    r.groups = res.groups;
    r.stats = res.stats;
  }
  return r;
}

inline constexpr const char* kStepDoc =
    "One decode step for `requests` (an id, or a sequence of distinct ids): pre-RoPE q "
    "[n, q_heads, head_dim], k and v [n, kv_heads, head_dim], float32, C-contiguous (a single "
    "id may drop the leading dimension). Appends the KV at each request's position, applies "
    "RoPE, matches, attends and writes the ring entries. The outputs go to `out` when given "
    "(no allocation), else to a new array. advance=False does the same work but leaves every "
    "position where it was (timing the same step again).";

// Whether the engine also steps on device buffers (cuda::Session::step_device): its binding
// then registers a `step` of its own that takes device arrays too (bind_cuda.cpp).
template <class S>
inline constexpr bool kDeviceStep = requires(S& x) {
  x.step_device(std::span<const int>{}, static_cast<const float*>(nullptr),
                static_cast<const float*>(nullptr), static_cast<const float*>(nullptr),
                static_cast<float*>(nullptr), static_cast<void*>(nullptr), true);
};

// Binds the shared API (the session contract, kernels/session.h) on `c`. `device_type`: where
// the engine reads its arrays from.
template <DecodeSession S>
void bind_session_api(nb::class_<S>& c, int device_type) {
  c.def("add_request", &S::add_request,
        "Takes the lowest free request slot and returns its id (InputError when all are taken).");
  c.def("release_request", &S::release_request, nb::arg("id"),
        "Frees the request's KV pages and ring for other requests.");
  c.def("length", &S::length, nb::arg("id"), "Tokens in the request's KV = its next position m.");
  c.def_prop_ro("instance_name", &S::instance_name, "The kernel path a step runs.");
  c.def_prop_ro(
      "options", [](const S& s) { return s.options(); }, "The session's options (a copy).");

  if constexpr (!kDeviceStep<S>) {
    c.def(
        "step",
        [device_type](S& s, nb::handle requests, nb::handle q, nb::handle k, nb::handle v,
                      nb::handle out, bool advance) {
          return host_step(s, requests, q, k, v, out, advance, device_type);
        },
        nb::arg("requests"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::kw_only(),
        nb::arg("out").none() = nb::none(), nb::arg("advance") = true, kStepDoc);
  }

  c.def(
      "prefill",
      [device_type](S& s, int id, nb::handle q_arg, nb::handle k_arg, nb::handle v_arg,
                    nb::handle out) {
        const AnyArray q = array_arg(q_arg, "q"), k = array_arg(k_arg, "k"),
                       v = array_arg(v_arg, "v");
        const Problem& p = s.options().shape;
        const std::int64_t H = p.q_heads, Hk = p.kv_heads, D = p.head_dim;
        check_f32(q, "q", {kAnyExtent, H, D}, "(positions, q_heads, head_dim)", device_type);
        const auto T = static_cast<std::int64_t>(q.shape(0));
        check_f32(k, "k", {T, Hk, D}, "(positions, kv_heads, head_dim)", device_type);
        check_f32(v, "v", {T, Hk, D}, "(positions, kv_heads, head_dim)", device_type);
        check_finite(q, "q");
        check_finite(k, "k");
        check_finite(v, "v");
        StepResult r;
        std::span<float> dst;
        const std::size_t count = std::size_t(T * H * D);
        if (out.is_none()) {
          Owned<float> buf = allocate<float>(count);
          dst = {buf.data, count};
          r.out = nb::cast(
              numpy_array(std::move(buf), {std::size_t(T), std::size_t(H), std::size_t(D)}));
        } else {
          AnyArrayMut o;
          if (!nb::try_cast(out, o)) input_error("out: expected a writable float32 array");
          check_f32(read_only(o), "out", {T, H, D}, "(positions, q_heads, head_dim)", device_type);
          dst = f32_span(o);
          r.out = nb::borrow(out);
        }
        r.rows = std::size_t(T);
        r.q_heads = std::size_t(H);
        r.kv_heads = std::size_t(Hk);
        const std::span<const float> qs = f32_span(q), ks = f32_span(k), vs = f32_span(v);
        const std::size_t qn = std::size_t(H * D), kn = std::size_t(Hk * D);
        {
          nb::gil_scoped_release unlocked;
          r.decisions.reserve(std::size_t(T * H));
          r.groups.reserve(std::size_t(T * Hk));
          for (std::int64_t t = 0; t < T; ++t) {
            const auto u = std::size_t(t);
            const auto& res = s.step_into({&id, 1}, qs.subspan(u * qn, qn), ks.subspan(u * kn, kn),
                                          vs.subspan(u * kn, kn), dst.subspan(u * qn, qn), true);
            r.decisions.insert(r.decisions.end(), res.decisions.begin(), res.decisions.end());
            r.groups.insert(r.groups.end(), res.groups.begin(), res.groups.end());
            add_stats(r.stats, res.stats);
          }
        }
        return r;
      },
      nb::arg("id"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::kw_only(),
      nb::arg("out").none() = nb::none(),
      "Feeds positions length(id) .. length(id) + T - 1 of one request, one decode step each, "
      "in one call: pre-RoPE q [T, q_heads, head_dim], k and v [T, kv_heads, head_dim]. Every "
      "position matches, attends and writes its ring entry exactly as step() would (MAC's ring "
      "needs each position's own query state), so a teacher-forced sequence, or a prompt, "
      "goes through layer by layer. Returns the T outputs with every decision; the stats are "
      "the totals.");

  c.def("prefill_synthetic", &S::prefill_synthetic, nb::arg("id"), nb::arg("length"),
        nb::arg("seed") = 1,
        "Benchmark setup without attention: `length` tokens of random KV (never zeros) and "
        "valid ring entries for the last K positions. Deterministic in seed.");
  c.def("set_forced", &S::set_forced, nb::arg("forced"),
        "Forced-hit mode between steps (the step counter of its draws is kept).");

  c.def(
      "ring_entry",
      [](const S& s, int id, int head, int pos) {
        const auto e = s.ring_entry(id, head, pos);
        RingEntry r;
        r.pos = e.pos;
        r.q = nb::cast(numpy_copy(e.q.data(), {e.q.size()}));
        r.o = nb::cast(numpy_copy(e.o.data(), {e.o.size()}));
        r.lse = e.lse;
        return r;
      },
      nb::arg("id"), nb::arg("head"), nb::arg("pos"),
      "The ring slot of `pos` for (request, query head); its .pos says whether it holds `pos` "
      "(the slot may hold an older position, or nothing: -1).");
  c.def(
      "ring",
      [](const S& s, int id, int head) {
        const int K = s.options().mac.ring_capacity;
        const int D = s.options().shape.head_dim;
        const int m = s.length(id);
        Owned<std::int32_t> pos = allocate<std::int32_t>(std::size_t(K));
        Owned<float> q = allocate<float>(std::size_t(K) * D),
                     o = allocate<float>(std::size_t(K) * D);
        Owned<float> lse = allocate<float>(std::size_t(K));
        for (int slot = 0; slot < K; ++slot) {
          // The slot's newest possible position below m (slot = position mod K).
          const int newest = m - 1 - ((m - 1 - slot) % K + K) % K;
          const auto e = s.ring_entry(id, head, newest >= 0 ? newest : slot);
          pos.data[slot] = e.pos;
          std::copy(e.q.begin(), e.q.end(), q.data + std::size_t(slot) * D);
          std::copy(e.o.begin(), e.o.end(), o.data + std::size_t(slot) * D);
          lse.data[slot] = e.lse;
        }
        nb::dict d;
        d["pos"] = numpy_array(std::move(pos), {std::size_t(K)});
        d["q"] = numpy_array(std::move(q), {std::size_t(K), std::size_t(D)});
        d["o"] = numpy_array(std::move(o), {std::size_t(K), std::size_t(D)});
        d["lse"] = numpy_array(std::move(lse), {std::size_t(K)});
        return d;
      },
      nb::arg("id"), nb::arg("head"),
      "The whole ring of (request, query head) by slot: {'pos' [K] int32 (-1: empty), 'q' "
      "[K, D], 'o' [K, D], 'lse' [K]} as stored.");
}

}  // namespace mactune::py
