// The NVTX sink with a tool attached: this binary links a static NVTX injection (the mechanism
// NVTX offers to tools that cannot be dlopen'ed) that records every call, and checks that the
// sink creates the "mactune" domain, registers "<phase>/<instance>" strings once, and pushes
// and pops balanced ranges on the calling thread.
#include <cstdint>

// NVTX's loader (included below) calls through this pointer; this file defines it (after the
// fake tool), so it is declared first with the type NVTX gives it:
// NvtxInitializeInjectionNvtxFunc_t = int (*)(NvtxGetExportTableFunc_t).
extern "C" int (*InitializeInjectionNvtx2_fnptr)(const void* (*)(std::uint32_t));
#define NVTX_STATIC_INJECTION_IMPL  // no weak default definition here
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/nsys.h"
#include "profiler/nvtx.h"

namespace {

struct Call {
  std::string what;  // "push", "pop", "mark"
  std::string message;
  std::int64_t payload = -1;
  std::uint32_t color = 0;
};

std::mutex g_mutex;
std::vector<std::string> g_domains;
std::vector<std::string> g_registered;
std::vector<Call> g_calls;
int g_depth = 0;

nvtxDomainHandle_t NVTX_API fake_domain_create(const char* name) {
  std::lock_guard lock(g_mutex);
  g_domains.emplace_back(name);
  return reinterpret_cast<nvtxDomainHandle_t>(g_domains.size());
}

nvtxStringHandle_t NVTX_API fake_register(nvtxDomainHandle_t, const char* s) {
  std::lock_guard lock(g_mutex);
  g_registered.emplace_back(s);
  return reinterpret_cast<nvtxStringHandle_t>(g_registered.size());  // 1-based index
}

std::string message_of(const nvtxEventAttributes_t* a) {
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
    return "R:" + g_registered.at(reinterpret_cast<std::size_t>(a->message.registered) - 1);
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
  return "?";
}

int NVTX_API fake_push(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) {
  std::lock_guard lock(g_mutex);
  g_calls.push_back({"push", message_of(a),
                     a->payloadType == NVTX_PAYLOAD_TYPE_INT64 ? a->payload.llValue : -1,
                     a->colorType == NVTX_COLOR_ARGB ? a->color : 0});
  return ++g_depth;
}

int NVTX_API fake_pop(nvtxDomainHandle_t) {
  std::lock_guard lock(g_mutex);
  g_calls.push_back({"pop", "", -1, 0});
  return --g_depth;
}

void NVTX_API fake_mark(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) {
  std::lock_guard lock(g_mutex);
  g_calls.push_back({"mark", message_of(a), -1, 0});
}

int NVTX_API fake_initialize(NvtxGetExportTableFunc_t get_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA)
    return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(fake_domain_create);
  *table[NVTX_CBID_CORE2_DomainRegisterStringA] =
      reinterpret_cast<NvtxFunctionPointer>(fake_register);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(fake_push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(fake_pop);
  *table[NVTX_CBID_CORE2_DomainMarkEx] = reinterpret_cast<NvtxFunctionPointer>(fake_mark);
  return 1;
}

}  // namespace

NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = fake_initialize;

namespace mactune::prof {
namespace {

TEST(NvtxWithTool, PhaseRangesUseRegisteredStringsInTheMactuneDomain) {
  ASSERT_TRUE(nvtx_compiled());
  ASSERT_TRUE(nvtx_tool_attached());
  NvtxPhaseSink sink;
  ASSERT_TRUE(sink.active());
  const std::string inst = "mac_cpu_avx2_hd128_bf16";
  for (int step = 0; step < 3; ++step) {
    PhaseScope s(&sink, Phase::step, inst);
    { PhaseScope m(&sink, Phase::match, inst); }
    { PhaseScope a(&sink, Phase::attend, inst); }
  }
  std::lock_guard lock(g_mutex);
  EXPECT_EQ(g_domains, std::vector<std::string>{"mactune"});
  // Each message is registered once, however many steps ran.
  EXPECT_EQ(g_registered,
            (std::vector<std::string>{"step/" + inst, "match/" + inst, "attend/" + inst}));
  ASSERT_EQ(g_calls.size(), 3u * 6u);
  EXPECT_EQ(g_calls[0].what, "push");
  EXPECT_EQ(g_calls[0].message, "R:step/" + inst);
  EXPECT_EQ(g_calls[1].message, "R:match/" + inst);
  EXPECT_EQ(g_calls[2].what, "pop");
  EXPECT_EQ(g_calls[3].message, "R:attend/" + inst);
  EXPECT_NE(g_calls[1].color, g_calls[3].color);  // one color per phase
  EXPECT_EQ(g_depth, 0);
}

TEST(NvtxWithTool, ScopedRangesCarryPayloadsAndRegisteredCaptureNames) {
  {
    std::lock_guard lock(g_mutex);
    g_calls.clear();
  }
  {
    NvtxRange point("point attend_cuda_hd128_g4_t64_s2_bf16 batch=8 ctx=32768", 12);
    NvtxRange measure(kMeasureRange, -1, /*registered=*/true);
    nvtx_mark("warm-up done");
  }
  std::lock_guard lock(g_mutex);
  ASSERT_EQ(g_calls.size(), 5u);
  EXPECT_EQ(g_calls[0].message, "point attend_cuda_hd128_g4_t64_s2_bf16 batch=8 ctx=32768");
  EXPECT_EQ(g_calls[0].payload, 12);
  EXPECT_EQ(g_calls[1].message, "R:measure");
  EXPECT_EQ(g_calls[1].payload, -1);
  EXPECT_EQ(g_calls[2].what, "mark");
  EXPECT_EQ(g_calls[3].what, "pop");
  EXPECT_EQ(g_calls[4].what, "pop");
  EXPECT_EQ(g_depth, 0);
}

TEST(NvtxWithTool, PhasesWithoutAnInstanceTakeTheDefaultOne) {
  NvtxPhaseSink sink("mac_cpu_generic_hd64_f32");
  { PhaseScope a(&sink, Phase::ring_write); }
  std::lock_guard lock(g_mutex);
  EXPECT_EQ(g_calls.back().what, "pop");
  EXPECT_EQ(g_calls[g_calls.size() - 2].message, "R:ring_write/mac_cpu_generic_hd64_f32");
}

TEST(NvtxWithTool, ThreadsKeepTheirOwnRangeStrings) {
  NvtxPhaseSink sink;
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      const std::string inst = "inst" + std::to_string(t);
      for (int i = 0; i < 100; ++i) PhaseScope a(&sink, Phase::attend, inst);
    });
  for (auto& t : pool) t.join();
  std::lock_guard lock(g_mutex);
  for (int t = 0; t < 4; ++t)
    EXPECT_NE(
        std::find(g_registered.begin(), g_registered.end(), "attend/inst" + std::to_string(t)),
        g_registered.end());
  EXPECT_EQ(g_depth, 0);
}

}  // namespace
}  // namespace mactune::prof
