// `mactune info`: the build and the devices this machine offers. `mactune info --backend`
// prints only the backend a spec with `backend: auto` tunes here ("cuda" or "cpu"), for scripts.
#include <iostream>
#include <string>

#include "cli/registry.h"
#include "kernels/device.h"
#include "mactune/build_info.h"
#if MACTUNE_CLI_CUDA
#include "kernels/cuda/device.h"
#endif

namespace mactune::cli {
namespace {

void print_device(const DeviceFingerprint& d) {
  std::cout << "  " << d.backend << ": " << d.name << " (" << d.compute_units << " units, "
            << d.memory_mib / 1024 << " GiB, " << d.arch;
  if (!d.runtime.empty()) std::cout << ", " << d.runtime;
  std::cout << ")\n    fingerprint " << d.digest() << '\n';
}

// Whether the CUDA backend can run here; `why` gets one line when not.
bool gpu_usable(std::string& why) {
#if MACTUNE_CLI_CUDA
  const cuda::GpuStatus& g = cuda::gpu_status();
  why = g.why_not;
  return g.usable;
#else
  why = "this build has no CUDA backend";
  return false;
#endif
}

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build and the devices this machine offers");
  static bool backend_only = false;
  cmd->add_flag("--backend", backend_only,
                "Print only the backend `backend: auto` tunes on here: cuda or cpu");
  cmd->callback([] {
    std::string why;
    const bool gpu = gpu_usable(why);
    if (backend_only) {
      std::cout << (gpu ? Backend::cuda : Backend::cpu) << '\n';
      return;
    }
    std::cout << "mactune " << build::version << " (" << build::git_revision << ", "
              << build::build_type << ", " << build::compiler
              << (build::have_cuda ? ", CUDA" : ", no CUDA") << ")\n";
    std::cout << "devices:\n";
#if MACTUNE_CLI_CUDA
    if (gpu)
      for (int d = 0; d < cuda::gpu_status().count; ++d) print_device(cuda::device_fingerprint(d));
#endif
    if (!gpu) std::cout << "  cuda: not usable (" << why << ")\n";
    print_device(cpu_fingerprint());
    std::cout << "    cpu paths:";
    for (const cpu::Isa i : cpu::supported_isas()) std::cout << ' ' << cpu::isa_name(i);
    for (const cpu::Isa i : cpu::kAllIsas)
      if (cpu::cpu_has(i) && !cpu::isa_supported(i))
        std::cout << " (" << cpu::isa_unsupported_reason(i) << ')';
    std::cout << '\n';
  });
}

const bool registered_info = register_command("info", add_info);

}  // namespace
}  // namespace mactune::cli
