#pragma once

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
// Throws IoError on a read error.
std::string sha256_fd(int fd, const std::string& what);
std::string sha256_hex(std::string_view data);

}  // namespace xfer
