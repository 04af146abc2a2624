// Two hosts behind one bottleneck (issue 39: DTNs of a fleet share a WAN
// link): two network namespaces, xfer-NAME-h1 and -h2, each joined to a test
// link's client namespace by a veth pair, which routes them over the
// emulated link; the server namespace routes their subnet back over it. Each
// host runs its own jobs (its own xferd), and only the link is shared.
#pragma once

#include <string>

#include "fixture.h"
#include "link.h"

namespace xtest {

struct TwoHosts {
  explicit TwoHosts(const Link& link) : name(link.name), index(link.index) {
    const std::string c = "xfer-" + name + "-c", s = "xfer-" + name + "-s", net = "10.202." + std::to_string(index);
    std::string cmd = "set -e; ip netns exec " + c + " sysctl -qw net.ipv4.ip_forward=1; ";
    cmd += "ip netns exec " + c + " sysctl -qw net.ipv4.conf.all.rp_filter=0; ";
    cmd += "ip netns exec " + s + " sysctl -qw net.ipv4.conf.all.rp_filter=0; ";
    for (int h = 1; h <= 2; ++h) {
      const std::string ns = host_ns(h), hv = "xh" + std::to_string(index) + "h" + std::to_string(h),
                        cv = "xh" + std::to_string(index) + "c" + std::to_string(h);
      const std::string gw = net + "." + std::to_string(4 * (h - 1) + 1), me = net + "." + std::to_string(4 * (h - 1) + 2);
      cmd += "ip netns add " + ns + "; ip netns exec " + ns + " ip link set lo up; ";
      cmd += "ip link add " + hv + " netns " + ns + " type veth peer name " + cv + " netns " + c + "; ";
      cmd += "ip -n " + ns + " addr add " + me + "/30 dev " + hv + "; ip -n " + ns + " link set " + hv + " up; ";
      cmd += "ip -n " + c + " addr add " + gw + "/30 dev " + cv + "; ip -n " + c + " link set " + cv + " up; ";
      cmd += "ip -n " + ns + " route add default via " + gw + "; ";
      host_ip[h - 1] = me;
    }
    // The server reaches the hosts over the link's point-to-point device.
    cmd += "dev=$(ip -n " + s + " -o link show | awk -F': ' '$2 ~ /^xt/ {print $2}' | head -1); ";
    cmd += "ip -n " + s + " route add " + net + ".0/24 dev $dev";
    ok = sh(cmd) == 0;
  }
  ~TwoHosts() {
    for (int h = 1; h <= 2; ++h) sh("ip netns del " + host_ns(h) + " 2>/dev/null");
  }
  std::string host_ns(int h) const { return "xfer-" + name + "-h" + std::to_string(h); }
  std::string name;
  int index;
  std::string host_ip[2];
  bool ok = false;
};

}  // namespace xtest
