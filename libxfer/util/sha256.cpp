#include "xfer/sha256.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
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
  // A buffer the file's size, up to 1 MiB, never zeroed: a job of many small
  // files hashes each on one lane (file_work.h), and a zeroed megabyte per
  // 100-KB file cost more than its hash.
  struct stat st;
  size_t want = fstat(fd, &st) == 0 && st.st_size > 0 ? size_t(st.st_size) + 1 : size_t(64) << 10;
  const size_t len = std::min<size_t>(want, size_t(1) << 20);
  std::unique_ptr<char[]> buf(new char[len]);
  off_t off = 0;
  for (;;) {
    if (stop && *stop) throw IoError(ECANCELED, "read " + what);
    ssize_t n = pread(fd, buf.get(), len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno, "read " + what);
    }
    if (n == 0) break;
    d.update(buf.get(), static_cast<size_t>(n));
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
