// Submit's and SubmitManifest's arguments as the daemon takes them: decoded
// from the message with every check that needs no state (how many entries,
// each URL, file name and sha256, the options' names and types), each
// refusal with its own error name. Entries of Submit are data: they are never
// turned into manifest text and parsed again, so no byte of a URL can become
// a comment or a second entry.
#pragma once

#include <systemd/sd-bus.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "credentials_args.h"
#include "errors.h"
#include "xfer/manifest.h"

namespace xferd {

struct SubmitRequest {
  xfer::Manifest manifest;
  std::string dest, policy;
  nlohmann::json options = nlohmann::json::object();
  std::optional<CredentialArgs> credentials;  // options' "credentials" (never in `options`: those are stored)
};

// The most entries a Submit may carry, and the refusal for the one too many
// (the per-job limit, or what is left of the caller's per-user one).
struct EntryLimit {
  size_t most;
  const char* code;  // an err:: name
  std::string why;
  EntryLimit(size_t per_job);  // limits.max_entries_per_job's words
  EntryLimit(size_t most, const char* code, std::string why) : most(most), code(code), why(std::move(why)) {}
};

// Submit: (a(sts) entries, s destination, s policy, a{sv} options). More than
// limit.most entries are refused as soon as the one too many is read.
SubmitRequest read_submit(sd_bus_message* m, const EntryLimit& limit);
// SubmitManifest: (s manifest, s destination, s policy, a{sv} options).
SubmitRequest read_submit_manifest(sd_bus_message* m, const EntryLimit& limit);
// The a{sv} options, each checked by xfer::option_table() (scope kJob).
// "credentials" (an a{sv}, credentials_args.h) goes to *creds when given,
// and is refused when creds is null.
nlohmann::json read_options(sd_bus_message* m, std::optional<CredentialArgs>* creds = nullptr);
// Manifest text (SubmitManifest, a job carried on from the store), checked the
// same way: the entry limit before anything is parsed.
xfer::Manifest manifest_from_text(const std::string& text, const EntryLimit& limit);

}  // namespace xferd
