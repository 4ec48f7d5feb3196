// Shared pieces of the db tests: a scratch directory and small, valid keys.
#pragma once

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>

#include "db/store.h"

namespace mactune::db::testing {

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mactune-db-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline DeviceFingerprint test_device(int threads = 2) {
  DeviceFingerprint d;
  d.backend = Backend::cpu;
  d.name = "Test CPU @ 3.0GHz";
  d.compute_units = 2;
  d.memory_mib = 24 << 10;
  d.arch = "avx2";
  d.threads = threads;
  return d;
}

inline BuildInfo test_build(const std::string& rev = "abc123def456") {
  return {rev, "GNU 12.2.0", "r0123456789abcdef", "0.1.0", "RelWithDebInfo"};
}

// SQL that takes a file this build wrote back to schema 8 (tests of older steps undo the later
// ones first): v9's launch table and the ids that reference rows.
inline constexpr const char* kUndoV9 =
    "ALTER TABLE measurements DROP COLUMN launch_id;"
    "ALTER TABLE best_configs DROP COLUMN measurement_id;"
    "ALTER TABLE break_even DROP COLUMN mac_measurement_id;"
    "ALTER TABLE break_even DROP COLUMN full_measurement_id;"
    "DROP TABLE launches;"
    "DELETE FROM schema_version WHERE version >= 9;";

inline InstanceDesc test_instance(const std::string& family = "mac", int hd = 128) {
  return InstanceDesc::named(family + "_cpu_avx2_hd" + std::to_string(hd) + "_bf16", Backend::cpu,
                             parse_enum<Family>(family),
                             "isa=avx2,head_dim=" + std::to_string(hd) + ",kv=bf16");
}

inline Workload test_workload(int batch, long long context, double hit_rate) {
  Workload w;
  w.problem.batch = batch;
  w.problem.q_heads = 8;
  w.problem.kv_heads = 2;
  w.problem.head_dim = 128;
  w.context = context;
  w.forced.hit_rate = hit_rate;
  w.forced.lag = {LagKind::uniform, 256, 4096};
  w.forced.coherence = Coherence::per_head;
  return w;
}

// Stats derived from a seed so that every point's numbers differ and can be checked.
inline TimeStats test_stats(double median_s) {
  TimeStats s;
  s.samples = 11;
  s.median_s = median_s;
  s.q1_s = median_s * 0.98;
  s.q3_s = median_s * 1.03;
  s.min_s = median_s * 0.95;
  s.max_s = median_s * 1.2;
  s.mean_s = median_s * 1.01;
  s.rel_noise = 0.012;
  return s;
}

// The keys of a small store: one device and build, a MAC and a full instance, two workloads.
struct Keys {
  Id device, build, mac, full, w0, w1;
};

inline Keys add_keys(Store& s) {
  return {s.upsert_device(test_device()),
          s.upsert_build(test_build()),
          s.upsert_instance(test_instance("mac")),
          s.upsert_instance(test_instance("full")),
          s.upsert_workload(test_workload(4, 32768, 0.9)),
          s.upsert_workload(test_workload(4, 32768, 0.95))};
}

// An ok measurement of `instance` at `workload`.
inline Measurement ok_point(const Keys& k, Id instance, Id workload, double median_s) {
  Measurement m;
  m.point = {k.device, k.build, instance, "chunk_tokens=256,threads=2", workload, "cpu-wall", true};
  m.stats = test_stats(median_s);
  m.stop_reason = StopReason::noise;
  m.modeled_bytes = 1.5e9;
  m.clock_mhz = 3000.0;
  m.notes = "governor=performance";
  return m;
}

// The builtin migrations up to `version`: a database as an older build wrote it.
inline std::vector<Migration> migrations_up_to(int version) {
  std::vector<Migration> out;
  for (const Migration& m : builtin_migrations())
    if (m.version <= version) out.push_back(m);
  return out;
}

// Runs `f` in a child process without the right to write the test's files: as `nobody` when
// the tests run as root (root ignores permission bits). Returns the child's exit code: 90 when
// it could not drop its rights, 92 when `f` threw (the message on stderr), 93 when it died.
inline int run_unprivileged(const std::function<int()>& f) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(90);
    int rc = 91;
    try {
      rc = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      rc = 92;
    } catch (...) {
      rc = 92;
    }
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 93;
}

}  // namespace mactune::db::testing
