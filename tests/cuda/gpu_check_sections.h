// The sections of mactune_gpu_check: what each measures and the records it writes (kinds and
// keys: scripts/gpu_report.py's READS). A section measures shape by shape; a shape that fails
// writes an `error` record and the next one runs.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "gpu_check_bench.h"
#include "gpu_check_record.h"

namespace mactune::cuda::check {

struct RunOptions {
  bool quick = false;  // fewer shapes and samples (a smoke run)
  int warmup = 3;      // warm-up steps before the samples (ncu's --launch-skip counts them)
  int run = 1;         // which run of the table this is (a second run gives the spread)
};

// A section returns how many of its shapes failed.
using SectionFn = int (*)(Bench&, RecordFile&, const RunOptions&);
struct Section {
  std::string name, what;
  SectionFn fn;
  bool in_table;  // run by default (the lease's table step)
};

const std::vector<Section>& sections();

// The `env` record: the device, the mode (gpu / dry), the instances built.
void write_env(Bench& bench, RecordFile& out);

// The grid's shapes as `shape` records (scripts/gpu_peer.py times its peer on them).
void write_plan(std::ostream& out);

}  // namespace mactune::cuda::check
