// The two FlowMonitors: eBPF (flowmon skeleton: owned-cookie map, per-flow
// stats map filled at each sample by an iterator over the owned sockets'
// storage, open/close ring buffer) and TCP_INFO on the engine's own sockets.
#include "xfer/flow_monitor.h"

#include <bpf/libbpf.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_received (glibc's is older)
#include <sys/socket.h>

#include <bpf/bpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "flowmon.h"
#include "xfer/clock.h"
#include "flowmon.skel.h"
#include "xfer/log.h"
#include "xfer/boot.h"
#include "xfer/safe_open.h"

namespace xfer {
namespace {

uint64_t socket_cookie(int fd) {
  uint64_t c = 0;
  socklen_t len = sizeof c;
  if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) != 0) return 0;
  return c;
}

bool read_tcp_info(int fd, struct tcp_info* ti) {
  *ti = {};
  socklen_t len = sizeof *ti;
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0;
}

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// A kernel that refuses the map iterator refuses it until it reboots, and
// each try costs a whole load: libbpf parses the kernel's BTF for every
// object (5.5 MB here, about 40 ms of CPU), and `xferctl run` loads a
// monitor for each job. The refusal is remembered for the boot in a file
// only root writes (/run is cleared at boot; the boot id guards the rest).
constexpr const char* kRefusalDir = "/run/xferd";
constexpr const char* kRefusalFile = "/run/xferd/flowmon-refused";

// The iterator remembered as refused in this boot, or "".
std::string remembered_refusal() {
  int fd = -1;
  try {
    fd = open_regular(AT_FDCWD, kRefusalFile, O_RDONLY, FileOwner{0, 0});  // root's, not followed, not blocked on
  } catch (const IoError&) {  // NameRefused included: not believed
    return {};
  }
  if (fd < 0) return {};
  std::string text;
  struct stat st{};
  try {
    if (fstat(fd, &st) == 0 && !(st.st_mode & 022)) text = read_bounded(fd, 256, kRefusalFile);
  } catch (const IoError&) {
    text.clear();
  }
  close(fd);
  const std::string prefix = boot_id() + " ";
  if (text.size() > 256 || text.rfind(prefix, 0) != 0 || text.back() != '\n') return {};
  return text.substr(prefix.size(), text.size() - prefix.size() - 1);
}

void remember_refusal(const std::string& name) {
  if (geteuid() != 0) return;  // the file is only believed when root wrote it
  mkdir(kRefusalDir, 0755);
  struct stat st{};
  if (lstat(kRefusalDir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) return;
  int fd = open(kRefusalFile, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = boot_id() + " " + name + "\n";
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::write(fd, text.data(), text.size()) != ssize_t(text.size()))
    log::debug("flows: could not remember the refusal in {}", kRefusalFile);
  close(fd);
}

uint16_t local_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return 0;
}

class EbpfFlowMonitor : public FlowMonitor {
 public:
  EbpfFlowMonitor() {
    libbpf_set_print([](libbpf_print_level lvl, const char* fmt, va_list ap) {
      if (lvl == LIBBPF_WARN) {
        char buf[512];
        vsnprintf(buf, sizeof buf, fmt, ap);
        log::debug("libbpf: {}", buf);
      }
      return 0;
    });
    // The map iterator first (it visits our sockets only), then iter/tcp
    // (every TCP socket, ours picked by their storage entry): some kernels
    // refuse map-element iterators at load (EPERM).
    std::string refused;
    const std::string known_refusal = remembered_refusal();
    for (bool over_map : {true, false}) {
      const char* name = over_map ? "iter/bpf_sk_storage_map" : "iter/tcp";
      if (known_refusal == name) {
        refused = std::string(name) + " (earlier in this boot; " + kRefusalFile + ")";
        continue;
      }
      skel_ = flowmon_bpf__open();
      if (!skel_) throw std::runtime_error(std::string("BPF skeleton did not open: ") + strerror(errno));
      bpf_program* walk = over_map ? skel_->progs.flowmon_iter : skel_->progs.flowmon_iter_tcp;
      bpf_program__set_autoload(over_map ? skel_->progs.flowmon_iter_tcp : skel_->progs.flowmon_iter, false);
      bpf_program__set_autoattach(walk, false);  // attached below (the map iterator needs its map)
      if (flowmon_bpf__load(skel_) != 0) {
        int err = errno;
        flowmon_bpf__destroy(skel_);
        skel_ = nullptr;
        refused += std::string(refused.empty() ? "" : "; ") + name + " (" + strerror(err) + ")";
        if (over_map && (err == EPERM || err == EACCES)) remember_refusal(name);
        continue;
      }
      union bpf_iter_link_info map = {};
      map.map.map_fd = bpf_map__fd(skel_->maps.owned);
      DECLARE_LIBBPF_OPTS(bpf_iter_attach_opts, iter_opts, .link_info = &map, .link_info_len = sizeof map);
      iter_ = bpf_program__attach_iter(walk, over_map ? &iter_opts : nullptr);
      if (!iter_ || flowmon_bpf__attach(skel_) != 0) {
        int err = errno;
        if (iter_) bpf_link__destroy(iter_);
        flowmon_bpf__destroy(skel_);
        throw std::runtime_error(std::string("BPF programs did not attach: ") + strerror(err));
      }
      walk_prog_ = walk;
      walk_name_ = name;
      if (!refused.empty()) log::info("flows: this kernel refused {}; sampling through {}, which walks every TCP socket of the namespace", refused, walk_name_);
      break;
    }
    if (!skel_) throw std::runtime_error("BPF programs did not load (" + refused + ")");
    ring_ = ring_buffer__new(bpf_map__fd(skel_->maps.events), &EbpfFlowMonitor::on_event, this, nullptr);
    // Run-time statistics for as long as this fd is open (no global sysctl).
    stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  }
  ~EbpfFlowMonitor() override {
    if (ring_) ring_buffer__free(ring_);
    if (iter_) bpf_link__destroy(iter_);
    flowmon_bpf__destroy(skel_);
    if (stats_fd_ >= 0) close(stats_fd_);
  }
  Overhead overhead() const override {
    Overhead o;
    o.reader_ns = reader_ns_;
    for (bpf_program* p : {walk_prog_, skel_->progs.flowmon_state}) {
      int fd = bpf_program__fd(p);
      bpf_prog_info info{};
      uint32_t len = sizeof info;
      if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) o.bpf_run_ns += info.run_time_ns, o.bpf_runs += info.run_cnt;
    }
    return o;
  }
  std::string source() const override { return "ebpf"; }
  const std::string& walk_name() const { return walk_name_; }

  uint64_t own(int fd, uint32_t job) override {
    uint64_t c = socket_cookie(fd);
    if (!c) return 0;
    if (bpf_map__update_elem(skel_->maps.owned, &fd, sizeof fd, &job, sizeof job, BPF_ANY) != 0) {
      log::warn("flows: socket {} could not be followed: {}", fd, strerror(errno));
      return 0;
    }
    return c;
  }
  void disown(int) override {
    // The close event still carries the final counters; the entry goes once read.
  }

  // One pass over the sockets and the map serves every job that asks within
  // kFreshNs: a hundred jobs, each asking at its own interval, walked every
  // socket and every map entry a hundred times an interval, on the loop.
  // A closed flow is reported to its job until the job has read it, and
  // forgotten by the next pass after that.
  std::vector<FlowCounters> flows(uint32_t job) override {
    const uint64_t now = monotonic_ns();
    if (!sampled_ns_ || now - sampled_ns_ >= kFreshNs) refresh(now);
    auto it = by_job_.find(job);
    if (it == by_job_.end()) return {};
    for (const FlowCounters& f : it->second)
      if (f.closed) reported_closed_.insert(f.id);  // its job has its last counters: gone at the next pass
    return it->second;
  }

 private:
  static constexpr uint64_t kFreshNs = 25'000'000;
  void refresh(uint64_t now) {
    uint64_t t0 = thread_cpu_ns();
    sampled_ns_ = now;
    for (uint64_t c : reported_closed_) {  // reported as closed by the last pass: forget it
      bpf_map__delete_elem(skel_->maps.flows, &c, sizeof c, 0);
      closed_.erase(c);
    }
    reported_closed_.clear();
    by_job_.clear();
    ring_buffer__consume(ring_);
    sample();
    uint64_t key = 0, next = 0;
    uint64_t* prev = nullptr;
    while (bpf_map__get_next_key(skel_->maps.flows, prev, &next, sizeof next) == 0) {
      flowmon_stats st{};
      if (bpf_map__lookup_elem(skel_->maps.flows, &next, sizeof next, &st, sizeof st, 0) == 0) {
        FlowCounters f = convert(next, st);
        f.closed = closed_.count(next) > 0;
        by_job_[st.job].push_back(f);
      }
      key = next;
      prev = &key;
    }
    reader_ns_ += thread_cpu_ns() - t0;
  }
  uint64_t sampled_ns_ = 0;
  std::map<uint32_t, std::vector<FlowCounters>> by_job_;
  std::set<uint64_t> reported_closed_;  // closed flows their job has read
  // One pass of the socket iterator: every owned socket's counters, as of now.
  // The program writes no output, so the first read() returns 0 at the end.
  void sample() {
    int fd = bpf_iter_create(bpf_link__fd(iter_));
    if (fd < 0) {
      if (!iter_failed_) log::warn("flows: the socket iterator did not start: {}; counters are as of the last sample", strerror(errno));
      iter_failed_ = true;
      return;
    }
    char buf[64];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    }
    if (n < 0 && !iter_failed_) log::warn("flows: reading the socket iterator: {}", strerror(errno)), iter_failed_ = true;
    close(fd);
  }
  static FlowCounters convert(uint64_t cookie, const flowmon_stats& st) {
    FlowCounters f;
    f.id = cookie;
    f.job = st.job;
    f.bytes_received = st.bytes_received;
    f.rtt_ms = (st.rcv_rtt_us ? st.rcv_rtt_us : st.srtt_us) / 1000.0;
    f.rttvar_ms = st.rttvar_us / 1000.0;
    f.retrans = st.total_retrans + st.rcv_ooopack;
    f.local_port = st.sport;
    f.remote_port = st.dport;
    return f;
  }
  static int on_event(void* ctx, void* data, size_t) {
    auto* self = static_cast<EbpfFlowMonitor*>(ctx);
    auto* e = static_cast<flowmon_event*>(data);
    if (e->type == FLOWMON_CLOSE) self->closed_.insert({e->cookie, true});
    return 0;
  }
  flowmon_bpf* skel_ = nullptr;
  int stats_fd_ = -1;
  uint64_t reader_ns_ = 0;
  bool iter_failed_ = false;
  ring_buffer* ring_ = nullptr;
  bpf_link* iter_ = nullptr;
  bpf_program* walk_prog_ = nullptr;  // the iterator in use
  std::string walk_name_;
  std::map<uint64_t, bool> closed_;
};

// The fallback: TCP_INFO from the engine's own sockets, read at each sample.
class TcpInfoFlowMonitor : public FlowMonitor {
 public:
  std::string source() const override { return "tcp_info"; }
  uint64_t own(int fd, uint32_t job) override {
    uint64_t c = socket_cookie(fd);
    socks_[fd] = {c, job, {}};
    owned_any_ = true;
    return c;
  }
  void disown(int fd) override {
    auto it = socks_.find(fd);
    if (it == socks_.end()) return;
    read(fd, it->second);  // the last counters before the socket goes
    it->second.last.closed = true;
    gone_.push_back(it->second.last);
    socks_.erase(it);
  }
  Overhead overhead() const override { return {0, 0, reader_ns_}; }
  bool owns(int fd) const { return socks_.count(fd) > 0; }
  bool owned_any() const { return owned_any_; }
  // The open sockets, no longer followed here (handed to another monitor);
  // the closed ones not yet read stay, for their job's next flows().
  std::vector<std::pair<int, uint32_t>> release_open() {
    std::vector<std::pair<int, uint32_t>> open;
    for (const auto& [fd, s] : socks_) open.emplace_back(fd, s.job);
    socks_.clear();
    return open;
  }
  std::vector<FlowCounters> flows(uint32_t job) override {
    uint64_t t0 = thread_cpu_ns();
    std::vector<FlowCounters> out;
    for (auto& [fd, s] : socks_)
      if (s.job == job && read(fd, s)) out.push_back(s.last);
    for (auto it = gone_.begin(); it != gone_.end();) {
      if (it->job == job) {
        out.push_back(*it);
        it = gone_.erase(it);
      } else {
        ++it;
      }
    }
    reader_ns_ += thread_cpu_ns() - t0;
    return out;
  }

 private:
  struct Sock {
    uint64_t cookie;
    uint32_t job;
    FlowCounters last;
  };
  static bool read(int fd, Sock& s) {
    struct tcp_info ti;
    if (!read_tcp_info(fd, &ti)) return false;
    FlowCounters& f = s.last;
    f.id = s.cookie;
    f.job = s.job;
    f.bytes_received = ti.tcpi_bytes_received;
    f.rtt_ms = (ti.tcpi_rcv_rtt ? ti.tcpi_rcv_rtt : ti.tcpi_rtt) / 1000.0;
    f.rttvar_ms = ti.tcpi_rttvar / 1000.0;
    f.retrans = ti.tcpi_total_retrans + ti.tcpi_rcv_ooopack;  // as the BPF program counts: both sights of loss
    f.local_port = local_port(fd);
    return true;
  }
  std::map<int, Sock> socks_;
  std::vector<FlowCounters> gone_;
  uint64_t reader_ns_ = 0;
  bool owned_any_ = false;
};

// eBPF, loaded on a thread of its own once the job has run `after` (at
// once for 0), with TCP_INFO measuring the job's sockets until then: the
// load (the kernel's BTF parsed, the programs verified: about 60 ms of CPU)
// is more than a job of a second spends on everything else it measures.
// The counters are the kernel's own in both (tcp_info's are read from the
// same tcp_sock fields the BPF program copies), so a flow handed over keeps
// its cumulative counts and the accountant's deltas run on unbroken.
class DeferredFlowMonitor : public FlowMonitor {
 public:
  DeferredFlowMonitor(bool allow_ebpf, std::chrono::milliseconds after)
      : allow_ebpf_(allow_ebpf), load_at_(std::chrono::steady_clock::now() + after) {
    if (after.count() > 0)
      log::info("flows: TCP_INFO until the job has run {:.1f} s, then eBPF (a shorter job does not pay the load)",
                after.count() / 1000.0);
    poll();
  }
  std::string source() const override { return monitor_ ? monitor_->source() : tcp_.source(); }
  std::string source_note() const override {
    if (monitor_ && monitor_->source() != "ebpf") return "eBPF did not load (the log says why)";
    if (monitor_) return tcp_.owned_any() ? "TCP_INFO until eBPF had loaded" : "";
    return "the job ended before eBPF was loaded (it is loaded once a job has run a while)";
  }
  uint64_t own(int fd, uint32_t job) override {
    if (monitor_) return monitor_->own(fd, job);
    return tcp_.own(fd, job);
  }
  void disown(int fd) override {
    if (tcp_.owns(fd)) return tcp_.disown(fd);
    if (monitor_) monitor_->disown(fd);
  }
  std::vector<FlowCounters> flows(uint32_t job) override {
    poll();
    std::vector<FlowCounters> out = tcp_.flows(job);  // before the hand-over: all; after: the flows closed before it
    if (monitor_) {
      std::vector<FlowCounters> more = monitor_->flows(job);
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }
  Overhead overhead() const override {
    Overhead o = tcp_.overhead();
    if (monitor_) {
      Overhead m = monitor_->overhead();
      o.bpf_run_ns += m.bpf_run_ns, o.bpf_runs += m.bpf_runs, o.reader_ns += m.reader_ns;
    }
    return o;
  }
  uint64_t load_ns() const override { return load_ns_; }

 private:
  // Starts the load when it is due; hands the open sockets over when it is done.
  void poll() {
    if (monitor_) return;
    if (!pending_.valid()) {
      if (std::chrono::steady_clock::now() < load_at_) return;
      pending_ = std::async(std::launch::async, [allow = allow_ebpf_] {
        const uint64_t before = thread_cpu_ns();
        std::unique_ptr<FlowMonitor> m = make_flow_monitor(allow);
        return std::make_pair(std::move(m), thread_cpu_ns() - before);
      });
    }
    if (pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    std::tie(monitor_, load_ns_) = pending_.get();
    for (auto [fd, job] : tcp_.release_open()) monitor_->own(fd, job);
  }
  bool allow_ebpf_;
  std::chrono::steady_clock::time_point load_at_;
  TcpInfoFlowMonitor tcp_;
  std::future<std::pair<std::unique_ptr<FlowMonitor>, uint64_t>> pending_;  // the monitor, the load's CPU ns
  std::unique_ptr<FlowMonitor> monitor_;
  uint64_t load_ns_ = 0;
};

}  // namespace

std::unique_ptr<FlowMonitor> make_flow_monitor_deferred(bool allow_ebpf, std::chrono::milliseconds after) {
  return std::make_unique<DeferredFlowMonitor>(allow_ebpf, after);
}

std::unique_ptr<FlowMonitor> make_flow_monitor(bool allow_ebpf) {
  if (allow_ebpf) {
    try {
      auto m = std::make_unique<EbpfFlowMonitor>();
      log::info("flows: eBPF (sampled each interval through {}; open/close from tp_btf/inet_sock_set_state)", m->walk_name());
      return m;
    } catch (const std::exception& e) {
      log::warn("flows: {}; falling back to TCP_INFO on the engine's own sockets", e.what());
    }
  }
  return std::make_unique<TcpInfoFlowMonitor>();
}

}  // namespace xfer
