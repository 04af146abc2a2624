// A job's credentials as its owner gives them over D-Bus: the "credentials"
// entry of Submit's options (and SetCredentials' argument), an a{sv} whose
// secret values come as strings in a message the caller marked sensitive,
// or as file descriptors the caller opened ('h'): the daemon never opens a
// path for a caller (root reading /root/.netrc on a user's behalf would be
// the confused deputy). Keys:
//   origin s            the origin (any URL of it) the credentials are for;
//                       default: the job's one origin
//   bearer_token s|h    Authorization: Bearer
//   user s, password s|h, auth s (basic | digest | any: never NTLM or Negotiate)
//   headers s|h         "Name: value" lines (an API key header...)
//   client_cert s|h, client_key s|h, key_passphrase s|h    PEM
//   netrc s|h           netrc text: each origin of the job whose host it names
//   aws_sigv4 s         "aws:amz:REGION:SERVICE"; aws_keys s|h "ACCESS_KEY_ID:SECRET"
//   proxy s, proxy_user s, proxy_password s|h, no_proxy s
//   allow_downgrade b   an https URL may redirect to http
// Every refusal names the key, never a value.
#pragma once

#include <systemd/sd-bus.h>

#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "xfer/credentials.h"

namespace xferd {

struct CredentialArgs {
  std::string origin;  // as given ("" the job's one origin)
  xfer::Credentials creds;
  std::vector<xfer::NetrcEntry> netrc;
  xfer::Proxy proxy;
  bool allow_downgrade = false;
};

// Reads the a{sv} at the message's position.
CredentialArgs read_credentials(sd_bus_message* m);
// The same from a D-Bus-free description (the fuzz target's and the tests'):
// key, type ('s' or 'b') and value, as read_credentials takes them.
struct CredentialField {
  std::string key;
  char type = 's';
  std::string value;
};
CredentialArgs credentials_from_fields(const std::vector<CredentialField>& fields);
// The value behind a descriptor the caller passed ('h'), for `key`: read at
// once without ever waiting on the caller (see the .cpp), at most 1 MiB.
// Throws Refusal (InvalidArguments) naming the key.
std::string read_descriptor(int fd, const std::string& key);
// Bound to the job's origins (scheme://host:port each): explicit credentials
// to their origin (which must be one of the job's), netrc entries to each
// origin whose host they name. Throws Refusal (InvalidArguments).
std::shared_ptr<const xfer::JobCredentials> bind_credentials(CredentialArgs a, const std::vector<std::string>& origins);

}  // namespace xferd
