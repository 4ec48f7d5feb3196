// kernels/file_io.h: the reader refuses what is not a regular file or is over its cap, without
// blocking or reading; the writer leaves the old file and no temporary on every failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "kernels/error.h"
#include "kernels/file_io.h"

namespace mactune {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "mactune-fileio-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  std::string slurp(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Only `keep` in the folder: no temporary.
  void expect_only(std::initializer_list<std::string> keep) const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      ++n;
      EXPECT_NE(std::find(keep.begin(), keep.end(), e.path().filename().string()), keep.end())
          << "left behind: " << e.path();
    }
    EXPECT_EQ(n, keep.size());
  }
  std::string message(const std::function<void()>& f) const {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  std::string dir_;
};

TEST_F(FileIo, ReadsARegularFile) {
  std::ofstream(file("a.yaml")) << "name: x\n";
  EXPECT_EQ(read_input_file(file("a.yaml"), "spec", 100), "name: x\n");
}

TEST_F(FileIo, RefusesWhatIsNotARegularFileNamingWhatItIs) {
  ASSERT_EQ(mkfifo(file("fifo").c_str(), 0644), 0);
  EXPECT_EQ(message([&] { read_input_file(file("fifo"), "spec", 100); }),
            file("fifo") + ": cannot read the spec: it is a FIFO, not a regular file");
  EXPECT_EQ(message([&] { read_input_file(dir_, "spec", 100); }),
            dir_ + ": cannot read the spec: it is a directory, not a regular file");
  EXPECT_EQ(message([&] { read_input_file("/dev/zero", "spec", 100); }),
            "/dev/zero: cannot read the spec: it is a character device, not a regular file");
  EXPECT_EQ(message([&] { read_input_file(file("none"), "spec", 100); }),
            file("none") + ": cannot read the spec: no such file or directory");
}

TEST_F(FileIo, RefusesAFileOverTheCap) {
  std::ofstream(file("big")) << std::string(2048, 'x');
  EXPECT_EQ(message([&] { read_input_file(file("big"), "spec", 1024); }),
            file("big") + ": the spec is larger than 1 KiB; is it the right file?");
}

TEST_F(FileIo, WritesAtomicallyAndReplaces) {
  write_file_atomically(file("t.json"), "old", "table");
  write_file_atomically(file("t.json"), "new", "table");
  EXPECT_EQ(slurp(file("t.json")), "new");
  expect_only({"t.json"});
}

TEST_F(FileIo, DirectoryTargetIsNamedNotSuccess) {
  fs::create_directory(file("d"));
  EXPECT_EQ(message([&] { write_file_atomically(file("d"), "x", "table"); }),
            "cannot write table '" + file("d") + "': it is a directory; give a file path");
  expect_only({"d"});
}

TEST_F(FileIo, NameTooLongIsNamed) {
  const std::string name(300, 'n');
  EXPECT_NE(message([&] {
              write_file_atomically(file(name), "x", "table");
            }).find("file name too long (300 characters; at most 255)"),
            std::string::npos);
  expect_only({});
}

TEST_F(FileIo, FailedWriteKeepsTheOldFileAndRemovesTheTemporary) {
  write_file_atomically(file("t.json"), "old", "table");
  // RLIMIT_FSIZE makes the write fail with EFBIG part way, as a full disk would with ENOSPC.
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &before), 0);
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg =
      message([&] { write_file_atomically(file("t.json"), std::string(1 << 20, 'x'), "table"); });
  setrlimit(RLIMIT_FSIZE, &before);
  signal(SIGXFSZ, old_handler);
  EXPECT_EQ(msg, "cannot write table '" + file("t.json") +
                     "': file too large (the file size limit, ulimit -f, was reached; as on a "
                     "full disk)");
  EXPECT_EQ(slurp(file("t.json")), "old");
  expect_only({"t.json"});
}

TEST_F(FileIo, UncommittedFileLeavesNothing) {
  {
    AtomicFile f(file("x.json"), "table");
    f.write("half");
  }
  expect_only({});
}

}  // namespace
}  // namespace mactune
