// Merging databases (shards of one sweep, or results from several machines) by natural key.
//
// Every row of the source is mapped onto the destination through its natural key (device
// fingerprint, build triple, instance name, workload key, run key, point identity, ...), never
// its row id. So merging is idempotent (merging the same file twice, or a file into itself,
// adds nothing) and order-free for measurements (the first stored result of a point is kept;
// an ok result replaces a stored failure, as in Store::record_measurement). Decisions and
// fidelity rows keep the most recent decision. One source is merged in one transaction.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "db/store.h"

namespace mactune::db {

struct MergeStats {
  // Rows inserted or updated per table, in table_names() order.
  std::vector<std::pair<std::string, std::int64_t>> changed;
  bool same_file = false;  // the source is the destination: nothing to do

  std::int64_t total() const;
  std::int64_t of(const std::string& table) const;
};

// Merges the database at `source_path` into `dest`. The source is opened read-only and must
// be a mactune database at this build's schema version. Throws InputError naming the source
// when it is not, or when an instance name carries a different config in the two files.
MergeStats merge_into(Store& dest, const std::string& source_path);

struct MergedInput {
  std::string path;
  MergeStats stats;
};

// `mactune db merge`: every input is checked first (readable, even from a read-only folder;
// intact by quick_check; this schema version), before the output is touched. A new output is
// written under a temporary name in its folder and renamed at the end: on any failure no
// output and no temporary remain. An existing output is added to in place.
std::vector<MergedInput> merge_files(const std::vector<std::string>& inputs,
                                     const std::string& output);

}  // namespace mactune::db
