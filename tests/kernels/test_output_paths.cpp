// kernels/output_paths.h: an output never names an input or another output, however it is
// spelt (./x, d/../x, a symlink, a hard link); devices, FIFOs and folders are never outputs;
// a missing or unwritable folder is found first. kernels/file_io.h: a signal removes every
// live temporary and still ends the process. kernels/json_error.h: parse errors as LINE:COL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/error.h"
#include "kernels/file_io.h"
#include "kernels/json_error.h"
#include "kernels/output_paths.h"

namespace mactune {
namespace {

namespace fs = std::filesystem;

class OutputPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mactune-paths-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    std::ofstream(file("in.yaml")) << "spec";
    fs::create_directory(file("sub"));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  // The message of the InputError `paths.check()` throws, or "" when it passes.
  static std::string refusal(const OutputPaths& paths) {
    try {
      paths.check();
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  std::string dir_;
};

TEST_F(OutputPathsTest, DistinctPathsPass) {
  EXPECT_EQ(refusal(OutputPaths()
                        .input(file("in.yaml"), "spec")
                        .output(file("out.json"), "dispatch table", "-o")
                        .output(file("out.db"), "database", "--db", Output::database)),
            "");
}

TEST_F(OutputPathsTest, EverySpellingOfAnInputIsRefused) {
  fs::create_symlink(file("in.yaml"), file("link.yaml"));
  fs::create_hard_link(file("in.yaml"), file("hard.yaml"));
  const std::string rel = fs::relative(file("in.yaml")).string();
  for (const std::string& alias :
       {file("in.yaml"), dir_ + "/./in.yaml", dir_ + "/sub/../in.yaml", dir_ + "//in.yaml",
        file("link.yaml"), file("hard.yaml"), rel, "./" + rel}) {
    const std::string why =
        refusal(OutputPaths().input(file("in.yaml"), "spec").output(alias, "dispatch table", "-o"));
    EXPECT_NE(why.find("cannot write dispatch table '" + alias + "' (-o): it is the spec"),
              std::string::npos)
        << alias << ": " << why;
    EXPECT_NE(why.find("an input of this command"), std::string::npos) << why;
  }
}

TEST_F(OutputPathsTest, TwoOutputsOnOneNewPathAreRefused) {
  const std::string why = refusal(OutputPaths()
                                      .output(file("same"), "database", "--db", Output::database)
                                      .output(dir_ + "/sub/../same", "dispatch table", "-o"));
  EXPECT_NE(why.find("it is also the database"), std::string::npos) << why;
  EXPECT_NE(why.find("two outputs of one command must be different files"), std::string::npos)
      << why;
}

TEST_F(OutputPathsTest, DevicesFifosAndFoldersAreNeverOutputs) {
  ASSERT_EQ(mkfifo(file("fifo").c_str(), 0644), 0);
  for (const auto& [path, kind] :
       {std::pair<std::string, std::string>{"/dev/null", "a character device"},
        {file("fifo"), "a FIFO"},
        {file("sub"), "a directory"}}) {
    const std::string why = refusal(OutputPaths().output(path, "export", "-o"));
    EXPECT_NE(why.find(kind), std::string::npos) << path << ": " << why;
  }
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(OutputPathsTest, MissingFolderIsNamedUnlessTheCommandCreatesIt) {
  const std::string out = file("no/dir/o.json");
  const std::string why = refusal(OutputPaths().output(out, "dispatch table", "-o"));
  EXPECT_NE(why.find("folder '" + file("no/dir") + "' does not exist"), std::string::npos) << why;
  EXPECT_EQ(refusal(OutputPaths().output(out, "dispatch table", "-o", Output::file_mkdir)), "");
  // A database whose folder is missing: named too (Store::open does not create folders).
  EXPECT_NE(refusal(OutputPaths().output(file("no/o.db"), "database", "-o", Output::database))
                .find("(-o): folder"),
            std::string::npos);
}

TEST_F(OutputPathsTest, ReportFolderMayNotHoldAnInputUnderAReportName) {
  fs::create_directory(file("rep"));
  std::ofstream(file("rep/report.md")) << "mine";
  const std::string why =
      refusal(OutputPaths()
                  .input(file("rep/report.md"), "spec")
                  .output(file("rep"), "report directory", "--report", Output::directory)
                  .inside(file("rep"), "report.md", "report file"));
  EXPECT_NE(why.find("cannot write report file"), std::string::npos) << why;
  EXPECT_NE(refusal(OutputPaths().output(file("in.yaml"), "report directory", "--report",
                                         Output::directory))
                .find("not a directory"),
            std::string::npos);
}

// A child that holds a live AtomicFile temporary and a registered name is signalled: both
// are gone afterwards, and the child died of the signal (not exit 0).
void expect_signal_removes_temporaries(int sig, const std::string& dir) {
  const pid_t pid = fork();
  if (pid == 0) {
    install_signal_cleanup();
    AtomicFile f(dir + "/x.csv", "export");
    f.write("half");
    TemporaryName other(dir + "/o.db.tmp-1");
    std::ofstream(dir + "/o.db.tmp-1") << "db";
    ::raise(sig);
    _exit(0);  // never reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status)) << status;
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), sig);
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    EXPECT_EQ(n.find("tmp"), std::string::npos) << "left behind: " << n;
  }
}

TEST_F(OutputPathsTest, SigtermRemovesEveryLiveTemporary) {
  expect_signal_removes_temporaries(SIGTERM, dir_);
}
TEST_F(OutputPathsTest, SigintRemovesEveryLiveTemporary) {
  expect_signal_removes_temporaries(SIGINT, dir_);
}

TEST_F(OutputPathsTest, FileSizeLimitFailsTheWriteInsteadOfKillingTheProcess) {
  const pid_t pid = fork();
  if (pid == 0) {
    install_signal_cleanup();
    const rlimit lim{100, 100};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_file_atomically(dir_ + "/big.json", std::string(1000, 'x'), "table");
    } catch (const InputError& e) {
      _exit(std::string(e.what()).find("file size limit") != std::string::npos ? 7 : 8);
    }
    _exit(9);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_FALSE(fs::exists(dir_ + "/big.json"));
}

TEST(JsonErrorText, SaysWhereAndWhatWasExpected) {
  using detail::json_error_text;
  EXPECT_EQ(json_error_text("", 1, "[json.exception.parse_error.101] parse error"),
            "1:1: expected a JSON value, found an empty file");
  const std::string nan = json_error_text(
      "{\"a\":\n NaN}", 8,
      "[json.exception.parse_error.101] parse error at line 2, column 3: syntax error while "
      "parsing value - invalid literal; last read: 'N'");
  EXPECT_EQ(nan.rfind("2:2: expected a JSON value, found 'N'", 0), 0u) << nan;
  EXPECT_NE(nan.find("no NaN"), std::string::npos) << nan;
  const std::string big =
      json_error_text("[1,\n1e400]", std::string::npos,
                      "[json.exception.out_of_range.406] number overflow parsing '1e400'");
  EXPECT_EQ(big, "2:1: expected a finite number, found '1e400' (too large for a double)");
  const std::string trailing = json_error_text(
      "{} x", 4,
      "[json.exception.parse_error.101] parse error at line 1, column 4: syntax error while "
      "parsing value - unexpected 'x'; expected end of input");
  EXPECT_EQ(trailing.rfind("1:4: expected the end of the JSON document, found 'x'", 0), 0u)
      << trailing;
  for (const std::string& m : {nan, big, trailing})
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
}

}  // namespace
}  // namespace mactune
