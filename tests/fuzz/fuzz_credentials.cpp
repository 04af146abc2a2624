// libFuzzer: the credentials a caller gives with Submit or SetCredentials
// (protocol/credentials_args.cpp): any keys, types and values are taken or
// refused with InvalidArguments; a refusal never quotes a value, and what is
// taken binds to the job's origins or is refused.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "credentials_args.h"

static const std::string kCanary = "xfercanaryFUZZ";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kKeys[] = {"origin",  "bearer_token", "user",      "password",  "auth",           "headers",
                                      "client_cert", "client_key", "key_passphrase", "netrc", "aws_sigv4", "aws_keys",
                                      "proxy",   "proxy_user",   "proxy_password", "no_proxy", "allow_downgrade", "other"};
  FuzzedDataProvider in(data, size);
  std::vector<xferd::CredentialField> fields;
  while (in.remaining_bytes() > 0 && fields.size() < 12) {
    xferd::CredentialField f;
    f.key = kKeys[in.ConsumeIntegralInRange<size_t>(0, sizeof kKeys / sizeof *kKeys - 1)];
    f.type = in.ConsumeBool() ? 's' : 'b';
    f.value = in.ConsumeRandomLengthString(512);
    // Every secret carries a canary: no message may ever show it.
    if (f.key != "origin" && f.key != "user" && f.key != "proxy" && f.key != "proxy_user" && f.key != "auth" &&
        f.key != "aws_sigv4" && f.key != "no_proxy" && f.key != "allow_downgrade" && f.key != "other")
      f.value.insert(std::min(f.value.size(), f.value.size() / 2), kCanary);
    fields.push_back(std::move(f));
  }
  try {
    xferd::CredentialArgs a = xferd::credentials_from_fields(fields);
    auto bound = xferd::bind_credentials(std::move(a), {"https://h.example:443", "http://127.0.0.1:8080"});
    if (bound->describe().find(kCanary) != std::string::npos) std::abort();
  } catch (const xferd::Refusal& r) {
    if (std::string(r.what()).find(kCanary) != std::string::npos) std::abort();
  }
  return 0;
}
