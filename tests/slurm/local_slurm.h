// A real single-node Slurm for tests: munged, slurmctld and slurmd (Debian's munge and
// slurm-wlm packages) started on localhost from a configuration written to a temporary folder,
// and stopped again by the destructor. Nothing outside that folder is used: a private munge
// key and socket, state and spool directories, logs, and free ports. One CPU node with this
// machine's cores (`slurmd -C`); no cgroup plugins (proctrack/linuxproc, task/none), so it
// runs in a container too.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace mactune::test_slurm {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The last `lines` lines of a file, for messages.
inline std::string tail(const std::string& path, int lines = 8) {
  const std::string s = slurp(path);
  std::size_t at = s.size();
  for (int n = 0; n <= lines && at > 0;) {
    at = s.rfind('\n', at - 1);
    if (at == std::string::npos) {
      at = 0;
      break;
    }
    ++n;
  }
  std::string t = s.substr(at == 0 ? 0 : at + 1);
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.empty() ? "(empty)" : t;
}

struct Ran {
  int rc = -1;
  std::string out, err;
};

// Runs a program found on PATH with stdout and stderr captured to files under `scratch`; kills
// it after `timeout_s`. rc 127: not found.
inline Ran run_program(const std::vector<std::string>& args, const std::string& scratch,
                       double timeout_s = 60) {
  static int serial = 0;
  const std::string tag =
      scratch + "/run-" + std::to_string(getpid()) + "-" + std::to_string(++serial);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, (tag + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, 2, (tag + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  Ran r;
  const int e = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e != 0) {
    r.rc = 127;
    r.err = args[0] + ": " + std::strerror(e);
    return r;
  }
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(timeout_s)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.rc =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = slurp(tag + ".out");
  r.err = slurp(tag + ".err");
  std::remove((tag + ".out").c_str());
  std::remove((tag + ".err").c_str());
  return r;
}

inline bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  for (std::size_t at = 0; at <= p.size();) {
    const std::size_t end = std::min(p.find(':', at), p.size());
    const std::string dir = p.substr(at, end - at);
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    at = end + 1;
  }
  return false;
}

// A TCP port nobody listens on now (bound, read, released: the daemons bind it right after).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

class LocalSlurm {
 public:
  LocalSlurm() = default;
  LocalSlurm(const LocalSlurm&) = delete;
  LocalSlurm& operator=(const LocalSlurm&) = delete;
  ~LocalSlurm() { stop(); }

  // Starts the three daemons and waits (up to `timeout_s`) until the node is idle. On failure
  // returns false and `why` says exactly what failed (the daemon, and the end of its log).
  bool start(std::string* why, double timeout_s = 30) {
    for (const char* p : {"munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo"})
      if (!on_path(p)) {
        *why = std::string(p) +
               " is not on PATH (Debian: apt-get install munge slurmctld slurmd slurm-client; "
               "scripts/setup.sh ci installs them)";
        return false;
      }
    std::string tmpl = (std::filesystem::temp_directory_path() / "mactune-slurm-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      *why = "cannot create a temporary folder";
      return false;
    }
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // jobs run as this user; slurmd reads the spool
    for (const char* d : {"munge", "state", "spool", "log"})
      std::filesystem::create_directories(dir_ + "/" + d);
    chmod((dir_ + "/munge").c_str(), 0700);
    {
      std::random_device rd;
      std::ofstream key(dir_ + "/munge/munge.key", std::ios::binary);
      for (int i = 0; i < 1024; ++i) key.put(static_cast<char>(rd() & 0xff));
    }
    chmod((dir_ + "/munge/munge.key").c_str(), 0400);
    const std::string socket = dir_ + "/munge/munge.socket";
    munged_ = spawn(
        {"munged", "--foreground", "--force", "--socket=" + socket,
         "--key-file=" + dir_ + "/munge/munge.key", "--pid-file=" + dir_ + "/munge/munged.pid",
         "--log-file=" + dir_ + "/munge/munged.log", "--seed-file=" + dir_ + "/munge/munged.seed"},
        dir_ + "/log/munged.out");
    if (!wait_for([&] { return std::filesystem::exists(socket); }, 10)) {
      *why = "munged did not create its socket within 10 s: " + tail(dir_ + "/log/munged.out") +
             " | " + tail(dir_ + "/munge/munged.log");
      return false;
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    host_ = std::string(host).substr(0, std::string(host).find('.'));
    // This machine's real layout, so slurmd registers without a mismatch.
    const Ran c = run_program({"slurmd", "-C"}, dir_, 20);
    std::string node = c.out.substr(0, c.out.find('\n'));
    if (c.rc != 0 || node.rfind("NodeName=", 0) != 0)
      node = "NodeName=" + host_ + " CPUs=" + std::to_string(std::thread::hardware_concurrency());
    node = "NodeName=" + host_ + node.substr(node.find(' '));
    const int ctld_port = free_port(), slurmd_port = free_port();
    const uid_t uid = geteuid();
    const std::string user = uid == 0 ? "root" : std::to_string(uid);
    std::ofstream conf(dir_ + "/slurm.conf");
    conf << "ClusterName=mactune-test\n"
         << "SlurmctldHost=" << host_ << "(127.0.0.1)\n"
         << "SlurmUser=" << user << "\nSlurmdUser=" << user << "\n"
         << "SlurmctldPort=" << ctld_port << "\nSlurmdPort=" << slurmd_port << "\n"
         << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << socket << "\n"
         << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool\n"
         << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\n"
         << "SlurmdPidFile=" << dir_ << "/slurmd.pid\n"
         << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\n"
         << "SlurmdLogFile=" << dir_ << "/log/slurmd.log\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
         << "JobAcctGatherType=jobacct_gather/none\n"
         << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
         << "MpiDefault=none\nReturnToService=2\nKillWait=5\n"
         << "SlurmdParameters=config_overrides\n"
         << node << " NodeAddr=127.0.0.1 State=UNKNOWN\n"
         << "PartitionName=" << partition() << " Nodes=" << host_
         << " Default=YES MaxTime=INFINITE State=UP\n";
    conf.close();
    // A test run inside a job of another Slurm (a developer on a cluster) must not hand that
    // job's settings to this cluster's commands.
    std::vector<std::string> inherited;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      for (const char* prefix : {"SLURM_", "SBATCH_", "SQUEUE_", "SRUN_", "SALLOC_"})
        if (kv.rfind(prefix, 0) == 0) inherited.push_back(kv.substr(0, kv.find('=')));
    }
    for (const auto& name : inherited) unsetenv(name.c_str());
    setenv("SLURM_CONF", (dir_ + "/slurm.conf").c_str(), 1);
    ctld_ = spawn({"slurmctld", "-D", "-i"}, dir_ + "/log/slurmctld.out");
    slurmd_ = spawn({"slurmd", "-D", "-N", host_}, dir_ + "/log/slurmd.out");
    const bool idle = wait_for(
        [&] {
          const Ran r = run_program({"sinfo", "-h", "-o", "%t", "-n", host_}, dir_, 5);
          return r.rc == 0 && r.out.rfind("idle", 0) == 0;
        },
        timeout_s);
    if (!idle) {
      *why = "the node did not become idle within " + std::to_string(int(timeout_s)) +
             " s; slurmctld: " + tail(dir_ + "/log/slurmctld.log", 4) + " " +
             tail(dir_ + "/log/slurmctld.out", 2) +
             " | slurmd: " + tail(dir_ + "/log/slurmd.log", 4) + " " +
             tail(dir_ + "/log/slurmd.out", 2);
      return false;
    }
    return true;
  }

  // Stops slurmd, slurmctld and munged (SIGTERM, then SIGKILL after 10 s) and removes the
  // folder (kept when MACTUNE_KEEP_SLURM is set). Only the processes this object started.
  void stop() {
    for (pid_t* p : {&slurmd_, &ctld_, &munged_}) {
      if (*p <= 0) continue;
      kill(*p, SIGTERM);
      int status = 0;
      const auto t0 = std::chrono::steady_clock::now();
      while (waitpid(*p, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
          kill(*p, SIGKILL);
          waitpid(*p, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      *p = 0;
    }
    if (!dir_.empty() && !std::getenv("MACTUNE_KEEP_SLURM")) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    dir_.clear();
  }

  std::string partition() const { return "debug"; }
  const std::string& dir() const { return dir_; }
  const std::string& host() const { return host_; }
  // Slurm's commands, with their output captured.
  Ran command(const std::vector<std::string>& args, double timeout_s = 30) const {
    return run_program(args, dir_, timeout_s);
  }
  // The logs, for a failure message.
  std::string logs() const {
    return "slurmctld.log: " + tail(dir_ + "/log/slurmctld.log", 12) +
           "\nslurmd.log: " + tail(dir_ + "/log/slurmd.log", 12);
  }

  template <class Pred>
  static bool wait_for(Pred done, double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!done()) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(timeout_s))
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

 private:
  // A daemon in the foreground, as a child of this process that dies with it (a test killed
  // by its timeout leaves no daemon behind).
  static pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      const int in = open("/dev/null", O_RDONLY);
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(126);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    return pid < 0 ? 0 : pid;
  }

  std::string dir_, host_;
  pid_t munged_ = 0, ctld_ = 0, slurmd_ = 0;
};

}  // namespace mactune::test_slurm
