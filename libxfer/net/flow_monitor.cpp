// The two FlowMonitors: eBPF (flowmon skeleton: owned-cookie map, per-flow
// stats map, open/close ring buffer) and TCP_INFO on the engine's own sockets.
#include "xfer/flow_monitor.h"

#include <bpf/libbpf.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_received (glibc's is older)
#include <sys/socket.h>

#include <bpf/bpf.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "flowmon.h"
#include "flowmon.skel.h"
#include "xfer/log.h"

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
    // Feature probe: fentry needs BPF trampolines; the tcp_probe tracepoint
    // does not. The first that loads wins.
    std::string why;
    for (bool fentry : {true, false}) {
      skel_ = flowmon_bpf__open();
      if (!skel_) throw std::runtime_error(std::string("BPF skeleton did not open: ") + strerror(errno));
      bpf_program__set_autoload(skel_->progs.flowmon_rcv, fentry);
      bpf_program__set_autoload(skel_->progs.flowmon_probe, !fentry);
      if (flowmon_bpf__load(skel_) == 0) {
        hook_ = fentry ? "fentry/tcp_rcv_established" : "tp_btf/tcp_probe";
        break;
      }
      why += std::string(why.empty() ? "" : "; ") + (fentry ? "fentry: " : "tp_btf/tcp_probe: ") + strerror(errno);
      flowmon_bpf__destroy(skel_);
      skel_ = nullptr;
    }
    if (!skel_) throw std::runtime_error("BPF programs did not load (" + why + ")");
    if (flowmon_bpf__attach(skel_) != 0) {
      int err = errno;
      flowmon_bpf__destroy(skel_);
      throw std::runtime_error(std::string("BPF programs did not attach: ") + strerror(err));
    }
    ring_ = ring_buffer__new(bpf_map__fd(skel_->maps.events), &EbpfFlowMonitor::on_event, this, nullptr);
    // Run-time statistics for as long as this fd is open (no global sysctl).
    stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  }
  ~EbpfFlowMonitor() override {
    if (ring_) ring_buffer__free(ring_);
    flowmon_bpf__destroy(skel_);
    if (stats_fd_ >= 0) close(stats_fd_);
  }
  Overhead overhead() const override {
    Overhead o;
    o.reader_ns = reader_ns_;
    for (bpf_program* p : {skel_->progs.flowmon_rcv, skel_->progs.flowmon_probe, skel_->progs.flowmon_state}) {
      int fd = bpf_program__fd(p);
      if (fd < 0) continue;  // the hook not chosen
      bpf_prog_info info{};
      uint32_t len = sizeof info;
      if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) o.bpf_run_ns += info.run_time_ns, o.bpf_runs += info.run_cnt;
    }
    return o;
  }
  std::string source() const override { return "ebpf"; }
  const std::string& hook() const { return hook_; }

  uint64_t own(int fd, uint32_t job) override {
    uint64_t c = socket_cookie(fd);
    if (!c) return 0;
    bpf_map__update_elem(skel_->maps.owned, &c, sizeof c, &job, sizeof job, BPF_ANY);
    fds_[fd] = c;
    return c;
  }
  void disown(int fd) override {
    // The close event still carries the final counters; the entry goes once read.
    fds_.erase(fd);
  }

  std::vector<FlowCounters> flows(uint32_t job) override {
    uint64_t t0 = thread_cpu_ns();
    ring_buffer__consume(ring_);
    // tcp_probe runs before its segment is processed, so BPF's byte count
    // lags by the segments received since; the socket's own counter is exact
    // at this instant, for the sockets still open.
    std::map<uint64_t, uint64_t> exact;
    for (const auto& [fd, cookie] : fds_) {
      struct tcp_info ti;
      if (read_tcp_info(fd, &ti)) exact[cookie] = ti.tcpi_bytes_received;
    }
    std::vector<FlowCounters> out;
    uint64_t key = 0, next = 0;
    uint64_t* prev = nullptr;
    std::vector<uint64_t> finished;
    while (bpf_map__get_next_key(skel_->maps.flows, prev, &next, sizeof next) == 0) {
      flowmon_stats st{};
      if (bpf_map__lookup_elem(skel_->maps.flows, &next, sizeof next, &st, sizeof st, 0) == 0 && st.job == job) {
        FlowCounters f = convert(next, st);
        if (auto it = exact.find(next); it != exact.end() && it->second > f.bytes_received) f.bytes_received = it->second;
        f.closed = closed_.count(next) > 0;
        if (f.closed) finished.push_back(next);
        out.push_back(f);
      }
      key = next;
      prev = &key;
    }
    for (uint64_t c : finished) {  // reported once as closed: forget it
      bpf_map__delete_elem(skel_->maps.flows, &c, sizeof c, 0);
      bpf_map__delete_elem(skel_->maps.owned, &c, sizeof c, 0);
      closed_.erase(c);
    }
    reader_ns_ += thread_cpu_ns() - t0;
    return out;
  }

 private:
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
  std::string hook_;
  ring_buffer* ring_ = nullptr;
  std::map<int, uint64_t> fds_;
  std::map<uint64_t, bool> closed_;
};

// The fallback: TCP_INFO from the engine's own sockets, read at each sample.
class TcpInfoFlowMonitor : public FlowMonitor {
 public:
  std::string source() const override { return "tcp_info"; }
  uint64_t own(int fd, uint32_t job) override {
    uint64_t c = socket_cookie(fd);
    socks_[fd] = {c, job, {}};
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
    f.retrans = ti.tcpi_total_retrans;
    f.local_port = local_port(fd);
    return true;
  }
  std::map<int, Sock> socks_;
  std::vector<FlowCounters> gone_;
  uint64_t reader_ns_ = 0;
};

}  // namespace

std::unique_ptr<FlowMonitor> make_flow_monitor(bool allow_ebpf) {
  if (allow_ebpf) {
    try {
      auto m = std::make_unique<EbpfFlowMonitor>();
      log::info("flows: eBPF ({}, tp_btf/inet_sock_set_state)", m->hook());
      return m;
    } catch (const std::exception& e) {
      log::warn("flows: {}; falling back to TCP_INFO on the engine's own sockets", e.what());
    }
  }
  return std::make_unique<TcpInfoFlowMonitor>();
}

}  // namespace xfer
