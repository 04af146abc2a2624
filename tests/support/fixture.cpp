#include "fixture.h"

#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <cstring>
#include <ftw.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "testbed.h"
#include "xfer/sha256.h"
#include "xfer/tuner.h"

namespace fs = std::filesystem;

namespace xtest {

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

// The temporary directories this test process made, removed when it exits
// (a passing or failing test alike; XFER_KEEP_TEST_DIRS=1 keeps them to
// look at). Only the process that made them removes them: a forked child
// that exits leaves them to its parent. The walk stays on the directory's
// own file system and does not follow links, so nothing a test mounted or
// linked inside is reached.
struct TempDirs {
  pid_t owner = getpid();
  std::mutex mu;  // tests make directories from several threads (run() in parallel callers)
  std::vector<std::string> dirs;
  ~TempDirs() {
    if (getpid() != owner || getenv("XFER_KEEP_TEST_DIRS")) return;
    for (const auto& d : dirs) nftw(d.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  }
};
TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}

}  // namespace

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("xfer-" + tag + "-XXXXXX")).string();
  char* p = mkdtemp(tmpl.data());
  if (!p) throw std::runtime_error("mkdtemp failed");
  {
    TempDirs& t = temp_dirs();
    std::lock_guard<std::mutex> lock(t.mu);
    t.dirs.push_back(p);
  }
  fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                         fs::perms::others_read | fs::perms::others_exec);
  return p;
}

void isolate_network() {
  static bool done = false;
  if (done) return;
  if (unshare(CLONE_NEWNET) != 0) throw std::runtime_error(std::string("unshare(CLONE_NEWNET): ") + strerror(errno));
  if (sh("ip link set lo up mtu 1500") != 0) throw std::runtime_error("cannot bring up loopback in the test namespace");
  done = true;
}

void set_link_rate(int mbit) {
  isolate_network();
  if (mbit <= 0) {
    sh("tc qdisc del dev lo root 2>/dev/null");
    return;
  }
  std::string cmd = "tc qdisc replace dev lo root tbf rate " + std::to_string(mbit) + "mbit burst 64kb latency 50ms";
  if (sh(cmd) != 0) throw std::runtime_error("tc failed: " + cmd);
}

int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

int sh(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string bin(const std::string& name) { return std::string(XFER_BIN_DIR) + "/" + name; }

Nginx::Nginx(const std::string& data_dir, const std::string& rate, std::vector<TlsSite> sites,
             std::function<void(Nginx&)> prepare)
    : tls(std::move(sites)) {
  run = make_temp_dir("nginx");
  for (int attempt = 0; attempt < 5; ++attempt) {
    h1 = free_port();
    h2 = free_port();
    fs::create_directories(run + "/sites.d");
    std::ofstream conf(run + "/sites.d/tls.conf", std::ios::trunc);
    for (TlsSite& s : tls) {
      s.port = free_port();
      conf << "server { listen 127.0.0.1:" << s.port << " ssl" << (s.h2 ? " http2" : "") << "; ssl_certificate "
           << s.cert_file << "; ssl_certificate_key " << s.key_file << "; include " << run << "/locations.conf; }\n";
    }
    conf.close();
    fs::create_directories(run + "/locations.d");
    if (prepare) prepare(*this);
    std::string cmd = std::string("bash ") + XFER_SOURCE_DIR + "/scripts/nginx-serve.sh start " + run + " " +
                      data_dir + " " + std::to_string(h1) + " " + std::to_string(h2) + " " + rate;
    if (sh(cmd) == 0) {
      reaper_ = std::make_unique<StopIfTestDies>(std::string("bash ") + XFER_SOURCE_DIR + "/scripts/nginx-serve.sh stop " +
                                                 run);
      return;
    }
  }
  throw std::runtime_error("nginx did not start; see " + run + "/error.log");
}

StopIfTestDies::StopIfTestDies(const std::string& stop_cmd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) {
    setsid();  // out of the test's process group: a group kill does not take it
    if (devnull >= 0) dup2(devnull, 0), dup2(devnull, 1), dup2(devnull, 2);  // ctest's pipes closed
    // Nothing else of the test's held open here (its sockets, the write end
    // of this pipe and of other such pipes): the read sees EOF when the test goes.
    if (p[0] > 3) close_range(3, unsigned(p[0]) - 1, 0);
    close_range(unsigned(p[0]) + 1, ~0U, 0);
    char c = 0;
    ssize_t n;
    do n = read(p[0], &c, 1);
    while (n < 0 && errno == EINTR);
    if (n == 1) _exit(0);  // the fixture stopped it
    execl("/bin/sh", "sh", "-c", stop_cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[0]);
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    close(p[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(errno));
  }
  fd_ = p[1], pid_ = pid;
}

StopIfTestDies::~StopIfTestDies() {
  const char c = 'x';
  if (write(fd_, &c, 1) != 1) perror("StopIfTestDies: write");
  close(fd_);
  waitpid(pid_, nullptr, 0);
}

Nginx::~Nginx() {
  sh(std::string("bash ") + XFER_SOURCE_DIR + "/scripts/nginx-serve.sh stop " + run);
  fs::remove_all(run);
}

std::string Nginx::url(bool h2c, const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(h2c ? h2 : h1) + path;
}

std::vector<LogLine> Nginx::log() const {
  // nginx logs a request after it sent the response, so a client that has
  // its answer can read the log a moment before the line is written (seen
  // in CI: a 401 answered, the job over, its line not yet there). Read once
  // the file has not grown for 100 ms; a request made before the caller
  // asked has been logged by then.
  std::error_code ec;
  const std::string path = run + "/access.log";
  auto size = fs::file_size(path, ec);
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto now = fs::file_size(path, ec);
    if (now == size) break;
    size = now;
  }
  std::vector<LogLine> out;
  std::ifstream f(path);
  static const std::regex re(
      R"re(^(\S+) (\S+) (\d+) (\d+) (\S+) (\d+) (\d+) "(\S+) (\S+)[^"]*" "([^"]*)" (\d+)$)re");
  for (std::string line; std::getline(f, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    LogLine l;
    l.end_s = std::stod(m[1]);
    l.dur_s = std::stod(m[2]);
    l.conn = std::stol(m[3]);
    l.conn_requests = std::stol(m[4]);
    l.proto = m[5];
    l.status = std::stoi(m[6]);
    l.bytes = std::stoull(m[7]);
    l.method = m[8];
    l.path = m[9];
    l.range = m[10];
    l.port = std::stoi(m[11]);
    out.push_back(l);
  }
  return out;
}

void Nginx::clear_log() const {
  std::ofstream(run + "/access.log", std::ios::trunc);
}

std::string Dataset::manifest(const std::string& base, bool with_size, bool with_sha) const {
  std::string m;
  for (const auto& f : files) {
    m += base + f.name;
    if (with_size) m += " " + std::to_string(f.size);
    if (with_sha) m += " sha256:" + f.sha256;
    m += "\n";
  }
  return m;
}

std::string failure_of(const nlohmann::json& summary, const std::string& url_part) {
  for (const auto& f : summary["failed"])
    if (f["url"].get<std::string>().find(url_part) != std::string::npos) return f["reason"];
  return "";
}

Dataset dataset(int html, int image, int video, double video_scale) {
  std::string name = "h" + std::to_string(html) + "-i" + std::to_string(image) + "-v" + std::to_string(video) + "x" +
                     std::to_string(int(video_scale * 100));
  fs::path root = fs::path(XFER_BIN_DIR).parent_path() / "testdata";
  fs::create_directories(root);
  fs::permissions(root, fs::perms::all & ~fs::perms::group_write & ~fs::perms::others_write);
  fs::path dir = root / name, list = root / (name + ".list");
  Dataset d;
  d.dir = dir.string();
  if (!fs::exists(list)) {
    // Build beside, then rename: tests running in parallel never see half a dataset.
    fs::path tmp = root / (name + ".tmp" + std::to_string(getpid()));
    std::vector<xfer::GeneratedFile> all;
    auto add = [&](const char* shape, int count, double scale) {
      if (count <= 0) return;
      xfer::DatasetSpec s;
      s.shape = shape;
      s.count = count;
      s.size_scale = scale;
      auto files = xfer::write_dataset(s, tmp.string());
      all.insert(all.end(), files.begin(), files.end());
    };
    add("html", html, 1.0);
    add("image", image, 1.0);
    add("video", video, video_scale);
    std::error_code ec;
    fs::rename(tmp, dir, ec);
    if (ec) fs::remove_all(tmp);  // another process won the race
    std::string text;
    for (auto& f : all) text += f.name + " " + std::to_string(f.size) + " " + f.sha256 + "\n";
    fs::path ltmp = root / (name + ".list.tmp" + std::to_string(getpid()));
    std::ofstream(ltmp) << text;
    fs::rename(ltmp, list);
  }
  std::ifstream in(list);
  xfer::GeneratedFile f;
  while (in >> f.name >> f.size >> f.sha256) {
    d.files.push_back(f);
    d.bytes += f.size;
  }
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  return d;
}

RunResult run_job(const std::string& manifest_text, const std::string& dest, const std::string& policy,
                  xfer::ChunkParams fixed, xfer::EngineOptions opts, IntervalHook hook, double max_seconds) {
  RunResult res;
  sd_event* loop = nullptr;
  sd_event_new(&loop);
  {
    xfer::Engine engine(loop);
    xfer::RunningJobSpec spec;
    spec.algorithm = policy;
    spec.tuner.fixed = fixed;
    spec.job = xfer::Job::Spec{xfer::parse_manifest(manifest_text, "<test>"), dest, opts};
    xfer::RunningJob run(engine, std::move(spec), {});
    xfer::Job& job = run.job();
    job.on_finished = [&] { sd_event_exit(loop, 0); };
    if (hook) run.on_interval = [&](const xfer::IntervalRecord& r) { hook(run.loop(), r); };
    sd_event_source* guard = nullptr;
    sd_event_add_time_relative(
        loop, &guard, CLOCK_MONOTONIC, uint64_t(max_seconds * 1e6), 1000,
        [](sd_event_source*, uint64_t, void* ud) {
          ADD_FAILURE() << "job did not finish in time";
          static_cast<xfer::Job*>(ud)->cancel();
          return 0;
        },
        &job);
    run.start();
    if (job.state() == xfer::JobState::Discovering || job.state() == xfer::JobState::Running) sd_event_loop(loop);
    sd_event_source_disable_unref(guard);
    res.summary = run.report();
    res.state = job.state();
    res.bytes_fetched = job.progress().bytes_fetched;
  }
  sd_event_unref(loop);
  return res;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string capture(const std::string& cmd) { return bench::capture(cmd); }

pid_t start_link(const std::string& args, const std::string& out) {
  const pid_t self = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != self) _exit(1);  // the test died before the signal was asked for
    if (!freopen(out.c_str(), "w", stdout)) _exit(126);
    execl("/bin/sh", "sh", "-c", ("exec " + bin("xfer-linkemu") + " up " + args).c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100; ++i) {
    std::ifstream f(out);
    std::string line;
    if (std::getline(f, line) && line.find("\"ready\":true") != std::string::npos) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "linkemu did not report ready";
  return pid;
}

void expect_identical(const Dataset& d, const std::string& dest, const std::vector<std::string>& only) {
  for (const auto& f : d.files) {
    if (!only.empty() && std::find(only.begin(), only.end(), f.name) == only.end()) continue;
    fs::path p = fs::path(dest) / f.name;
    ASSERT_TRUE(fs::exists(p)) << f.name << " missing in " << dest;
    std::ifstream in(p, std::ios::binary);
    xfer::Sha256 h;
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), buf.size()) || in.gcount() > 0) h.update(buf.data(), size_t(in.gcount()));
    EXPECT_EQ(h.hex(), f.sha256) << f.name << " differs";
  }
}

void expect_no_partials(const std::string& dest) {
  for (const auto& e : fs::directory_iterator(dest)) {
    std::string n = e.path().filename().string();
    EXPECT_FALSE(n.ends_with(".part") || n.ends_with(".progress") || n.ends_with(".tmp")) << "leftover " << n;
  }
}

int established_to(int port) {
  int n = 0;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(file);
    std::string line;
    std::getline(f, line);
    while (std::getline(f, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, st;
      ss >> sl >> local >> remote >> st;
      size_t colon = remote.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::stoi(remote.substr(colon + 1), nullptr, 16) == port && st == "01") ++n;
    }
  }
  return n;
}

int max_overlap(const std::vector<LogLine>& lines) {
  std::vector<std::pair<double, int>> ev;
  for (const auto& l : lines) {
    ev.push_back({l.start_s(), +1});
    ev.push_back({l.end_s, -1});
  }
  std::sort(ev.begin(), ev.end(), [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second < b.second); });
  int cur = 0, best = 0;
  for (auto& e : ev) best = std::max(best, cur += e.second);
  return best;
}

}  // namespace xtest
