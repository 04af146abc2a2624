#include "forwarder.h"

#include <poll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

namespace linkemu {
namespace {

// struct virtio_net_hdr of <linux/virtio_net.h>, which C++ cannot include (a
// member there is named `class`). The layout is ABI: 10 bytes, little-endian.
struct VnetHdr {
  uint8_t flags;
  uint8_t gso_type;  // 0: not a GSO packet
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
} __attribute__((packed));
static_assert(sizeof(VnetHdr) == 10);

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

constexpr size_t kMaxPacket = 65536 + 10;  // + VnetHdr
constexpr int kReadBatch = 64;

struct Packet {
  uint64_t at = 0;
  size_t len = 0;
  std::vector<char> data;
};

// Bytes a packet occupies on the wire: a GSO super-packet is sent as
// ceil(payload / gso_size) segments, each with its own headers.
uint64_t wire_bytes(const char* buf, size_t len, bool vnet) {
  if (!vnet) return len;
  const auto* h = reinterpret_cast<const VnetHdr*>(buf);
  size_t pkt = len - sizeof(VnetHdr);
  if (h->gso_type == 0 || h->gso_size == 0) return pkt;
  size_t hdr = h->hdr_len ? h->hdr_len : 52;
  size_t payload = pkt > hdr ? pkt - hdr : 0;
  size_t segs = (payload + h->gso_size - 1) / h->gso_size;
  return pkt + (segs > 1 ? (segs - 1) * hdr : 0);
}

}  // namespace

Forwarder::Forwarder(int in_fd, int out_fd, const LinkParams& p, bool vnet, uint64_t seed)
    : in_fd_(in_fd), out_fd_(out_fd), model_(p, seed), vnet_(vnet) {}

Forwarder::~Forwarder() { stop(); }

void Forwarder::start() { thread_ = std::thread([this] { run(); }); }

void Forwarder::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Forwarder::run() {
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake within a microsecond of a delivery time
  std::deque<Packet> line;        // in delivery order (the model never reorders)
  std::vector<std::vector<char>> pool;
  auto buffer = [&] {
    if (pool.empty()) return std::vector<char>(kMaxPacket);
    std::vector<char> b = std::move(pool.back());
    pool.pop_back();
    return b;
  };
  while (!stop_) {
    uint64_t now = now_ns();
    while (!line.empty() && line.front().at <= now) {
      Packet& p = line.front();
      ssize_t w = write(out_fd_, p.data.data(), p.len);
      (void)w;  // a TUN write only fails for a malformed packet or a vanished device
      pool.push_back(std::move(p.data));
      line.pop_front();
    }
    bool got = false;
    for (int i = 0; i < kReadBatch; ++i) {
      std::vector<char> b = buffer();
      ssize_t n = read(in_fd_, b.data(), b.size());
      if (n <= 0) {
        pool.push_back(std::move(b));
        break;
      }
      got = true;
      now = now_ns();
      if (auto at = model_.admit(now, wire_bytes(b.data(), size_t(n), vnet_))) {
        line.push_back(Packet{*at, size_t(n), std::move(b)});
      } else {
        pool.push_back(std::move(b));
      }
    }
    if (got) continue;
    now = now_ns();
    uint64_t wait = line.empty() ? 50'000'000 : (line.front().at > now ? line.front().at - now : 0);
    if (wait == 0) continue;
    timespec ts{time_t(wait / 1000000000ull), long(wait % 1000000000ull)};
    pollfd pfd{in_fd_, POLLIN, 0};
    ppoll(&pfd, 1, &ts, nullptr);
  }
}

}  // namespace linkemu
