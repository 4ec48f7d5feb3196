// mactune.cuda: the CUDA decode engine (kernels/cuda/session.h), compiled in a CUDA build. Its
// API is the CPU session's, and step() takes either host arrays (numpy, torch CPU tensors:
// staged by the session with the step's metadata in one pinned copy, the path a CUDA graph
// replays) or arrays on the session's GPU (torch CUDA tensors through DLPack), which the
// kernels read in place and write the outputs into (Session::step_device): no copy of q, k, v
// or the outputs either way.
#include "kernels/cuda/device.h"
#include "kernels/cuda/session.h"
#include "python/src/session_binding.h"

namespace mactune::py {
namespace {

const std::string& cuda_step_doc() {
  static const std::string doc =
      std::string(kStepDoc) +
      " Arrays on the session's GPU (torch CUDA tensors) are read in place and the outputs "
      "written into `out` (required then); the step first waits for the work queued on "
      "`stream` (a cudaStream_t as an int, e.g. torch.cuda.current_stream().cuda_stream; 0: the "
      "legacy default stream) and returns when it is complete.";
  return doc;
}

}  // namespace

void bind_cuda(nb::module_& m) {
  {
    nb::class_<cuda::EngineConfig> c(m, "EngineConfig",
                                     "CUDA instances and launch parameters of a session.");
    // The table's instances and launch parameters, then the harness switches (not settings).
    Fields<cuda::EngineConfig>(c, "EngineConfig")
        .table()
        .add("time_phases", &cuda::EngineConfig::time_phases, "events between the kernels")
        .add("poison", &cuda::EngineConfig::poison, "NaN-fill outputs before each step (tests)")
        .add("device", &cuda::EngineConfig::device, "CUDA device index")
        .finish();
  }
  {
    nb::class_<cuda::SessionOptions> c(m, "SessionOptions", "Options of a CUDA decode session.");
    Fields<cuda::SessionOptions>(c, "SessionOptions")
        .add("shape", &cuda::SessionOptions::shape, "Problem; shape.batch = request slots")
        .add("mac", &cuda::SessionOptions::mac, "MacParams")
        .add("mac_enabled", &cuda::SessionOptions::mac_enabled, "False: full attention")
        .add("rope_theta", &cuda::SessionOptions::rope_theta, "RoPE base (rotate-half)")
        .add("forced", &cuda::SessionOptions::forced, "ForcedHits (benchmark mode)")
        .add("engine", &cuda::SessionOptions::engine, "EngineConfig")
        .add("max_context", &cuda::SessionOptions::max_context, "KV capacity per request")
        .finish();
  }
  {
    nb::class_<cuda::Session> c(m, "Session",
                                "A CUDA decode session of one layer (the C++ cuda::Session); "
                                "raises mactune.Error with the reason where no GPU is usable.");
    c.def(
        "__init__",
        [](cuda::Session* self, std::optional<cuda::SessionOptions> options, const nb::kwargs& kw) {
          cuda::SessionOptions o = options ? *options : cuda::SessionOptions{};
          if (kw.size() != 0) {
            if (options) input_error("Session: pass either options= or keyword fields, not both");
            o = nb::cast<cuda::SessionOptions>(nb::type<cuda::SessionOptions>()(**kw));
          }
          nb::gil_scoped_release unlocked;
          new (self) cuda::Session(o);
        },
        nb::arg("options").none() = nb::none(), nb::arg("kwargs"),
        "Session(options) or Session(shape=..., mac=..., ...).");
    bind_session_api(c, nb::device::cpu::value);
    c.def(
        "step",
        [](cuda::Session& s, nb::handle requests, nb::handle q_arg, nb::handle k_arg,
           nb::handle v_arg, nb::handle out, bool advance, std::uintptr_t stream) {
          const AnyArray q = array_arg(q_arg, "q"), k = array_arg(k_arg, "k"),
                         v = array_arg(v_arg, "v");
          if (q.device_type() != nb::device::cuda::value)
            return host_step(s, requests, q_arg, k_arg, v_arg, out, advance,
                             nb::device::cpu::value);
          // Device arrays: all on the session's GPU, the outputs into `out` (required).
          const Problem& p = s.options().shape;
          const int dev = s.options().engine.device;
          std::vector<int> ids;
          const bool single = parse_requests(requests, ids);
          const auto n = static_cast<std::int64_t>(ids.size());
          const std::int64_t H = p.q_heads, Hk = p.kv_heads, D = p.head_dim;
          const bool squeeze = single && q.ndim() == 2;
          const int cuda = nb::device::cuda::value;
          auto check = [&](const AnyArray& a, const char* what, std::int64_t heads) {
            if (squeeze)
              check_f32(a, what, {heads, D}, "(heads, head_dim)", cuda);
            else
              check_f32(a, what, {n, heads, D}, "(requests, heads, head_dim)", cuda);
            if (a.device_id() != dev)
              input_error(what, ": the array is on CUDA device ", a.device_id(),
                          ", the session on device ", dev);
          };
          check(q, "q", H);
          check(k, "k", Hk);
          check(v, "v", Hk);
          AnyArrayMut o;
          if (out.is_none() || !nb::try_cast(out, o))
            input_error(
                "out: device inputs write their outputs into `out`: pass a writable "
                "float32 CUDA array [n, q_heads, head_dim] (e.g. torch.empty_like(q))");
          check(read_only(o), "out", H);
          StepResult r;
          r.out = nb::borrow(out);
          r.rows = std::size_t(n);
          r.q_heads = std::size_t(H);
          r.kv_heads = std::size_t(Hk);
          {
            nb::gil_scoped_release unlocked;
            const auto& res = s.step_device(
                ids, static_cast<const float*>(q.data()), static_cast<const float*>(k.data()),
                static_cast<const float*>(v.data()), static_cast<float*>(o.data()),
                reinterpret_cast<void*>(stream), advance);
            r.decisions = res.decisions;
            r.groups = res.groups;
            r.stats = res.stats;
          }
          return r;
        },
        nb::arg("requests"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::kw_only(),
        nb::arg("out").none() = nb::none(), nb::arg("advance") = true, nb::arg("stream") = 0,
        cuda_step_doc().c_str());
    c.def("set_engine", &cuda::Session::set_engine, nb::arg("engine"),
          "New instances / launch parameters between steps (captured graphs are dropped).");
    c.def("last_step_ms", &cuda::Session::last_step_ms,
          "Device time of the last step's kernels (CUDA events).");
    c.def_prop_ro("instance_names", &cuda::Session::instance_names,
                  "Every instance a step runs, in launch order.");
  }
  m.def(
      "gpu_status",
      [] {
        const cuda::GpuStatus& g = cuda::gpu_status();
        return g.usable ? std::string() : g.why_not;
      },
      "'' when a GPU is usable, else the reason in one line (no driver, no device, ...).");
  m.def("device_fingerprint", &cuda::device_fingerprint, nb::arg("device") = 0,
        "The fingerprint a dispatch table tuned on this GPU carries.");
  m.def("instances", &cuda::instances, "Every CUDA instance this binary holds.");
}

}  // namespace mactune::py
