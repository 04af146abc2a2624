// xfer-linkemu: a WAN link in userspace. Two network namespaces (client and
// server) joined through TUN devices; a thread per direction carries packets
// through a LinkModel (rate, queue, delay, jitter, loss), so TCP in the
// namespaces sees a real long, thin or lossy path. This kernel has neither
// netem nor fq, hence userspace.
//
//   xfer-linkemu up --name wan --rate-mbps 500 --rtt-ms 40 [...]   runs until SIGINT/SIGTERM
//   xfer-linkemu cleanup                                            removes leftovers
//
// `up` prints one JSON line when the link is ready (namespaces, addresses),
// and one with counters when it stops.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cross.h"
#include "forwarder.h"

namespace {

constexpr const char* kPrefix = "xfer-";

int run(const std::string& cmd, bool quiet = false) {
  std::string c = quiet ? cmd + " >/dev/null 2>&1" : cmd;
  int st = std::system(c.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void must(const std::string& cmd) {
  if (run(cmd) != 0) throw std::runtime_error("failed: " + cmd);
}

int open_tun(const std::string& name, bool vnet) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("open /dev/net/tun: ") + strerror(errno));
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (vnet ? IFF_VNET_HDR : 0);
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) throw std::runtime_error("TUNSETIFF " + name + ": " + strerror(errno));
  if (vnet) {
    // Let the stack hand us TSO super-packets and take GRO'd ones back: one
    // read per 64 KB instead of per 1.5 KB.
    unsigned off = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
    if (ioctl(fd, TUNSETOFFLOAD, off) < 0) throw std::runtime_error("TUNSETOFFLOAD: " + std::string(strerror(errno)));
  }
  return fd;
}

struct Link {
  std::string name, ns_c, ns_s, tun_c, tun_s, ip_c, ip_s;
};

void remove_namespace(const std::string& ns) {
  // Processes still inside would keep it alive: end them first.
  run("ip netns pids " + ns + " 2>/dev/null | xargs -r kill -TERM", true);
  for (int i = 0; i < 20 && run("test -z \"$(ip netns pids " + ns + " 2>/dev/null)\"", true) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run("ip netns pids " + ns + " 2>/dev/null | xargs -r kill -KILL", true);
  run("ip netns del " + ns, true);
}

int cleanup(const std::string& only) {
  FILE* p = popen("ip netns list 2>/dev/null", "r");
  char line[256];
  int n = 0;
  while (p && fgets(line, sizeof line, p)) {
    std::string ns = line;
    ns = ns.substr(0, ns.find_first_of(" \n"));
    if (ns.rfind(kPrefix, 0) != 0) continue;
    if (!only.empty() && ns.rfind(std::string(kPrefix) + only + "-", 0) != 0) continue;
    remove_namespace(ns);
    fmt::print("removed namespace {}\n", ns);
    ++n;
  }
  if (p) pclose(p);
  if (n == 0) fmt::print("nothing to clean up\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xfer-linkemu: an emulated WAN link between two network namespaces"};
  app.require_subcommand(1);
  std::string name = "link";
  int index = 1;
  double rate = 1000, rtt = 0, delay_down = -1, delay_up = -1, loss = 0, loss_up = 0, jitter = 0, duration = 0;
  uint64_t queue = 0, rmem = 0;
  int mtu = 1500;
  std::string offload = "auto";
  std::vector<std::string> cross_specs;
  auto* up = app.add_subcommand("up", "create the link and carry packets until SIGINT/SIGTERM");
  up->add_option("--name", name, "link name: namespaces xfer-NAME-c and xfer-NAME-s");
  up->add_option("--index", index, "subnet 10.201.INDEX.0/30")->check(CLI::Range(1, 250));
  up->add_option("--rate-mbps", rate, "bottleneck rate, both directions")->check(CLI::PositiveNumber);
  up->add_option("--rtt-ms", rtt, "round-trip propagation delay, split evenly")->check(CLI::NonNegativeNumber);
  up->add_option("--delay-down-ms", delay_down, "one-way delay server -> client (overrides --rtt-ms)");
  up->add_option("--delay-up-ms", delay_up, "one-way delay client -> server (overrides --rtt-ms)");
  up->add_option("--queue-bytes", queue, "bottleneck buffer per direction (default: one BDP)");
  up->add_option("--loss-pct", loss, "random loss server -> client, percent")->check(CLI::Range(0.0, 100.0));
  up->add_option("--loss-up-pct", loss_up, "random loss client -> server, percent")->check(CLI::Range(0.0, 100.0));
  up->add_option("--jitter-ms", jitter, "delay jitter (uniform +-), packets never reordered")->check(CLI::NonNegativeNumber);
  up->add_option("--mtu", mtu, "MTU of the link")->check(CLI::Range(576, 65000));
  up->add_option("--offload", offload, "GSO/GRO super-packets: on, off, auto (on unless there is loss)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  up->add_option("--client-rmem-max", rmem, "cap tcp_rmem max in the client namespace (bytes)");
  up->add_option("--cross", cross_specs, "iperf3 cross traffic START_S:STOP_S:PERCENT of the rate, server to client (repeatable)");
  up->add_option("--duration", duration, "stop after this many seconds (default: until a signal)");
  std::string only;
  auto* clean = app.add_subcommand("cleanup", "remove namespaces xfer-* left by a link that died");
  clean->add_option("--name", only, "only this link");
  CLI11_PARSE(app, argc, argv);
  if (*clean) return cleanup(only);

  std::vector<linkemu::CrossSpec> cross;
  try {
    for (auto& s : cross_specs) cross.push_back(linkemu::parse_cross(s));
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "xfer-linkemu: {}\n", e.what());
    return 2;
  }
  bool vnet = offload == "on" || (offload == "auto" && loss == 0 && loss_up == 0);
  if (delay_down < 0) delay_down = rtt / 2;
  if (delay_up < 0) delay_up = rtt / 2;

  Link l;
  l.name = name;
  l.ns_c = kPrefix + name + "-c";
  l.ns_s = kPrefix + name + "-s";
  l.tun_c = "xt" + std::to_string(index) + "c";
  l.tun_s = "xt" + std::to_string(index) + "s";
  l.ip_c = "10.201." + std::to_string(index) + ".1";
  l.ip_s = "10.201." + std::to_string(index) + ".2";

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);  // threads inherit: only sigtimedwait below sees them

  int fd_c = -1, fd_s = -1;
  bool created = false;
  auto teardown = [&] {
    if (fd_c >= 0) close(fd_c);
    if (fd_s >= 0) close(fd_s);
    if (created) {
      remove_namespace(l.ns_c);
      remove_namespace(l.ns_s);
    }
  };
  try {
    if (run("ip netns list | grep -qw " + l.ns_c, true) == 0 || run("ip netns list | grep -qw " + l.ns_s, true) == 0)
      throw std::runtime_error("namespaces of link '" + name + "' exist already; run: xfer-linkemu cleanup --name " + name);
    must("ip netns add " + l.ns_c);
    created = true;
    must("ip netns add " + l.ns_s);
    fd_c = open_tun(l.tun_c, vnet);
    fd_s = open_tun(l.tun_s, vnet);
    must("ip link set " + l.tun_c + " netns " + l.ns_c);
    must("ip link set " + l.tun_s + " netns " + l.ns_s);
    for (auto [ns, dev, me, peer] : {std::tuple{l.ns_c, l.tun_c, l.ip_c, l.ip_s}, std::tuple{l.ns_s, l.tun_s, l.ip_s, l.ip_c}}) {
      must("ip -n " + ns + " link set lo up");
      must("ip -n " + ns + " addr add " + me + "/32 peer " + peer + "/32 dev " + dev);
      must("ip -n " + ns + " link set " + dev + " mtu " + std::to_string(mtu) + " txqueuelen 10000 up");
    }
    if (rmem > 0)
      must("ip netns exec " + l.ns_c + " sysctl -q -w net.ipv4.tcp_rmem='4096 131072 " + std::to_string(rmem) + "'");
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-linkemu: {}\n", e.what());
    teardown();
    return 1;
  }

  linkemu::LinkParams down{rate * 1e6, delay_down / 1e3, jitter / 1e3, loss / 100, queue};
  linkemu::LinkParams upl{rate * 1e6, delay_up / 1e3, jitter / 1e3, loss_up / 100, queue};
  linkemu::Forwarder s2c(fd_s, fd_c, down, vnet, 1), c2s(fd_c, fd_s, upl, vnet, 2);
  s2c.start();
  c2s.start();
  nlohmann::json ready = {{"ready", true},       {"client_ns", l.ns_c},  {"server_ns", l.ns_s},
                          {"client_ip", l.ip_c}, {"server_ip", l.ip_s},  {"rate_mbps", rate},
                          {"delay_down_ms", delay_down}, {"delay_up_ms", delay_up}, {"loss_pct", loss},
                          {"queue_bytes", s2c.counters().packets ? 0 : (queue ? queue : uint64_t(rate * 1e6 / 8 * (delay_down + delay_up) / 1e3))},
                          {"mtu", mtu},         {"offload", vnet}};
  std::printf("%s\n", ready.dump().c_str());
  std::fflush(stdout);

  linkemu::CrossTraffic traffic(l.ns_c, l.ns_s, l.ip_s, rate, cross);
  traffic.start();
  auto t0 = std::chrono::steady_clock::now();

  int sig = 0;
  for (;;) {
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    traffic.poll();
    if (duration > 0 && t >= duration) break;
    timespec ts{0, 100'000'000};
    sig = sigtimedwait(&mask, nullptr, &ts);
    if (sig > 0) break;
  }
  traffic.stop();
  s2c.stop();
  c2s.stop();
  auto stats = [](const linkemu::LinkCounters& c) {
    return nlohmann::json{{"packets", c.packets},           {"bytes", c.bytes},
                          {"dropped_queue", c.dropped_queue}, {"dropped_loss", c.dropped_loss},
                          {"max_backlog_bytes", c.max_backlog_bytes}};
  };
  teardown();
  std::printf("%s\n", nlohmann::json{{"stopped", true}, {"down", stats(s2c.counters())}, {"up", stats(c2s.counters())}}.dump().c_str());
  return 0;
}
