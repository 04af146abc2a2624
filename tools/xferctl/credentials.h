// xferctl's credential flags: secrets come from files (or standard input,
// "-"), opened by xferctl as the user who runs it and passed to xferd as
// file descriptors; never from argv, where ps shows them to every user.
#pragma once

#include <systemd/sd-bus.h>

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xfer/credentials.h"

namespace xferctl {

struct CredentialFlags {
  // credentials key -> file path ("-": standard input), for secrets
  std::map<std::string, std::string> files;
  // credentials key -> value, for what is not secret (user, proxy URL, ...)
  std::map<std::string, std::string> plain;
  bool allow_downgrade = false;
  bool any() const { return !files.empty() || !plain.empty() || allow_downgrade; }
};

// The flags on cmd (submit, credentials).
void add_credential_flags(CLI::App* cmd, CredentialFlags& into);

// Appends the a{sv} (SetCredentials' argument, or the value of Submit's
// "credentials" option) and marks the message sensitive. Files are opened
// here, as the caller; "-" is read from standard input and sent as a string.
// Returns sd-bus's result (< 0 on failure); throws std::runtime_error naming
// a file that cannot be opened.
int append_credentials(sd_bus_message* m, const CredentialFlags& c);

// xferctl run: the same flags read here (files as the user who runs it) and
// checked as xferd checks them, bound to the manifest's origins. Throws
// std::runtime_error saying what is wrong (never a value).
std::shared_ptr<const xfer::JobCredentials> local_credentials(const CredentialFlags& c,
                                                              const std::vector<std::string>& origins);

}  // namespace xferctl
