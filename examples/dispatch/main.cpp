// dispatch_example: what a serving engine does with a mactune dispatch table at run time.
// It loads a table (validated against this machine and the instances this build has, known by
// their descriptions: the example links mactune::dispatch and no kernel code; a bad table is
// refused with one warning and the built-in fallback answers), then asks, for a few decode
// shapes, which kernel to launch and whether MAC-Attention pays off.
//
//   dispatch_example                 the sample table this example ships (made on another
//                                    machine, so its device check is skipped)
//   dispatch_example TABLE.json      a table of this machine (`mactune emit`)
//   dispatch_example TABLE.json --any-device
#include <cstdio>
#include <cstring>
#include <string>

#include "dispatcher/dispatch.h"

namespace dispatch = mactune::dispatch;

int main(int argc, char** argv) {
  std::string path;
  bool any_device = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--any-device") == 0)
      any_device = true;
    else if (argv[i][0] == '-' || !path.empty()) {
      std::fprintf(stderr, "usage: %s [TABLE.json] [--any-device]\n", argv[0]);
      return 2;
    } else {
      path = argv[i];
    }
  }
  if (path.empty()) {
    path = MACTUNE_EXAMPLE_SAMPLE_TABLE;
    any_device = true;
    std::printf(
        "no table given: reading the sample table (made on another machine, device check "
        "skipped)\n");
  }

  dispatch::LoadOptions options;  // this CPU, the instances this build describes
  options.check_device = !any_device;
  const dispatch::Dispatcher dispatcher = dispatch::Dispatcher::load(path, options);
  if (const dispatch::DispatchTable* t = dispatcher.table()) {
    const std::string backend(mactune::name_of(t->device.backend));  // an enum: cpu or cuda
    std::printf("table %s: %zu entries for %s '%s' (fingerprint %s), generated %s by mactune %s\n",
                path.c_str(), t->entries.size(), backend.c_str(), t->device.name.c_str(),
                t->device.fingerprint.c_str(), t->generated.time.c_str(),
                t->generated.version.c_str());
  } else {
    std::printf("table %s: refused, every choice below is the fallback\n", path.c_str());
  }

  // Llama-3.1-8B's attention (32 query heads, 8 KV heads, head_dim 128, bf16 KV, 16-token
  // pages) at a few batch sizes, contexts and expected hit rates; then a shape no table has.
  mactune::Problem llama;
  llama.q_heads = 32;
  llama.kv_heads = 8;
  llama.head_dim = 128;
  llama.kv_dtype = mactune::DType::bf16;
  llama.page_size = 16;
  for (int batch : {1, 8, 32}) {
    for (long long context : {8192LL, 32768LL, 131072LL}) {
      for (double hit_rate : {0.5, 0.9}) {
        mactune::Problem p = llama;
        p.batch = batch;
        const dispatch::Choice c = dispatcher.select(p, context, hit_rate);
        std::printf("batch %2d context %6lld hit %.2f -> %s\n", batch, context, hit_rate,
                    dispatch::describe(c).c_str());
      }
    }
  }
  mactune::Problem odd = llama;
  odd.head_dim = 64;
  odd.kv_dtype = mactune::DType::f32;
  std::printf("head_dim 64 f32, batch 1 context 4096 hit 0.90 -> %s\n",
              dispatch::describe(dispatcher.select(odd, 4096, 0.9)).c_str());
  return 0;
}
