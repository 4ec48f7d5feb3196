// The one output-path rule every command and the Python API obey, checked before any work:
//
//   OutputPaths paths;
//   paths.input(spec, "spec").output(db, "database", "--db", Output::database)
//        .output(table, "dispatch table", "-o");
//   paths.check();  // throws InputError, one line
//
// Every path is resolved (the real path of its folder plus its name, a symlink followed) and,
// when it exists, identified by device and inode (so a hard link, a symlink, `./x`, `d/../x`
// and an absolute path all name the same file). An output may not name an input or another
// output; an output must be a regular file or not exist (a directory, a character device such
// as /dev/null, a FIFO or a socket is refused: the writer renames a new file over its target);
// its folder must exist (or be creatable, for outputs whose folders the command creates) and
// be writable. A database output may exist (it is added to); it still may not be an input or
// another output.
#pragma once

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "kernels/file_io.h"

namespace mactune {

enum class Output {
  file,            // a file replaced as a whole (AtomicFile): its folder must exist
  file_mkdir,      // the same, but the command creates its folder (tune's outputs)
  database,        // an SQLite database created or added to in place: its folder must exist
  database_mkdir,  // the same, but the command creates its folder (tune's database)
  directory,       // a folder the command creates and writes files into (tune's report)
};

namespace detail {

// `path` resolved for comparison: the real path of the deepest folder that exists, plus the
// rest lexically ("." and ".." folded). A final symlink that resolves is followed.
inline std::string resolved_path(const std::string& path, int links = 0) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  // A symlink to a file that does not exist yet: SQLite would create the database at its
  // target, so the target is what it names.
  struct stat lst {};
  if (links < 16 && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n > 0) {
      std::string target(buf, static_cast<std::size_t>(n));
      if (target.front() != '/') {
        const auto slash = path.find_last_of('/');
        if (slash != std::string::npos) target = path.substr(0, slash + 1) + target;
      }
      return resolved_path(target, links + 1);
    }
  }
  // Does not exist (yet): resolve the folder, keep the name.
  std::string head = path, tail;
  while (!head.empty()) {
    while (head.size() > 1 && head.back() == '/') head.pop_back();
    const auto slash = head.find_last_of('/');
    const std::string name = slash == std::string::npos ? head : head.substr(slash + 1);
    tail = tail.empty() ? name : name + "/" + tail;
    head = slash == std::string::npos ? std::string() : head.substr(0, slash == 0 ? 1 : slash);
    const std::string dir = head.empty() ? "." : head;
    if (::realpath(dir.c_str(), buf) != nullptr) {
      std::string out = buf;
      std::string part;
      std::vector<std::string> parts;
      for (std::size_t i = 0; i <= tail.size(); ++i) {
        if (i == tail.size() || tail[i] == '/') {
          if (part == "..") {
            if (!parts.empty()) parts.pop_back();
          } else if (!part.empty() && part != ".") {
            parts.push_back(part);
          }
          part.clear();
        } else {
          part += tail[i];
        }
      }
      for (const std::string& p : parts) out += (out == "/" ? "" : "/") + p;
      return out;
    }
    if (head == "/") break;
  }
  return path;
}

// The folder `path` would be created in: everything before its last component ("." if none).
inline std::string folder_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

}  // namespace detail

class OutputPaths {
 public:
  // A file the command reads. `what` names it in messages ("spec", "trace"); `flag` is the
  // option that gave it ("--db"), or empty for a positional argument. An empty path is skipped.
  OutputPaths& input(const std::string& path, std::string what, std::string flag = "") {
    if (!path.empty()) entries_.push_back({path, std::move(what), std::move(flag), false, {}});
    return *this;
  }
  // A file (or folder) the command writes. An empty path is skipped (the output is off).
  OutputPaths& output(const std::string& path, std::string what, std::string flag = "",
                      Output kind = Output::file) {
    if (!path.empty()) entries_.push_back({path, std::move(what), std::move(flag), true, kind});
    return *this;
  }
  // A file the report folder `dir` will hold (tune's report.md, charts): an input or output
  // there under that name is refused like one named directly.
  OutputPaths& inside(const std::string& dir, const std::string& name, std::string what) {
    if (!dir.empty())
      entries_.push_back({dir + "/" + name, std::move(what), "", true, Output::file_mkdir, true});
    return *this;
  }

  // Throws InputError (one line) for the first path that breaks the rule.
  void check() const {
    std::vector<Resolved> r;
    r.reserve(entries_.size());
    for (const Entry& e : entries_) r.push_back(resolve(e));
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].output && !entries_[i].derived) check_output(entries_[i], r[i]);
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (!entries_[i].output) continue;
      for (std::size_t j = 0; j < entries_.size(); ++j) {
        const bool both_out = entries_[j].output;
        if (i == j || (both_out && j < i) || (entries_[i].derived && entries_[j].derived)) continue;
        if (!same(r[i], r[j])) continue;
        // The writer named is the later output (the option added last), and an option the
        // user gave rather than a file of a report folder.
        const bool j_writes = both_out && !entries_[j].derived;
        const Entry& w = j_writes ? entries_[j] : entries_[i];
        const Entry& o = j_writes ? entries_[i] : entries_[j];
        input_error("cannot write ", w.what, " '", w.path, "'", flag_text(w), ": it is ",
                    both_out ? "also the " : "the ", o.what, " '", o.path, "'", flag_text(o),
                    both_out ? " (two outputs of one command must be different files)"
                             : ", an input of this command; give another path");
      }
    }
  }

 private:
  struct Entry {
    std::string path, what, flag;
    bool output = false;
    Output kind = Output::file;
    bool derived = false;  // a file inside a report folder
  };
  struct Resolved {
    std::string real;
    bool exists = false;
    struct stat st {};
  };

  static Resolved resolve(const Entry& e) {
    Resolved r;
    r.real = detail::resolved_path(e.path);
    r.exists = ::stat(e.path.c_str(), &r.st) == 0;
    return r;
  }
  static bool same(const Resolved& a, const Resolved& b) {
    if (a.exists && b.exists) return a.st.st_dev == b.st.st_dev && a.st.st_ino == b.st.st_ino;
    return a.real == b.real;
  }
  static std::string flag_text(const Entry& e) {
    return e.flag.empty() ? std::string() : " (" + e.flag + ")";
  }

  static void check_output(const Entry& e, const Resolved& r) {
    const std::string& what = e.what;
    if (e.kind == Output::directory) {
      MACTUNE_REQUIRE(!r.exists || S_ISDIR(r.st.st_mode), "cannot write ", what, " '", e.path, "'",
                      flag_text(e), ": it is ", detail::file_kind(r.st.st_mode),
                      ", not a directory; give a folder for it");
      if (r.exists) {
        MACTUNE_REQUIRE(::access(e.path.c_str(), W_OK | X_OK) == 0, "cannot write ", what, " '",
                        e.path, "'", flag_text(e), ": ", detail::errno_text(errno));
        return;
      }
    } else {
      check_output_path(e.path, what);  // its messages as before: no flag
    }
    if (r.exists) return;  // a regular file (or a database) replaced or added to in place
    // A new file: its folder must exist (or, for outputs whose folders are created, the
    // deepest folder that exists must be a writable directory).
    std::string dir = detail::folder_of(e.path);
    const bool creates = e.kind != Output::file && e.kind != Output::database;
    struct stat st {};
    while (::stat(dir.c_str(), &st) != 0) {
      if (!creates || errno != ENOENT)
        input_error("cannot write ", what, " '", e.path, "'", flag_text(e), ": folder '", dir,
                    errno == ENOENT ? "' does not exist" : "': " + detail::errno_text(errno));
      const std::string up = detail::folder_of(dir);
      if (up == dir) break;
      dir = up;
    }
    MACTUNE_REQUIRE(S_ISDIR(st.st_mode), "cannot write ", what, " '", e.path, "'", flag_text(e),
                    ": '", dir, "' is ", detail::file_kind(st.st_mode), ", not a folder");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      input_error("cannot write ", what, " '", e.path, "'", flag_text(e), ": folder '", dir,
                  "': ", detail::errno_text(errno));
  }

  std::vector<Entry> entries_;
};

}  // namespace mactune
