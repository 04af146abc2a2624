#include "testbed.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tls.h"
#include "xfer/datagen.h"

namespace fs = std::filesystem;

namespace bench {

std::string self_dir() { return fs::read_symlink("/proc/self/exe").parent_path().string(); }

std::string source_dir() {
  if (const char* e = getenv("XFER_SOURCE_DIR")) return e;
  return XFER_SOURCE_DIR;
}

int sh(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

LinkProcess::LinkProcess(const LinkSpec& l, const std::string& name, int index, const std::string& log) {
  if (l.loopback) {
    loop_ns_ = client_ns = server_ns = "xfer-" + name + "-lo";
    server_ip = "127.0.0.1";
    sh("ip netns del " + loop_ns_ + " 2>/dev/null");  // a leftover of a killed run
    if (sh("ip netns add " + loop_ns_ + " && ip -n " + loop_ns_ + " link set lo up 2>>" + log) != 0)
      throw std::runtime_error("the loopback namespace " + loop_ns_ + " did not come up (see " + log + ")");
    return;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> a = {self_dir() + "/xfer-linkemu", "up", "--name", name, "--index", std::to_string(index),
                                "--rate-mbps", fmt::format("{}", l.rate_mbps), "--rtt-ms", fmt::format("{}", l.rtt_ms),
                                "--loss-pct", fmt::format("{}", l.loss_pct), "--jitter-ms", fmt::format("{}", l.jitter_ms),
                                "--mtu", std::to_string(l.mtu)};
  if (l.queue_bytes) a.insert(a.end(), {"--queue-bytes", std::to_string(l.queue_bytes)});
  if (l.client_rmem_max) a.insert(a.end(), {"--client-rmem-max", std::to_string(l.client_rmem_max)});
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], 1);
    int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    exec_argv(a);
  }
  close(fds[1]);
  out_ = fds[0];
  std::string line = read_line(15000);
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.value("ready", false)) {
    stop();
    throw std::runtime_error("xfer-linkemu did not come up (see " + log + "): " + line);
  }
  client_ns = j["client_ns"], server_ns = j["server_ns"], server_ip = j["server_ip"];
}

LinkProcess::~LinkProcess() { stop(); }

std::string LinkProcess::stop() {
  if (!loop_ns_.empty()) {
    sh("ip netns del " + loop_ns_);
    loop_ns_.clear();
    return R"({"loopback":true,"stopped":true})";
  }
  if (pid_ <= 0) return "";
  kill(pid_, SIGTERM);
  std::string last = read_line(15000);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  close(out_);
  return last;
}

std::string LinkProcess::read_line(int timeout_ms) {
  std::string line;
  char c;
  while (true) {
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    if (read(out_, &c, 1) != 1 || c == '\n') break;
    line += c;
  }
  return line;
}

BenchTls make_bench_tls(const std::string& dir, const std::string& server_ip) {
  fs::create_directories(dir);
  xtest::TestCa ca("xfer-bench CA");
  xtest::CertSpec spec;
  spec.common_name = "xfer-bench server";
  spec.alt_names = "IP:" + server_ip;
  BenchTls t;
  std::string base = ca.issue(spec).write(dir, "server");
  t.site = {base + ".crt", base + ".key"};
  t.ca_file = dir + "/ca.crt";
  std::ofstream(t.ca_file) << ca.cert_pem();
  return t;
}

NginxInNs::NginxInNs(const LinkProcess& link, const std::string& run_dir, const std::string& data_root,
                     const TlsSiteFiles* tls)
    : run_dir_(run_dir) {
  fs::create_directories(run_dir + "/sites.d");
  std::ofstream conf(run_dir + "/sites.d/tls.conf", std::ios::trunc);
  if (tls)
    conf << "server { listen " << link.server_ip << ":" << kHttpsPort << " ssl http2; ssl_certificate " << tls->cert_file
         << "; ssl_certificate_key " << tls->key_file << "; include " << run_dir << "/locations.conf; }\n";
  conf.close();
  if (sh("ip netns exec " + link.server_ns + " bash " + source_dir() + "/scripts/nginx-serve.sh start " + run_dir + " " +
         data_root + " 8080 8081 2m " + link.server_ip) != 0) {
    sh("bash " + source_dir() + "/scripts/nginx-serve.sh stop " + run_dir_ + " >/dev/null 2>&1");
    throw std::runtime_error("nginx did not start in " + link.server_ns + "; see " + run_dir + "/error.log");
  }
}

std::string capture(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
  }
  return out;
}

std::string capture_line(const std::string& cmd) {
  std::string out = capture(cmd);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

DestFs::DestFs(const std::string& kind, const std::string& out, uint64_t bytes) {
  root = out + "/work/dest-fs";
  if (kind == kOutDir) {
    fs::create_directories(root);
    describe = "clients write under the output directory (" + capture_line("findmnt -n -o FSTYPE -T " + out) + ")";
    return;
  }
  if (kind != kImage) throw std::invalid_argument("--dest-fs: " + kind + " is neither ext4-image nor out-dir");
  image_ = out + "/work/dest-fs.img";
  std::string log = out + "/logs/dest-fs.log";
  // A killed bench's mount and loop device are taken down first.
  sh("umount " + root + " >/dev/null 2>&1");
  sh("losetup -n -O NAME -j " + image_ + " 2>/dev/null | xargs -r -n1 losetup -d >/dev/null 2>&1");
  fs::create_directories(root);
  uint64_t size = std::max<uint64_t>(bytes + bytes / 4 + (256ull << 20), 512ull << 20);
  // Inode tables and the journal are written now, by mkfs: ext4's lazy init
  // would otherwise write them from a kernel thread during the first runs.
  std::string mk = fmt::format("rm -f {0} && truncate -s {1} {0} && mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 {0} >>{2} 2>&1",
                               image_, size, log);
  if (sh(mk) != 0) throw std::runtime_error("mkfs.ext4 of " + image_ + " failed (see " + log + "); --dest-fs out-dir writes under OUT instead");
  loop_ = capture_line("losetup --find --show --direct-io=on " + image_ + " 2>>" + log);
  std::string io = "direct I/O";
  if (loop_.empty()) {
    loop_ = capture_line("losetup --find --show " + image_ + " 2>>" + log);
    io = "buffered I/O (direct I/O refused, see " + log + ")";
    if (!loop_.empty()) fmt::print(stderr, "xfer-bench: the destination's loop device uses buffered I/O: direct I/O was refused\n");
  }
  if (loop_.empty() || sh("mount -t ext4 " + loop_ + " " + root + " 2>>" + log) != 0) {
    release();
    throw std::runtime_error("could not mount " + image_ + " (see " + log + "); --dest-fs out-dir writes under OUT instead");
  }
  describe = fmt::format("clients write to a journaled ext4 of {} MiB made for the run ({} on {}, {})", size >> 20,
                         loop_, image_, io);
}

void DestFs::release() {
  if (image_.empty()) return;
  sh("umount " + root + " >/dev/null 2>&1");
  if (!loop_.empty()) sh("losetup -d " + loop_ + " >/dev/null 2>&1");
  fs::remove(image_);
  loop_.clear(), image_.clear();
}

DestFs::~DestFs() { release(); }

NginxInNs::~NginxInNs() { sh("bash " + source_dir() + "/scripts/nginx-serve.sh stop " + run_dir_ + " >/dev/null 2>&1"); }

pid_t NginxInNs::master() const {
  std::ifstream f(run_dir_ + "/nginx.pid");
  pid_t p = 0;
  f >> p;
  return p;
}

PreparedDataset prepare(const DatasetSpec& d, bool quick, const std::string& root) {
  xfer::DatasetSpec spec;
  spec.shape = d.shape;
  spec.scale = quick ? d.quick_scale : d.scale;
  spec.size_scale = quick ? d.quick_size_scale : d.size_scale;
  spec.seed = d.seed;
  PreparedDataset p;
  p.id = fmt::format("{}-x{:g}-s{:g}-seed{}", d.shape, spec.scale, spec.size_scale, d.seed);
  std::string dir = root + "/" + p.id, list = dir + ".list";
  if (!fs::exists(list)) {
    fmt::print(stderr, "generating dataset {}\n", p.id);
    auto files = xfer::write_dataset(spec, dir);
    std::ofstream out(list + ".tmp");
    for (auto& f : files) out << f.name << " " << f.size << " " << f.sha256 << "\n";
    out.close();
    fs::rename(list + ".tmp", list);
  }
  std::ifstream in(list);
  ExpectedFile f;
  while (in >> f.name >> f.size >> f.sha256) {
    p.files.push_back(f);
    p.bytes += f.size;
  }
  return p;
}

}  // namespace bench
