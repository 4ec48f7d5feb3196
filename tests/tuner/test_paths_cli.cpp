// Issue 30, lost data: through the real binary, an output that names an input (or another
// output) is refused before any work, with one line, and every input is left as it was;
// devices, FIFOs and folders are never replaced; an unwritable output is found before the
// grid is measured. Grouped per command.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "cli_util.h"
#include "replay/safetensors.h"

namespace mactune::tuner {
namespace {

namespace fs = std::filesystem;
using testing::CliOptions;
using testing::CliResult;
using testing::expect_refused;
using testing::read_file;
using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;
using testing::write_trace;

// A tiny sweep tuned once per process; each test copies its files.
const TempDir& tuned() {
  static const TempDir* dir = [] {
    auto* d = new TempDir;
    d->write("tiny.yaml", tiny_spec("tiny", "[1]", "[256]", "[0, 1]", "[64]", 2));
    const auto r = run_mactune(*d, {"tune", "tiny.yaml", "-q", "--no-report"});
    EXPECT_EQ(r.rc, 0) << r.err;
    return d;
  }();
  return *dir;
}

// `dir` with tiny.yaml, tiny.db and tiny.json of the tuned sweep.
void copy_tuned(const TempDir& dir) {
  for (const char* f : {"tiny.yaml", "tiny.db", "tiny.json"})
    fs::copy_file(tuned().file(f), dir.file(f), fs::copy_options::overwrite_existing);
}

// Runs the command and checks the refusal and that every file of `inputs` is unchanged.
void expect_inputs_kept(const TempDir& dir, std::vector<std::string> args,
                        std::initializer_list<std::string> inputs,
                        std::initializer_list<std::string> parts) {
  std::vector<std::string> before;
  for (const auto& f : inputs) before.push_back(read_file(dir.file(f)));
  expect_refused(run_mactune(dir, args), parts);
  std::size_t i = 0;
  for (const auto& f : inputs) EXPECT_EQ(read_file(dir.file(f)), before[i++]) << f << " changed";
}

// ---- tune

TEST(TunePaths, DispatchTableThatIsTheDatabaseIsRefusedBeforeMeasuring) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"tune", "tiny.yaml", "-q", "-o", "tiny.db"}, {"tiny.db", "tiny.yaml"},
                     {"dispatch table 'tiny.db' (-o)", "also the database 'tiny.db'"});
}

TEST(TunePaths, HeaderThatIsTheDatabaseIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"tune", "tiny.yaml", "-q", "--header", "./tiny.db"}, {"tiny.db"},
                     {"dispatch header './tiny.db' (--header)", "database 'tiny.db'"});
}

TEST(TunePaths, OutputThatIsTheSpecIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"tune", "tiny.yaml", "-q", "-o", "tiny.yaml"}, {"tiny.yaml"},
                     {"it is the spec 'tiny.yaml'", "an input of this command"});
  expect_inputs_kept(dir, {"tune", "tiny.yaml", "-q", "--db", "tiny.yaml"}, {"tiny.yaml"},
                     {"database 'tiny.yaml' (--db)", "the spec"});
}

TEST(TunePaths, SymlinkAndHardLinkToTheSpecAreRefused) {
  TempDir dir;
  copy_tuned(dir);
  fs::create_symlink("tiny.yaml", dir.file("link.json"));
  fs::create_hard_link(dir.file("tiny.yaml"), dir.file("hard.json"));
  expect_inputs_kept(dir, {"tune", "tiny.yaml", "-q", "-o", "link.json"}, {"tiny.yaml"},
                     {"it is the spec"});
  expect_inputs_kept(dir, {"tune", "tiny.yaml", "-q", "-o", "hard.json"}, {"tiny.yaml"},
                     {"it is the spec"});
  EXPECT_TRUE(fs::is_symlink(dir.file("link.json")));
}

TEST(TunePaths, DatabaseAndTableOnOneNewPathAreRefusedAndNothingIsCreated) {
  TempDir dir;
  dir.write("s.yaml", tiny_spec("s", "[1]", "[256]", "[0]", "[64]", 2));
  expect_refused(run_mactune(dir, {"tune", "s.yaml", "-q", "--db", "same.out", "-o", "same.out"}),
                 {"two outputs of one command must be different files"});
  EXPECT_FALSE(fs::exists(dir.file("same.out")));
}

TEST(TunePaths, DevNullAsTheTableIsRefusedAndStaysADevice) {
  TempDir dir;
  dir.write("s.yaml", tiny_spec("s", "[1]", "[256]", "[0]", "[64]", 2));
  expect_refused(run_mactune(dir, {"tune", "s.yaml", "-q", "-o", "/dev/null"}),
                 {"'/dev/null'", "a character device"});
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_FALSE(fs::exists(dir.file("s.db")));  // refused before anything is created
}

TEST(TunePaths, UnwritableTableHeaderOrReportIsFoundBeforeMeasuring) {
  TempDir dir;
  dir.write("s.yaml", tiny_spec("s", "[1]", "[256]", "[0]", "[64]", 2));
  fs::create_directory(dir.file("ro"));
  chmod(dir.file("ro").c_str(), 0555);
  CliOptions o;
  o.unprivileged = true;
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"-o", "ro/t.json"},
                                                {"--header", "ro/t.h"},
                                                {"--report", "ro/rep"}}) {
    std::vector<std::string> args = {"tune", "s.yaml", "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_refused(run_mactune(dir, args, o), {"'ro'", "permission denied"});
    EXPECT_FALSE(fs::exists(dir.file("s.db"))) << extra.front() << ": measured before refusing";
  }
}

// ---- emit

TEST(EmitPaths, TableOrHeaderThatIsTheDatabaseIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"emit", "--db", "tiny.db", "-o", "tiny.db"}, {"tiny.db"},
                     {"dispatch table 'tiny.db' (-o): it is the database 'tiny.db' (--db)"});
  expect_inputs_kept(dir, {"emit", "--db", "tiny.db", "-o", "t.json", "--header", "tiny.db"},
                     {"tiny.db"}, {"dispatch header 'tiny.db' (--header)"});
  expect_inputs_kept(dir, {"emit", "--db", "tiny.db", "-o", "x.json", "--header", "./x.json"},
                     {"tiny.db"}, {"also the dispatch table 'x.json'"});
}

TEST(EmitPaths, FifoAsTheTableIsRefusedWithoutBlocking) {
  TempDir dir;
  copy_tuned(dir);
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0644), 0);
  CliOptions o;
  o.timeout_s = 20;
  expect_refused(run_mactune(dir, {"emit", "--db", "tiny.db", "-o", "fifo"}, o),
                 {"'fifo'", "a FIFO"});
  struct stat st {};
  ASSERT_EQ(stat(dir.file("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// ---- compare, report

TEST(ComparePaths, ReportThatIsAnInputDatabaseIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  fs::copy_file(dir.file("tiny.db"), dir.file("b.db"));
  expect_inputs_kept(dir, {"compare", "tiny.db", "b.db", "-o", "tiny.db"}, {"tiny.db", "b.db"},
                     {"comparison report 'tiny.db' (-o): it is the database 'tiny.db' (BASE)"});
  expect_inputs_kept(dir, {"compare", "tiny.db", "b.db", "-o", "b.db"}, {"tiny.db", "b.db"},
                     {"(NEW)"});
}

TEST(ReportPaths, ReportFolderThatIsTheDatabaseIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"report", "--db", "tiny.db", "-o", "tiny.db"}, {"tiny.db"},
                     {"report directory 'tiny.db' (-o)", "not a directory"});
}

// ---- db export, db import-nsys, db merge

TEST(DbPaths, ExportOverItsDatabaseIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"db", "export", "--db", "tiny.db", "-o", "tiny.db"}, {"tiny.db"},
                     {"export 'tiny.db' (-o): it is the database 'tiny.db' (--db)"});
}

TEST(DbPaths, ImportIntoTheReportItselfIsRefused) {
  TempDir dir;
  copy_tuned(dir);
  expect_inputs_kept(dir, {"db", "import-nsys", "tiny.db", "--db", "tiny.db"}, {"tiny.db"},
                     {"database 'tiny.db' (--db): it is the nsys report"});
}

TEST(DbPaths, MergeIntoAMissingFolderNamesTheOptionAndTheFolder) {
  TempDir dir;
  copy_tuned(dir);
  const CliResult r = run_mactune(dir, {"db", "merge", "tiny.db", "-o", "no/dir/o.db"});
  expect_refused(r, {"database 'no/dir/o.db' (-o)", "folder 'no/dir' does not exist"});
  EXPECT_EQ(r.err.find("tmp"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--db"), std::string::npos) << r.err;
}

// ---- replay, calibrate, profile

TEST(ReplayPaths, JsonOverTheTraceIsRefused) {
  TempDir dir;
  write_trace(dir, "t.safetensors");
  expect_inputs_kept(dir, {"replay", "--trace", "t.safetensors", "--json", "t.safetensors"},
                     {"t.safetensors"}, {"replay JSON 't.safetensors' (--json): it is the trace"});
}

TEST(ReplayPaths, DbAndJsonOnOnePathAreRefused) {
  TempDir dir;
  write_trace(dir, "t.safetensors");
  expect_refused(
      run_mactune(dir, {"replay", "--trace", "t.safetensors", "--db", "same", "--json", "same"}),
      {"two outputs of one command must be different files"});
  EXPECT_FALSE(fs::exists(dir.file("same")));
}

TEST(CalibratePaths, ScheduleOverTheTraceOrJsonOnTheScheduleIsRefused) {
  TempDir dir;
  write_trace(dir, "t.safetensors");
  expect_inputs_kept(
      dir, {"calibrate", "--trace", "t.safetensors", "--max-err", "0.1", "-o", "./t.safetensors"},
      {"t.safetensors"}, {"schedule './t.safetensors' (-o): it is the trace"});
  expect_refused(run_mactune(dir, {"calibrate", "--trace", "t.safetensors", "--max-err", "0.1",
                                   "-o", "s.yaml", "--json", "s.yaml"}),
                 {"calibration JSON 's.yaml' (--json): it is also the schedule"});
  EXPECT_FALSE(fs::exists(dir.file("s.yaml")));
}

TEST(ProfilePaths, DevNullAsTheTraceIsRefused) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"profile", "--backend", "cpu", "--trace", "/dev/null"}),
                 {"trace '/dev/null'", "a character device"});
}

}  // namespace
}  // namespace mactune::tuner
