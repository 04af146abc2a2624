// Certificates for the https tests and the bench's TLS scenarios, made with
// libcrypto: a private CA, server certificates it signs (valid, expired, for
// another host) and self-signed ones. Keys are P-256: quick to make, and what
// a modern server would use.
#pragma once

#include <memory>
#include <string>

namespace xtest {

struct CertKey {
  std::string cert_pem, key_pem;
  // Writes both next to each other (DIR/NAME.crt, DIR/NAME.key); returns DIR/NAME.
  std::string write(const std::string& dir, const std::string& name) const;
};

struct CertSpec {
  std::string common_name = "xfer test server";
  std::string alt_names = "IP:127.0.0.1,DNS:localhost";  // subjectAltName, OpenSSL's syntax
  long valid_from_s = -3600;                               // relative to now
  long valid_until_s = 7 * 86400;
  std::string ext_key_usage = "serverAuth";  // "clientAuth" for a client certificate
};

class TestCa {
 public:
  explicit TestCa(const std::string& name = "xfer test CA");
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;
  const std::string& cert_pem() const { return ca_.cert_pem; }
  std::string subject_hash() const;  // the name OpenSSL looks it up by in a hashed directory (without ".0")
  CertKey issue(const CertSpec& spec) const;

 private:
  struct Keys;
  std::unique_ptr<Keys> keys_;
  CertKey ca_;
};

CertKey self_signed(const CertSpec& spec);

// A PEM private key encrypted with a passphrase (PKCS#8, AES-256-CBC).
std::string encrypted_key(const std::string& key_pem, const std::string& passphrase);

}  // namespace xtest
