// libFuzzer target: the safetensors reader and the decode-trace checks on arbitrary bytes.
// Any input must end in a parsed file or a mactune::InputError: never a crash, a hang, an
// out-of-bounds read (ASan) or undefined behaviour (UBSan). Accepted files are read in full,
// so every validated byte range is exercised too.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/error.h"
#include "replay/safetensors.h"
#include "replay/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mactune;
  using namespace mactune::replay;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const Safetensors file = Safetensors::from_memory(bytes, "fuzz");
    for (const auto& [name, info] : file.tensors()) {
      const std::vector<float> v = file.read_f32(name);
      if (v.size() != info.numel()) __builtin_trap();  // the reader lied about the shape
    }
    // The same bytes as a decode trace (theta given, so metadata may lack it).
    const DecodeTrace trace = DecodeTrace::from_file(file, 10000.0);
    for (int layer : trace.layers()) {
      const TraceLayer l = trace.load_layer(layer);
      if (l.q_pre.size() != std::size_t(l.steps) * l.q_heads * l.head_dim) __builtin_trap();
    }
  } catch (const InputError&) {
    // Refused with a message: the expected outcome for most inputs.
  }
  return 0;
}
