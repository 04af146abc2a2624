// Cross traffic over an emulated link: iperf3 servers in the server
// namespace send (-R) to clients in the client namespace, each flow paced at
// a share of the link rate, started and stopped on a schedule whose clock
// starts at start().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace linkemu {

struct CrossSpec {
  double start_s = 0, stop_s = 0, pct = 0;  // percent of the link rate
};

// "START_S:STOP_S:PERCENT"; throws std::invalid_argument.
CrossSpec parse_cross(const std::string& s);

class CrossTraffic {
 public:
  CrossTraffic(std::string client_ns, std::string server_ns, std::string server_ip, double link_mbps,
               std::vector<CrossSpec> flows, int base_port = 5201);
  ~CrossTraffic();
  void start();  // iperf3 servers up; the schedule's clock starts now
  void poll();   // starts the flows that are due (call often)
  void stop();   // ends every iperf3 it started
  bool empty() const { return flows_.empty(); }

 private:
  pid_t spawn(const std::vector<std::string>& args);
  std::string client_ns_, server_ns_, server_ip_;
  double link_mbps_;
  std::vector<CrossSpec> flows_;
  int base_port_;
  std::vector<bool> started_;
  std::vector<pid_t> pids_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace linkemu
