#include "xfer/sha256.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "xfer/safe_open.h"

namespace xfer {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) { EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr); }
Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t len) { EVP_DigestUpdate(ctx_->md, data, len); }

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, md, &len);
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += digits[md[i] >> 4];
    s += digits[md[i] & 15];
  }
  return s;
}

std::string sha256_fd(int fd, const std::string& what, const std::atomic<bool>* stop) {
  Sha256 d;
  std::vector<char> buf(1 << 20);
  off_t off = 0;
  for (;;) {
    if (stop && *stop) throw IoError(ECANCELED, "read " + what);
    ssize_t n = pread(fd, buf.data(), buf.size(), off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno, "read " + what);
    }
    if (n == 0) break;
    d.update(buf.data(), static_cast<size_t>(n));
    off += n;
  }
  return d.hex();
}

std::string sha256_hex(std::string_view data) {
  Sha256 d;
  d.update(data.data(), data.size());
  return d.hex();
}

}  // namespace xfer
