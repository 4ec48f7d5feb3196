// Files the user names: one reader that refuses what is not a regular file (a directory, a FIFO,
// /dev/zero) or is larger than a cap before it reads a byte, and one writer that writes a
// temporary beside the target, flushes it to disk and renames it over the target, removing the
// temporary on every failure. Every writer of an output file (dispatch tables and headers,
// reports, schedules, JSON, scripts, exports) goes through AtomicFile, so a failed or
// interrupted write leaves the old file or none, never half a file or a stray temporary.
// Both throw InputError with one line naming the file and the condition.
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kernels/error.h"
#include "kernels/one_line.h"

namespace mactune {

namespace detail {

// strerror() in the lower case of the rest of a message, with the conditions users hit named
// plainly.
inline std::string errno_text(int err) {
  switch (err) {
    case ENOSPC:
      return "no space left on device (disk full)";
    case EDQUOT:
      return "disk quota exceeded";
    case ENAMETOOLONG:
      return "file name too long";
    case EACCES:
    case EPERM:
      return "permission denied";
    case EROFS:
      return "read-only file system";
    case ENOENT:
      return "no such file or directory";
    case ENOTDIR:
      return "a component of the path is not a directory";
    case EISDIR:
      return "it is a directory";
    case EFBIG:  // SIGXFSZ is ignored (install_signal_cleanup): the write fails instead
      return "file too large (the file size limit, ulimit -f, was reached; as on a full disk)";
    default:
      break;
  }
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

inline std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

inline std::string bytes_text(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1ull << 20)) return std::to_string(b >> 20) + " MiB";
  if (b >= (1ull << 10)) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " bytes";
}

// The last component of `path` (after the last '/').
inline std::string_view base_name(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Names `path` longer than the file system allows before any system call fails with a vaguer
// error somewhere else (SQLite says "database is read-only" for a name that is too long).
inline void require_name_fits(const std::string& path, std::string_view what) {
  const std::string_view base = base_name(path);
  MACTUNE_REQUIRE(base.size() <= NAME_MAX, "cannot write ", what, " '", path,
                  "': file name too long (", base.size(), " characters; at most ", NAME_MAX, ")");
  MACTUNE_REQUIRE(path.size() < PATH_MAX, "cannot write ", what, " '", clip(path, 64),
                  "': path too long (", path.size(), " characters; at most ", PATH_MAX - 1, ")");
}

}  // namespace detail

// Reads the whole file at `path`, a `what` (e.g. "spec") of at most `max_bytes`. Refuses,
// before opening it, anything but a regular file, and a file over the cap; opens with
// O_NONBLOCK, so a FIFO swapped in after the check cannot block the open.
inline std::string read_input_file(const std::string& path, std::string_view what,
                                   std::uint64_t max_bytes) {
  MACTUNE_REQUIRE(!path.empty(), "the ", what, " path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    input_error(path, ": cannot read the ", what, ": ", detail::errno_text(errno));
  MACTUNE_REQUIRE(S_ISREG(st.st_mode), path, ": cannot read the ", what, ": it is ",
                  detail::file_kind(st.st_mode), ", not a regular file");
  const auto cap_message = [&] {
    return detail::concat(path, ": the ", what, " is larger than ", detail::bytes_text(max_bytes),
                          "; is it the right file?");
  };
  MACTUNE_REQUIRE(static_cast<std::uint64_t>(st.st_size) <= max_bytes, cap_message());
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) input_error(path, ": cannot read the ", what, ": ", detail::errno_text(errno));
  struct stat fst {};
  if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
    ::close(fd);
    input_error(path, ": cannot read the ", what, ": not a regular file");
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      input_error(path, ": cannot read the ", what, ": ", detail::errno_text(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {  // it grew after the stat
      ::close(fd);
      input_error(cap_message());
    }
  }
  ::close(fd);
  return text;
}

// ---- Temporaries removed on SIGINT / SIGTERM / SIGHUP.
//
// Every temporary a writer creates beside its target (AtomicFile's, a merge's new database and
// its -wal/-shm/-journal) is registered here for as long as it may exist. The signal handler
// that install_signal_cleanup() sets unlinks every registered path (unlink is
// async-signal-safe; the slots are fixed arrays, so the handler allocates nothing), then
// restores the default action and raises the signal again: the process still ends the way the
// signal says (130, 143), and only SIGKILL can leave a temporary behind.
namespace detail {

struct TemporarySlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 a live file, 3 a live folder
  char path[PATH_MAX] = {};
};
inline constexpr int kTemporarySlots = 64;
inline TemporarySlot g_temporaries[kTemporarySlots];

inline void unlink_temporaries() noexcept {
  for (TemporarySlot& s : g_temporaries)  // files first, then the (emptied) folders
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  for (TemporarySlot& s : g_temporaries)
    if (s.state.load(std::memory_order_acquire) == 3) ::rmdir(s.path);
}

extern "C" inline void mactune_remove_temporaries_and_reraise(int sig) {
  const int saved = errno;
  unlink_temporaries();
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // delivered when the handler returns (the signal is blocked inside it)
  errno = saved;
}

}  // namespace detail

// A registered temporary: unlinked by the signal handler while registered. Registration must
// happen before the file is created, so that no signal falls between the two.
class TemporaryName {
 public:
  TemporaryName() = default;
  // `folder`: an empty scratch folder, removed (rmdir) after every registered file.
  explicit TemporaryName(const std::string& path, bool folder = false) {
    if (path.size() >= PATH_MAX) return;
    for (int i = 0; i < detail::kTemporarySlots; ++i) {
      int expected = 0;
      detail::TemporarySlot& s = detail::g_temporaries[i];
      if (!s.state.compare_exchange_strong(expected, 1)) continue;
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(folder ? 3 : 2, std::memory_order_release);
      slot_ = i;
      return;
    }
  }
  TemporaryName(const TemporaryName&) = delete;
  TemporaryName& operator=(const TemporaryName&) = delete;
  TemporaryName(TemporaryName&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }
  TemporaryName& operator=(TemporaryName&& o) noexcept {
    if (this != &o) {
      release();
      slot_ = o.slot_;
      o.slot_ = -1;
    }
    return *this;
  }
  ~TemporaryName() { release(); }
  // The file was renamed or removed: the handler must not unlink the name any more.
  void release() noexcept {
    if (slot_ >= 0) detail::g_temporaries[slot_].state.store(0, std::memory_order_release);
    slot_ = -1;
  }

 private:
  int slot_ = -1;
};

// Sets the cleanup handler for SIGINT, SIGTERM and SIGHUP (not for a signal the parent set to
// be ignored, e.g. nohup's SIGHUP), and ignores SIGXFSZ so that a write past the file size
// limit (ulimit -f) fails with EFBIG and is reported like a full disk instead of killing the
// process without a word. Called once by the CLI's main(); a command with a handler of its own
// (tune, profile) puts this one back with restore_signal_cleanup(sig).
inline void install_signal_cleanup() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::signal(sig, detail::mactune_remove_temporaries_and_reraise);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}
inline void restore_signal_cleanup(int sig) {
  ::signal(sig, detail::mactune_remove_temporaries_and_reraise);
}

// Refuses an output path that cannot name a file: empty, a directory, a name too long. Called
// by AtomicFile, and by commands before they spend minutes computing what they would write.
// `flag`: the option that named it ("-o"), shown after the path when given.
inline void check_output_path(const std::string& path, std::string_view what,
                              std::string_view flag = {}) {
  MACTUNE_REQUIRE(!path.empty(), "the ", what, " path is empty");
  const std::string named =
      "'" + path + "'" + (flag.empty() ? std::string() : " (" + std::string(flag) + ")");
  MACTUNE_REQUIRE(path.back() != '/', "cannot write ", what, " ", named,
                  ": it names a directory; give a file path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    input_error("cannot write ", what, " ", named, ": it is a directory; give a file path");
  // A new file is renamed over an output: over /dev/null, a FIFO or a socket that would
  // replace the device (as root) or cut off its reader; such paths are refused, never written.
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    input_error("cannot write ", what, " ", named, ": it is ", detail::file_kind(st.st_mode),
                ", not a regular file (an output is replaced by a new file renamed over it); "
                "give a file path");
  detail::require_name_fits(path, what);
}

// An output file written through a temporary beside it:
//   AtomicFile f(path, "dispatch table"); f.write(text); f.commit();
// The destructor removes the temporary unless commit() renamed it over `path`.
class AtomicFile {
 public:
  // `mode`: the permissions of the file (0755 for a script), less the umask.
  AtomicFile(std::string path, std::string_view what, mode_t mode = 0644)
      : path_(std::move(path)), what_(what) {
    check_output_path(path_, what_);
    static std::atomic<int> serial{0};
    const std::string_view base = detail::base_name(path_);
    const std::string dir = path_.substr(0, path_.size() - base.size());
    const std::string tag = std::to_string(::getpid()) + "." + std::to_string(++serial);
    // A temporary named after its target, unless that name would be too long.
    tmp_ = base.size() + tag.size() + 6 <= NAME_MAX ? dir + "." + std::string(base) + ".tmp" + tag
                                                    : dir + ".mactune.tmp" + tag;
    registered_ = TemporaryName(tmp_);  // before it exists: a signal cannot fall between
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd_ < 0) fail(errno);
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() { discard(); }

  void write(std::string_view text) {
    while (!text.empty()) {
      const ssize_t n = ::write(fd_, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(errno);
      text.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Flushes the temporary to disk and renames it over the target.
  void commit() {
    if (::fsync(fd_) != 0 && errno != EINVAL) fail(errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(errno);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(errno);
    registered_.release();
    tmp_.clear();
  }

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(int err) {
    discard();
    input_error("cannot write ", what_, " '", path_, "': ", detail::errno_text(err));
  }
  void discard() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    registered_.release();
    tmp_.clear();
  }

  std::string path_, what_, tmp_;
  TemporaryName registered_;
  int fd_ = -1;
};

// Writes `text` to `path` through an AtomicFile.
inline void write_file_atomically(const std::string& path, std::string_view text,
                                  std::string_view what, mode_t mode = 0644) {
  AtomicFile f(path, what, mode);
  f.write(text);
  f.commit();
}

}  // namespace mactune
