// What a job is given to prove itself with, from its owner and from its
// policy: the policy's secrets (systemd credentials, never the config's
// text), merged into the job's own for the origins it fetches from, and the
// CA bundle an https job trusts. The service holds each job's; this file
// decides what they are.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "xfer/credentials.h"

namespace xferd {

// One systemd credential: $CREDENTIALS_DIRECTORY/NAME (from LoadCredential=
// in xferd.service), its trailing newline dropped. Throws
// std::runtime_error naming the credential and how to give it.
xfer::Secret systemd_credential(const std::string& name);

// A job's credentials with its policy's, for the job's origins. A job that
// brings its own proxy, or its own CA file for an https origin, gets none of
// the policy's origin credentials (*withheld says so, when given): the
// caller's proxy would read them. Throws std::runtime_error naming a
// credential that cannot be read.
std::shared_ptr<const xfer::JobCredentials> with_policy_credentials(const Policy& p,
                                                                    const std::shared_ptr<const xfer::JobCredentials>& job,
                                                                    const std::vector<std::string>& origins, bool own_ca,
                                                                    std::string* withheld);

// A CA bundle is at most this large.
inline constexpr size_t kMaxCaBytes = 1 << 20;
// A CA bundle from a descriptor opened as its owner (`path` names it in
// errors), left at its start to be read again; "" with *why when unusable.
std::string read_ca_pem(int fd, const std::string& path, std::string* why);
// The policy's ca_file (the admin's, read as root): "" without one, or with
// *why when it is unusable.
std::string policy_ca_pem(const Policy& p, std::string* why);

}  // namespace xferd
