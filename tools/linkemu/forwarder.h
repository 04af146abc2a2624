// Moves packets from one TUN device to another through a LinkModel, on a
// thread of its own: read what arrived, admit it to the model, write each
// packet out when its delivery time comes.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "link_model.h"

namespace linkemu {

class Forwarder {
 public:
  // vnet: the TUN fds carry a virtio_net_hdr (GSO super-packets, --offload).
  Forwarder(int in_fd, int out_fd, const LinkParams& p, bool vnet, uint64_t seed);
  ~Forwarder();
  void start();
  void stop();  // joins
  LinkCounters counters() const { return model_.counters(); }

 private:
  void run();
  int in_fd_, out_fd_;
  LinkModel model_;
  bool vnet_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace linkemu
