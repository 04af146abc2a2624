#include "measure.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "xfer/sha256.h"
#include "xfer/sysfs.h"

namespace bench {
namespace {

double tv_s(const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; }

// utime + stime (clock ticks) and parent of a process, from /proc/PID/stat.
bool stat_of(pid_t pid, double* cpu_s, pid_t* ppid, unsigned long* flags = nullptr) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return false;
  size_t close = s.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return false;
  std::istringstream in(s.substr(close + 2));
  std::string state;
  long long pp = 0, skip = 0, ut = 0, st = 0;
  unsigned long fl = 0;
  in >> state >> pp;
  for (int i = 0; i < 4; ++i) in >> skip;  // pgrp .. tpgid
  in >> fl;
  for (int i = 0; i < 4; ++i) in >> skip;  // minflt .. cmajflt
  in >> ut >> st;
  if (!in) return false;
  *cpu_s = double(ut + st) / double(sysconf(_SC_CLK_TCK));
  *ppid = pid_t(pp);
  if (flags) *flags = fl;
  return true;
}

// CPU seconds of every process in /proc that pick(pid, ppid, flags) accepts.
template <class Pick>
std::map<pid_t, double> cpu_by_pid(Pick pick) {
  std::map<pid_t, double> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    pid_t pid = pid_t(atoi(e->d_name));
    if (pid <= 0) continue;
    double cpu = 0;
    pid_t ppid = 0;
    unsigned long flags = 0;
    if (stat_of(pid, &cpu, &ppid, &flags) && pick(pid, ppid, flags)) out[pid] = cpu;
  }
  closedir(d);
  return out;
}

bool is_kernel_thread(pid_t, pid_t, unsigned long flags) {
  constexpr unsigned long kPfKthread = 0x00200000;  // include/linux/sched.h
  return (flags & kPfKthread) != 0;
}

}  // namespace

pid_t spawn_logged(const std::vector<std::string>& argv, const std::string& log_prefix) {
  pid_t pid = fork();
  if (pid == 0) {
    int out = open((log_prefix + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open((log_prefix + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);
    exec_argv(argv);
  }
  return pid;
}

void exec_argv(const std::vector<std::string>& argv) {
  std::vector<char*> av;
  for (auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  execvp(av[0], av.data());
  _exit(127);
}

Exec run_measured(const std::vector<std::string>& argv, const std::string& log_prefix, double timeout_s,
                  const std::function<void()>& tick) {
  Exec e;
  rusage ru{};
  xfer::SysFs cpus("/sys/devices/system/cpu");
  auto online_list = [&] {
    auto s = cpus.read("online");
    return s ? xfer::parse_cpu_list(*s) : std::vector<int>();
  };
  auto online = [&] { return double(online_list().size()); };
  const std::vector<int> online_at_start = online_list();
  auto t0 = std::chrono::steady_clock::now(), last = t0;
  double cores = online();
  auto integrate = [&](std::chrono::steady_clock::time_point now) {
    e.core_s += cores * std::chrono::duration<double>(now - last).count();
    last = now;
    cores = online();
  };
  pid_t pid = spawn_logged(argv, log_prefix);
  int st = 0;
  for (;;) {
    pid_t r = wait4(pid, &st, WNOHANG, &ru);
    if (r == pid || r < 0) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(timeout_s)) {
      kill(pid, SIGKILL);
      wait4(pid, &st, 0, &ru);
      break;
    }
    if (tick) tick();
    auto now = std::chrono::steady_clock::now();
    if (now - last >= std::chrono::milliseconds(50)) integrate(now);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto end = std::chrono::steady_clock::now();
  integrate(end);
  e.wall_s = std::chrono::duration<double>(end - t0).count();
  e.cpu_s = tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
  e.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::vector<int> now_online = online_list();
  for (int c : online_at_start) {
    if (std::find(now_online.begin(), now_online.end(), c) != now_online.end()) continue;
    try {
      cpus.write("cpu" + std::to_string(c) + "/online", "1");
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "xfer-bench: cpu%d stays offline: %s\n", c, ex.what());
    }
    e.cores_restored.push_back(c);
  }
  return e;
}

double process_tree_cpu_s(pid_t root) {
  double total = 0;
  for (const auto& [pid, cpu] :
       cpu_by_pid([root](pid_t pid, pid_t ppid, unsigned long) { return pid == root || ppid == root; }))
    total += cpu;
  return total;
}

std::map<pid_t, double> kernel_threads_cpu() { return cpu_by_pid(is_kernel_thread); }

double kernel_threads_cpu_since(const std::map<pid_t, double>& before) {
  double total = 0;
  for (const auto& [pid, cpu] : kernel_threads_cpu()) {
    auto it = before.find(pid);
    // A thread started since (or a pid reused) counts whole.
    total += it != before.end() && it->second <= cpu ? cpu - it->second : cpu;
  }
  return total;
}

size_t verify_files(const std::string& dir, const std::vector<ExpectedFile>& want, uint64_t* bytes) {
  size_t ok = 0;
  *bytes = 0;
  for (const auto& f : want) {
    int fd = open((dir + "/" + f.name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    try {
      if (xfer::sha256_fd(fd, f.name) == f.sha256) {
        ++ok;
        *bytes += f.size;
      }
    } catch (const std::exception&) {
    }
    close(fd);
  }
  return ok;
}

}  // namespace bench
