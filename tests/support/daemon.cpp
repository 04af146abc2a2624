#include "daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fixture.h"

namespace fs = std::filesystem;

namespace xtest {

PrivateBus::PrivateBus() {
  dir_ = make_temp_dir("bus");
  // The same bus the README's main job uses where there is no system bus.
  if (sh(std::string("bash ") + XFER_SOURCE_DIR + "/scripts/private-bus.sh start " + dir_ + " >/dev/null") != 0)
    throw std::runtime_error("dbus-daemon did not start with " + dir_ + "/bus.conf");
  address = "unix:path=" + dir_ + "/socket";
  setenv("DBUS_SYSTEM_BUS_ADDRESS", address.c_str(), 1);
  reaper_ = std::make_unique<StopIfTestDies>(std::string("bash ") + XFER_SOURCE_DIR + "/scripts/private-bus.sh stop " + dir_);
}

PrivateBus::~PrivateBus() {
  sh(std::string("bash ") + XFER_SOURCE_DIR + "/scripts/private-bus.sh stop " + dir_);
  fs::remove_all(dir_);
}

Xferd::Xferd(const std::string& config) {
  dir = make_temp_dir("xferd");
  state_dir = dir + "/state";
  config_file = dir + "/xferd.conf";
  config_dir = dir + "/xferd.conf.d";
  log_file = dir + "/xferd.log";
  fs::create_directories(config_dir);
  std::ofstream(config_file) << config;
  notify_path_ = dir + "/notify";
  notify_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, notify_path_.c_str(), sizeof sa.sun_path - 1);
  if (bind(notify_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    throw std::runtime_error("bind " + notify_path_ + ": " + strerror(errno));
  start_reader();
}

void Xferd::start_reader() {
  reader_ = std::thread([this] {
    while (!stop_reader_) {
      pollfd p{notify_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(notify_fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      std::istringstream in(std::string(buf, size_t(n)));
      std::lock_guard<std::mutex> g(mu_);
      for (std::string l; std::getline(in, l);) notes_.push_back(l);
    }
  });
}

Xferd::~Xferd() {
  if (pid_ > 0) stop();
  stop_reader_ = true;
  reader_.join();
  if (notify_fd_ >= 0) close(notify_fd_);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
  else std::cerr << "xferd's files kept in " << dir << "\n";
}

bool Xferd::to_journal = false;

void Xferd::start() {
  {
    std::lock_guard<std::mutex> g(mu_);
    start_mark_ = notes_.size();
  }
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("NOTIFY_SOCKET", notify_path_.c_str(), 1);
    setenv("WATCHDOG_USEC", "2000000", 1);
    unsetenv("JOURNAL_STREAM");
    unsetenv("INVOCATION_ID");
    if (to_journal) setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef", 1);  // as under systemd
    std::string b = bin("xferd");
    execl(b.c_str(), b.c_str(), "--config", config_file.c_str(), "--config-dir", config_dir.c_str(), "--state-dir",
          state_dir.c_str(), "--log-level", "info", (char*)nullptr);
    _exit(127);
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    std::vector<std::string> n = notifications(200);
    for (size_t i = start_mark_; i < n.size(); ++i)
      if (n[i] == "READY=1") return;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL() << "xferd exited before READY=1:\n" << log();
    }
  }
  FAIL() << "xferd did not say READY=1 in 30 s:\n" << log();
}

void Xferd::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

void Xferd::kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

std::vector<std::string> Xferd::notifications(int wait_ms) {
  if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  std::lock_guard<std::mutex> g(mu_);
  return notes_;
}

std::string Xferd::log() const {
  std::ifstream in(log_file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string as_nobody(const std::string& cmd) { return "setpriv --reuid 65534 --regid 65534 --clear-groups " + cmd; }

Shell run(const std::string& cmd) {
  Shell r;
  std::string out = make_temp_dir("out") + "/out";
  r.status = sh(cmd + " >" + out + " 2>&1");
  std::ifstream in(out);
  std::stringstream s;
  s << in.rdbuf();
  r.out = s.str();
  fs::remove_all(fs::path(out).parent_path());
  return r;
}

std::string job_property(const std::string& path, const std::string& prop) {
  Shell r = run("busctl get-property org.xferd.Xferd1 " + path + " org.xferd.Job1 " + prop);
  std::string v = r.out;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  size_t sp = v.find(' ');
  v = sp == std::string::npos ? v : v.substr(sp + 1);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

uint64_t Xferd::rss_bytes(const char* field) const {
  std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field))) * 1024;  // "NNN kB"
  return 0;
}

double Xferd::cpu_seconds() const {
  std::ifstream st("/proc/" + std::to_string(pid_) + "/stat");
  std::string line;
  std::getline(st, line);
  if (line.rfind(')') == std::string::npos) return 0;
  std::istringstream in(line.substr(line.rfind(')') + 2));
  std::string field;
  long ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stol(field);  // utime, stime
  return double(ticks) / double(sysconf(_SC_CLK_TCK));
}

}  // namespace xtest
