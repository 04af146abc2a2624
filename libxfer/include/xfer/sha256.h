#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

namespace xfer {

// Streaming SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  void update(const void* data, size_t len);
  std::string hex();  // lower-case; finishes the digest

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Lower-case hex SHA-256 of everything readable from fd (pread from 0).
// Throws IoError on a read error, and IoError(ECANCELED) when *stop turns
// true (checked between 1 MiB blocks).
std::string sha256_fd(int fd, const std::string& what, const std::atomic<bool>* stop = nullptr);
std::string sha256_hex(std::string_view data);

}  // namespace xfer
