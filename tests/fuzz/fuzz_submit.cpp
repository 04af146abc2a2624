// libFuzzer: Submit's and SubmitManifest's argument decoding (with the
// credentials option's). The input
// drives a real sd-bus message (its types, strings, numbers and options, right
// or wrong), sealed as the bus would deliver it; decoding returns a request or
// throws Refusal with one of the project's error names, nothing else.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "submit_args.h"

namespace {

sd_bus* client() {
  static sd_bus* bus = [] {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv);
    sd_bus* b = nullptr;
    if (sd_bus_new(&b) < 0 || sd_bus_set_fd(b, sv[0], sv[0]) < 0 || sd_bus_start(b) < 0) std::abort();
    return b;  // authenticating: enough to build messages on
  }();
  return bus;
}

// A failed append (a string that is not UTF-8, which the bus would refuse
// too) leaves the message unusable: such inputs are dropped (ok = false).
void append_string(sd_bus_message* m, FuzzedDataProvider& in, bool& ok) {
  std::string s = in.ConsumeRandomLengthString(300);
  ok = ok && sd_bus_message_append(m, "s", s.c_str()) >= 0;
}

// The credentials option's a{sv}: its keys, right or wrong, with strings,
// bytes, booleans or a wrong type.
void append_credentials(sd_bus_message* m, FuzzedDataProvider& in, bool& ok) {
  static const char* keys[] = {"origin", "bearer_token", "user",  "password", "auth",     "headers", "client_cert",
                               "netrc",  "aws_sigv4",    "aws_keys", "proxy", "no_proxy", "allow_downgrade", "x"};
  ok = ok && sd_bus_message_open_container(m, 'v', "a{sv}") >= 0 && sd_bus_message_open_container(m, 'a', "{sv}") >= 0;
  int n = in.ConsumeIntegralInRange(0, 6);
  for (int i = 0; i < n && ok; ++i) {
    ok = sd_bus_message_open_container(m, 'e', "sv") >= 0 &&
         sd_bus_message_append(m, "s", keys[in.ConsumeIntegralInRange<size_t>(0, sizeof keys / sizeof *keys - 1)]) >= 0;
    std::string v = in.ConsumeRandomLengthString(300);
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0: ok = ok && sd_bus_message_append(m, "v", "s", v.c_str()) >= 0; break;
      case 1:
        ok = ok && sd_bus_message_open_container(m, 'v', "ay") >= 0 &&
             sd_bus_message_append_array(m, 'y', v.data(), v.size()) >= 0 && sd_bus_message_close_container(m) >= 0;
        break;
      case 2: ok = ok && sd_bus_message_append(m, "v", "b", int(in.ConsumeBool())) >= 0; break;
      default: ok = ok && sd_bus_message_append(m, "v", "u", 7u) >= 0; break;
    }
    ok = ok && sd_bus_message_close_container(m) >= 0;
  }
  ok = ok && sd_bus_message_close_container(m) >= 0 && sd_bus_message_close_container(m) >= 0;
}

void append_options(sd_bus_message* m, FuzzedDataProvider& in, bool& ok) {
  static const char* keys[] = {"label", "target_mbps", "target_pct", "max_channels", "ca_file", "speed", "", "credentials"};
  sd_bus_message_open_container(m, 'a', "{sv}");
  int n = in.ConsumeIntegralInRange(0, 5);
  for (int i = 0; i < n; ++i) {
    sd_bus_message_open_container(m, 'e', "sv");
    sd_bus_message_append(m, "s", keys[in.ConsumeIntegralInRange<size_t>(0, 7)]);
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0: {
        std::string s = in.ConsumeRandomLengthString(300);
        ok = ok && sd_bus_message_append(m, "v", "s", s.c_str()) >= 0;
        break;
      }
      case 1: sd_bus_message_append(m, "v", "d", in.ConsumeFloatingPoint<double>()); break;
      case 2: sd_bus_message_append(m, "v", "u", in.ConsumeIntegral<uint32_t>()); break;
      case 3: sd_bus_message_append(m, "v", "i", in.ConsumeIntegral<int32_t>()); break;
      case 4: sd_bus_message_append(m, "v", "t", in.ConsumeIntegral<uint64_t>()); break;
      case 5: sd_bus_message_append(m, "v", "b", int(in.ConsumeBool())); break;
      case 6: append_credentials(m, in, ok); break;
      default: sd_bus_message_append(m, "v", "as", 2, "a", "b"); break;
    }
    sd_bus_message_close_container(m);
  }
  sd_bus_message_close_container(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  bool manifest = in.ConsumeBool();
  sd_bus_message* m = nullptr;
  if (sd_bus_message_new_method_call(client(), &m, "org.xferd.Xferd1", "/org/xferd/Xferd1", "org.xferd.Manager1",
                                     manifest ? "SubmitManifest" : "Submit") < 0)
    std::abort();
  bool ok = true;
  if (manifest) {
    append_string(m, in, ok);
  } else if (in.ConsumeBool()) {  // the right type of entries
    sd_bus_message_open_container(m, 'a', "(sts)");
    int n = in.ConsumeIntegralInRange(0, 40);
    for (int i = 0; i < n; ++i) {
      std::string url = in.ConsumeRandomLengthString(200), sha = in.ConsumeRandomLengthString(70);
      uint64_t sz = in.ConsumeIntegral<uint64_t>();
      ok = ok && sd_bus_message_append(m, "(sts)", url.c_str(), sz, sha.c_str()) >= 0;
    }
    sd_bus_message_close_container(m);
  } else {  // a wrong one
    sd_bus_message_append(m, "as", 1, "http://h/a");
  }
  if (in.ConsumeBool()) {
    append_string(m, in, ok);
    append_string(m, in, ok);
  }
  if (in.ConsumeBool()) append_options(m, in, ok);
  if (!ok) {
    sd_bus_message_unref(m);
    return 0;
  }
  if (sd_bus_message_seal(m, 1, 0) < 0 || sd_bus_message_rewind(m, 1) < 0) std::abort();
  size_t limit = in.ConsumeIntegralInRange<size_t>(1, 50);
  try {
    xferd::SubmitRequest r = manifest ? xferd::read_submit_manifest(m, limit) : xferd::read_submit(m, limit);
    if (r.manifest.entries.empty() || r.manifest.entries.size() > limit) std::abort();
  } catch (const xferd::Refusal& e) {
    if (std::strncmp(e.name, "org.xferd.Xferd1.Error.", 23) != 0) std::abort();
  }
  sd_bus_message_unref(m);
  return 0;
}
