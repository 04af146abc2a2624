#include "tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>

namespace xtest {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificates: ") + what + " failed");
}

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

Key new_key() {
  Key k(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  check(k != nullptr, "EVP_EC_gen");
  return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named by spec, signed by issuer_key; issuer null: self-signed.
Cert make_cert(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
  Cert c(X509_new(), &X509_free);
  check(c != nullptr, "X509_new");
  X509_set_version(c.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), spec.valid_from_s);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), spec.valid_until_s);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : c.get();
  X509_set_issuer_name(c.get(), X509_get_subject_name(signer));
  add_ext(c.get(), signer, NID_subject_key_identifier, "hash");
  add_ext(c.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (ca) {
    add_ext(c.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(c.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(c.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(c.get(), signer, NID_key_usage, "critical,digitalSignature");
    add_ext(c.get(), signer, NID_ext_key_usage, spec.ext_key_usage);
    if (!spec.alt_names.empty()) add_ext(c.get(), signer, NID_subject_alt_name, spec.alt_names);
  }
  check(X509_sign(c.get(), issuer_key ? issuer_key : key, EVP_sha256()) > 0, "X509_sign");
  return c;
}

std::string to_pem(X509* cert) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, cert);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string out(p, size_t(n));
  BIO_free(b);
  return out;
}

std::string to_pem(EVP_PKEY* key) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string out(p, size_t(n));
  BIO_free(b);
  return out;
}

}  // namespace

std::string encrypted_key(const std::string& key_pem, const std::string& passphrase) {
  BIO* in = BIO_new_mem_buf(key_pem.data(), int(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr);
  BIO_free(in);
  if (!key) throw std::runtime_error("encrypted_key: not a PEM private key");
  BIO* out = BIO_new(BIO_s_mem());
  int ok = PEM_write_bio_PKCS8PrivateKey(out, key, EVP_aes_256_cbc(), const_cast<char*>(passphrase.data()),
                                         int(passphrase.size()), nullptr, nullptr);
  EVP_PKEY_free(key);
  char* data = nullptr;
  long n = BIO_get_mem_data(out, &data);
  std::string pem = ok ? std::string(data, size_t(n)) : "";
  BIO_free(out);
  if (pem.empty()) throw std::runtime_error("encrypted_key: PEM_write_bio_PKCS8PrivateKey failed");
  return pem;
}

std::string CertKey::write(const std::string& dir, const std::string& name) const {
  std::string base = dir + "/" + name;
  std::ofstream(base + ".crt") << cert_pem;
  std::ofstream(base + ".key") << key_pem;
  chmod((base + ".key").c_str(), 0600);
  return base;
}

struct TestCa::Keys {
  Key key{nullptr, &EVP_PKEY_free};
  Cert cert{nullptr, &X509_free};
};

TestCa::TestCa(const std::string& name) : keys_(std::make_unique<Keys>()) {
  CertSpec spec;
  spec.common_name = name;
  spec.valid_from_s = -86400;
  spec.valid_until_s = 30 * 86400;
  keys_->key = new_key();
  keys_->cert = make_cert(spec, keys_->key.get(), nullptr, nullptr, true);
  ca_.cert_pem = to_pem(keys_->cert.get());
  ca_.key_pem = to_pem(keys_->key.get());
}

TestCa::~TestCa() = default;

std::string TestCa::subject_hash() const {
  char buf[16];
  snprintf(buf, sizeof buf, "%08lx", X509_subject_name_hash(keys_->cert.get()));
  return buf;
}

CertKey TestCa::issue(const CertSpec& spec) const {
  Key k = new_key();
  Cert c = make_cert(spec, k.get(), keys_->cert.get(), keys_->key.get(), false);
  return {to_pem(c.get()), to_pem(k.get())};
}

CertKey self_signed(const CertSpec& spec) {
  Key k = new_key();
  Cert c = make_cert(spec, k.get(), nullptr, nullptr, false);
  return {to_pem(c.get()), to_pem(k.get())};
}

}  // namespace xtest
