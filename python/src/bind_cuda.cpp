// mactune.cuda: the CUDA decode engine (kernels/cuda/session.h), compiled in a CUDA build. Its
// API is the CPU session's. The C++ session takes its per-step inputs from host memory and
// stages them through its own pinned buffer in one copy with the step's metadata (that is what
// lets a whole step replay as one CUDA graph), so the arrays passed here are host arrays —
// numpy, or torch CPU tensors (ideally pinned) — seen in place; a tensor on the GPU is refused
// with a message saying so, never copied behind the caller's back.
#include "kernels/cuda/device.h"
#include "kernels/cuda/session.h"
#include "python/src/session_binding.h"

namespace mactune::py {

void bind_cuda(nb::module_& m) {
  {
    nb::class_<cuda::EngineConfig> c(m, "EngineConfig",
                                     "CUDA instances and launch parameters of a session.");
    Fields<cuda::EngineConfig>(c)
        .add("attend", &cuda::EngineConfig::attend, "attend instance (MAC); '' = first that fits")
        .add("full", &cuda::EngineConfig::full, "full-attention instance")
        .add("match", &cuda::EngineConfig::match, "match instance")
        .add("merge", &cuda::EngineConfig::merge, "merge instance")
        .add("min_chunk", &cuda::EngineConfig::min_chunk, "smallest KV chunk of a work item")
        .add("ctas_per_sm", &cuda::EngineConfig::ctas_per_sm,
             "split-KV budget per SM; 0 = occupancy")
        .add("match_candidates", &cuda::EngineConfig::match_candidates,
             "ring candidates per match CTA; 0 = launch math")
        .add("graph", &cuda::EngineConfig::graph, "run each step as a CUDA graph")
        .add("time_phases", &cuda::EngineConfig::time_phases, "events between the kernels")
        .add("poison", &cuda::EngineConfig::poison, "NaN-fill outputs before each step (tests)")
        .add("device", &cuda::EngineConfig::device, "CUDA device index")
        .finish("EngineConfig");
  }
  {
    nb::class_<cuda::SessionOptions> c(m, "SessionOptions", "Options of a CUDA decode session.");
    Fields<cuda::SessionOptions>(c)
        .add("shape", &cuda::SessionOptions::shape, "Problem; shape.batch = request slots")
        .add("mac", &cuda::SessionOptions::mac, "MacParams")
        .add("mac_enabled", &cuda::SessionOptions::mac_enabled, "False: full attention")
        .add("rope_theta", &cuda::SessionOptions::rope_theta, "RoPE base (rotate-half)")
        .add("forced", &cuda::SessionOptions::forced, "ForcedHits (benchmark mode)")
        .add("engine", &cuda::SessionOptions::engine, "EngineConfig")
        .add("max_context", &cuda::SessionOptions::max_context, "KV capacity per request")
        .finish("SessionOptions");
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
