// The nsys command text, and the NVTX sink with no tool attached (the normal case: NVTX calls
// must be harmless no-ops).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "profiler/nsys.h"
#include "profiler/nvtx.h"

namespace mactune::prof {
namespace {

TEST(NsysCommand, CudaBackendCapturesBetweenProfilerStartAndStop) {
  const std::string cmd = nsys_command({"/opt/mactune/bin/mactune", "profile", "--backend", "cuda",
                                        "--context", "131072", "--steps", "20", "--no-cupti"},
                                       NsysOptions{});
  EXPECT_EQ(cmd,
            "nsys profile --trace=cuda,nvtx --cuda-graph-trace=node "
            "--capture-range=cudaProfilerApi --capture-range-end=stop --sample=none "
            "--cpuctxsw=none --export=sqlite --force-overwrite=true --output=mactune-profile "
            "/opt/mactune/bin/mactune profile --backend cuda --context 131072 --steps 20 "
            "--no-cupti");
}

TEST(NsysCommand, CpuBackendCapturesTheMeasureNvtxRange) {
  NsysOptions o;
  o.cuda = false;
  o.export_sqlite = false;
  o.output = "run 1";
  const std::string cmd = nsys_command({"mactune", "profile", "--backend", "cpu"}, o);
  EXPECT_NE(cmd.find("--capture-range=nvtx --nvtx-capture=measure@mactune"), std::string::npos)
      << cmd;
  EXPECT_EQ(cmd.find("cudaProfilerApi"), std::string::npos) << cmd;
  EXPECT_EQ(cmd.find("--export"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("'--output=run 1'"), std::string::npos) << cmd;
}

std::string run_shell_echo(const std::string& quoted) {
  // printf '[%s]' WORD...: shows how the shell split and unquoted the words.
  const std::string cmd = "printf '[%s]' " + quoted;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  pclose(p);
  return out;
}

TEST(ShellQuote, TheShellReadsEveryWordBack) {
  for (const std::string w : {"plain", "with space", "it's", "$HOME", "a\"b", "back\\slash", "*",
                              "semi;colon", "", "--flag=x y", "tab\there"}) {
    EXPECT_EQ(run_shell_echo(shell_quote(w)), "[" + w + "]") << "word: " << w;
  }
  EXPECT_EQ(shell_quote("--output=a/b.c"), "--output=a/b.c");  // safe words stay bare
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(Nvtx, MessagesNameThePhaseAndTheInstance) {
  EXPECT_EQ(nvtx_message(Phase::attend, "attend_cuda_hd128_g4_t64_s2_bf16"),
            "attend/attend_cuda_hd128_g4_t64_s2_bf16");
  EXPECT_EQ(nvtx_message(Phase::ring_write, ""), "ring_write");
  std::string phase, instance;
  EXPECT_TRUE(parse_nvtx_message("merge/mac_cpu_avx2_hd128_bf16", &phase, &instance));
  EXPECT_EQ(phase, "merge");
  EXPECT_EQ(instance, "mac_cpu_avx2_hd128_bf16");
  EXPECT_TRUE(parse_nvtx_message("step", &phase, &instance));
  EXPECT_EQ(phase, "step");
  EXPECT_EQ(instance, "");
  EXPECT_FALSE(parse_nvtx_message("measure", &phase, &instance));
  EXPECT_FALSE(parse_nvtx_message("attention/x", &phase, &instance));
}

TEST(Nvtx, SinkAndRangesAreHarmlessWithoutATool) {
  if (std::getenv("NVTX_INJECTION64_PATH")) GTEST_SKIP() << "an NVTX tool is attached";
  EXPECT_FALSE(nvtx_tool_attached());
  NvtxPhaseSink sink;
  EXPECT_FALSE(sink.active());
  for (int i = 0; i < 1000; ++i) {
    PhaseScope step(&sink, Phase::step, "mac_cpu_generic_hd64_f32");
    PhaseScope attend(&sink, Phase::attend, "mac_cpu_generic_hd64_f32");
    NvtxRange point("tuner point 17", 17);
    NvtxRange measure(kMeasureRange, -1, /*registered=*/true);
    nvtx_mark("mark");
  }
  // Unbalanced use cannot crash either: NVTX is a no-op here.
  sink.end(Phase::merge);
}

}  // namespace
}  // namespace mactune::prof
