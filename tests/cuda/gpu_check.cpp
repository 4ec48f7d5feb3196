// mactune_gpu_check: the measurements of scripts/gpu-check.sh on a GPU machine, as JSON-lines
// records appended (and printed) as they are measured; scripts/gpu_report.py renders them.
//
//   mactune_gpu_check run FILE [--sections a,b,...] [--dry] [--quick] [--warmup N] [--run N]
//       the sections (default: every table section, in order of value) into FILE; --dry
//       measures nothing and needs no GPU: the same sections and records with placeholder
//       numbers, which the dry run feeds to the report
//   mactune_gpu_check sections      the sections, one a line (name, in the table?, what)
//   mactune_gpu_check probe         {"usable": ..., "why_not": ...}; exit 0, or 77 without a GPU
//   mactune_gpu_check plan          the grid's shapes as `shape` records (for gpu_peer.py)
//   mactune_gpu_check list          the instances this binary holds (no GPU needed)
//
// Exit codes: 0 every shape of every section measured; 1 some failed (their `error` records
// say what); 2 usage or a bad file; 77 skipped: no usable GPU (a `skip` record says why).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_check_sections.h"
#include "kernels/cuda/registry.h"

namespace mactune::cuda::check {
namespace {

constexpr int kSkipped = 77;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

int parse_count(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < 0) throw InputError(flag + " '" + v + "' is not a count");
  return n;
}

int usage(const std::string& why) {
  std::cerr << "mactune: error: mactune_gpu_check: " << why
            << " (usage: mactune_gpu_check run FILE [--sections a,b] [--dry] [--quick] "
               "[--warmup N] [--run N] | sections | probe | plan | list)\n";
  return 2;
}

int run(int argc, char** argv) {
  if (argc < 3) return usage("run needs a FILE");
  const std::string file = argv[2];
  RunOptions ro;
  bool dry = false;
  std::vector<std::string> names;
  for (const Section& s : sections())
    if (s.in_table) names.push_back(s.name);
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InputError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--dry") {
      dry = true;
    } else if (a == "--quick") {
      ro.quick = true;
    } else if (a == "--sections") {
      names = split(value());
    } else if (a == "--warmup") {
      ro.warmup = parse_count(a, value());
    } else if (a == "--run") {
      ro.run = parse_count(a, value());
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }
  std::vector<const Section*> chosen;
  for (const std::string& n : names) {
    const Section* found = nullptr;
    for (const Section& s : sections())
      if (s.name == n) found = &s;
    if (found == nullptr) return usage("no section '" + n + "'");
    chosen.push_back(found);
  }
  RecordFile out(file);
  if (!out.good()) return usage("cannot append to " + file);
  if (!dry && !gpu_status().usable) {
    out.write(Record("skip")
                  .str("section", "all")
                  .str("reason", "no usable GPU: " + gpu_status().why_not));
    std::cerr << "mactune_gpu_check: skipped: no usable GPU: " << gpu_status().why_not << "\n";
    return kSkipped;
  }
  std::unique_ptr<Bench> bench = dry ? dry_bench() : gpu_bench();
  write_env(*bench, out);
  int failed = 0;
  for (const Section* s : chosen) {
    const int f = s->fn(*bench, out, ro);
    std::printf("== section %s: %s\n", s->name.c_str(), f ? "some shapes FAILED" : "done");
    std::fflush(stdout);
    failed += f;
  }
  return failed ? 1 : 0;
}

int probe() {
  const GpuStatus& st = gpu_status();
  std::cout << Record("probe").flag("usable", st.usable).str("why_not", st.why_not).json() << "\n";
  return st.usable ? 0 : kSkipped;
}

}  // namespace
}  // namespace mactune::cuda::check

int main(int argc, char** argv) {
  using namespace mactune::cuda::check;
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "run") return run(argc, argv);
    if (cmd == "probe") return probe();
    if (cmd == "plan") {
      write_plan(std::cout);
      return 0;
    }
    if (cmd == "sections") {
      for (const Section& s : sections())
        std::cout << s.name << " " << (s.in_table ? "table" : "-") << " " << s.what << "\n";
      return 0;
    }
    if (cmd == "list" || cmd == "--list") {
      for (const mactune::InstanceDesc& i : mactune::cuda::instances())
        std::cout << i.name << " " << i.config << "\n";
      return 0;
    }
    return usage(cmd.empty() ? "no command" : "unknown command '" + cmd + "'");
  } catch (const std::exception& e) {
    std::cerr << "mactune: error: mactune_gpu_check: " << e.what() << "\n";
    return 2;
  }
}
