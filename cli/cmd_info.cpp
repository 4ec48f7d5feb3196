// `mactune info`: the build and the devices this machine offers.
#include <iostream>

#include "cli/registry.h"
#include "kernels/device.h"
#include "mactune/build_info.h"

namespace mactune::cli {
namespace {

void print_device(const DeviceFingerprint& d) {
  std::cout << "  " << d.backend << ": " << d.name << " (" << d.compute_units << " units, "
            << d.memory_mib / 1024 << " GiB, " << d.arch;
  if (!d.runtime.empty()) std::cout << ", " << d.runtime;
  std::cout << ")\n    fingerprint " << d.digest() << '\n';
}

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build and the devices this machine offers");
  cmd->callback([] {
    std::cout << "mactune " << build::version << " (" << build::git_revision << ", "
              << build::build_type << ", " << build::compiler
              << (build::have_cuda ? ", CUDA" : ", no CUDA") << ")\n";
    std::cout << "devices:\n";
    print_device(cpu_fingerprint());
  });
}

const bool registered = register_command("info", add_info);

}  // namespace
}  // namespace mactune::cli
