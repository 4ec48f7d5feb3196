// mactune._mactune._testing: what the test suite and the binding benchmark need from C++ that
// is not API. cpu_steps() drives a cpu::Session exactly as a C++ caller would (its own session,
// std::span over the inputs, Session::step and Result::out), so a test can compare the
// bindings' outputs with the C++ session's bit for bit; time_step() times Session::step_into in
// a C++ loop, the baseline of the per-call overhead of Session.step from Python.
#include <chrono>

#include "kernels/cpu/session.h"
#include "python/src/common.h"

namespace mactune::py {

void bind_testing(nb::module_& m) {
  m.def(
      "cpu_steps",
      [](const cpu::SessionOptions& options, const AnyArray& q, const AnyArray& k,
         const AnyArray& v) {
        const Problem& p = options.shape;
        check_f32(q, "q", {kAnyExtent, p.batch, p.q_heads, p.head_dim},
                  "(steps, batch, q_heads, head_dim)");
        const auto S = static_cast<std::int64_t>(q.shape(0));
        check_f32(k, "k", {S, p.batch, p.kv_heads, p.head_dim},
                  "(steps, batch, kv_heads, head_dim)");
        check_f32(v, "v", {S, p.batch, p.kv_heads, p.head_dim},
                  "(steps, batch, kv_heads, head_dim)");
        const std::size_t qn = std::size_t(p.batch) * p.q_heads * p.head_dim;
        const std::size_t kn = std::size_t(p.batch) * p.kv_heads * p.head_dim;
        Owned<float> out = allocate<float>(std::size_t(S) * qn);
        Owned<bool> hit = allocate<bool>(std::size_t(S) * p.batch * p.q_heads);
        {
          nb::gil_scoped_release unlocked;
          cpu::Session s(options);
          std::vector<int> ids;
          for (int b = 0; b < p.batch; ++b) ids.push_back(s.add_request());
          const float* qs = static_cast<const float*>(q.data());
          const float* ks = static_cast<const float*>(k.data());
          const float* vs = static_cast<const float*>(v.data());
          for (std::int64_t t = 0; t < S; ++t) {
            const auto u = std::size_t(t);
            const cpu::Session::Result& r =
                s.step(ids, {qs + u * qn, qn}, {ks + u * kn, kn}, {vs + u * kn, kn});
            std::copy(r.out.begin(), r.out.end(), out.data + u * qn);
            for (std::size_t i = 0; i < r.decisions.size(); ++i)
              hit.data[u * r.decisions.size() + i] = r.decisions[i].hit;
          }
        }
        const auto S_ = std::size_t(S), B = std::size_t(p.batch), H = std::size_t(p.q_heads);
        return nb::make_tuple(numpy_array(std::move(out), {S_, B, H, std::size_t(p.head_dim)}),
                              numpy_array(std::move(hit), {S_, B, H}));
      },
      nb::arg("options"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
      "Runs a fresh C++ cpu::Session with options.shape.batch requests over S steps: q [S, "
      "batch, q_heads, D], k, v [S, batch, kv_heads, D]. Returns (out [S, batch, q_heads, D], "
      "hit [S, batch, q_heads]).");

  m.def(
      "time_step",
      [](cpu::Session& s, std::vector<int> ids, const AnyArray& q, const AnyArray& k,
         const AnyArray& v, int iters) {
        const Problem& p = s.options().shape;
        const auto n = static_cast<std::int64_t>(ids.size());
        check_f32(q, "q", {n, p.q_heads, p.head_dim}, "(requests, q_heads, head_dim)");
        check_f32(k, "k", {n, p.kv_heads, p.head_dim}, "(requests, kv_heads, head_dim)");
        check_f32(v, "v", {n, p.kv_heads, p.head_dim}, "(requests, kv_heads, head_dim)");
        std::vector<float> out(q.size());
        std::vector<double> seconds;
        nb::gil_scoped_release unlocked;
        for (int i = 0; i < iters; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          s.step_into(ids, f32_span(q), f32_span(k), f32_span(v), out, /*advance=*/false);
          seconds.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return seconds;
      },
      nb::arg("session"), nb::arg("requests"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
      nb::arg("iters"),
      "Seconds of each of `iters` calls of Session::step_into(advance=false) from C++.");
}

}  // namespace mactune::py
