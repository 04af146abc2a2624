#include "submit_args.h"

#include <cstring>
#include <fmt/format.h>
#include <optional>

#include "xfer/options.h"
#include "xfer/text.h"

namespace xferd {

namespace {

// One value of a basic D-Bus type.
template <class T>
T read_basic(sd_bus_message* m, char type, const char* what) {
  T x{};
  check(sd_bus_message_read_basic(m, type, &x), what);
  return x;
}

Refusal too_many(const EntryLimit& limit) { return Refusal(limit.code, limit.why); }

// The checks of one entry that have an error name of their own.
void check_entry(const std::string& url, const std::string& where) {
  if (std::string why = xfer::check_url(url); !why.empty())
    throw Refusal(err::kUnsupportedUrl, fmt::format("{}: {}: {}", where, xfer::shown_url(url), why));
  try {
    xfer::file_name_from_url(url);
  } catch (const std::invalid_argument& e) {
    throw Refusal(err::kBadFileName, fmt::format("{}: {}: {}; the file name must stay inside the destination", where,
                                                 xfer::shown_url(url), e.what()));
  }
}

xfer::Manifest finish(xfer::ManifestBuilder& b) {
  try {
    return b.take();
  } catch (const xfer::ManifestError& e) {
    throw Refusal(err::kInvalidManifest, std::string("manifest rejected, nothing fetched:\n") + e.what());
  }
}

}  // namespace

EntryLimit::EntryLimit(size_t per_job)
    : most(per_job),
      code(err::kTooManyEntries),
      why(fmt::format("the manifest has more than {} entries, the most this daemon takes per job "
                      "(limits.max_entries_per_job); split it into several jobs",
                      per_job)) {}

xfer::Manifest manifest_from_text(const std::string& text, const EntryLimit& limit) {
  size_t n = 0, pos = 0;
  int lineno = 0;
  std::vector<std::pair<int, std::string_view>> urls;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    ++lineno;
    std::vector<std::string_view> fields = xfer::manifest_fields(line);
    if (fields.empty()) continue;
    if (++n > limit.most) throw too_many(limit);
    urls.emplace_back(lineno, fields[0]);
  }
  for (const auto& [l, url] : urls) check_entry(std::string(url), fmt::format("entry on line {}", l));
  try {
    return xfer::parse_manifest(text, "manifest");
  } catch (const xfer::ManifestError& e) {
    throw Refusal(err::kInvalidManifest, std::string("manifest rejected, nothing fetched:\n") + e.what());
  }
}

nlohmann::json read_options(sd_bus_message* m, std::optional<CredentialArgs>* creds) {
  nlohmann::json out = nlohmann::json::object();
  check(sd_bus_message_enter_container(m, 'a', "{sv}"), "options");
  for (;;) {
    int r = sd_bus_message_enter_container(m, 'e', "sv");
    check(r, "options");
    if (r == 0) break;
    const char* key = nullptr;
    check(sd_bus_message_read(m, "s", &key), "option name");
    if (creds && std::strcmp(key, "credentials") == 0) {
      check(sd_bus_message_enter_container(m, 'v', "a{sv}"), "option credentials (an a{sv})");
      *creds = read_credentials(m);
      check(sd_bus_message_exit_container(m), "option credentials");
      check(sd_bus_message_exit_container(m), "options");
      continue;
    }
    const xfer::OptionSpec* opt = xfer::find_option(key);
    if (!opt || !(opt->scopes & xfer::kJob)) {
      std::string known;
      for (const xfer::OptionSpec& o : xfer::option_table())
        if (o.scopes & xfer::kJob) known += (known.empty() ? "" : ", ") + o.name;
      throw Refusal(err::kInvalidArguments, fmt::format("unknown option '{}'; known: {}", xfer::shown(key, 64), known));
    }
    std::string vt = enter_variant(m, "option value");
    // The variant as JSON; the table checks it (the same words as xferctl
    // and the config use).
    nlohmann::json v;
    if (vt == "s") v = std::string(read_basic<const char*>(m, 's', key));
    else if (vt == "d") v = read_basic<double>(m, 'd', key);
    else if (vt == "u") v = read_basic<uint32_t>(m, 'u', key);
    else if (vt == "i") v = read_basic<int32_t>(m, 'i', key);
    else if (vt == "t") v = read_basic<uint64_t>(m, 't', key);
    else if (vt == "x") v = read_basic<int64_t>(m, 'x', key);
    else
      throw Refusal(err::kInvalidArguments,
                    fmt::format("option {} takes a {} (s, d, u, i, t or x), not '{}'", key,
                                opt->type == xfer::OptionType::Text || opt->type == xfer::OptionType::Path ? "string"
                                                                                                            : "number",
                                xfer::printable(vt)));
    if (std::string why = xfer::check_option(*opt, v); !why.empty()) throw Refusal(err::kInvalidArguments, why);
    out[opt->name] = v;
    check(sd_bus_message_exit_container(m), "option value");
    check(sd_bus_message_exit_container(m), "options");
  }
  check(sd_bus_message_exit_container(m), "options");
  return out;
}

SubmitRequest read_submit(sd_bus_message* m, const EntryLimit& limit) {
  SubmitRequest req;
  xfer::ManifestBuilder b("entries");
  check(sd_bus_message_enter_container(m, 'a', "(sts)"), "entries");
  int n = 0;
  for (;;) {
    const char *url = nullptr, *sha = nullptr;
    uint64_t size = 0;
    int r = sd_bus_message_read(m, "(sts)", &url, &size, &sha);
    check(r, "entries");
    if (r == 0) break;
    if (size_t(++n) > limit.most) throw too_many(limit);
    std::string u(url);
    check_entry(u, fmt::format("entry {}", n));
    // 0: the size is not known; HEAD finds it.
    b.add(std::move(u), size > 0 ? std::optional<uint64_t>(size) : std::nullopt, sha, n);
  }
  check(sd_bus_message_exit_container(m), "entries");
  const char *dest = nullptr, *policy = nullptr;
  check(sd_bus_message_read(m, "ss", &dest, &policy), "destination, policy");
  req.dest = dest;
  req.policy = policy;
  req.options = read_options(m, &req.credentials);
  if (n == 0) throw Refusal(err::kInvalidManifest, "no entries: nothing to fetch");
  req.manifest = finish(b);
  return req;
}

SubmitRequest read_submit_manifest(sd_bus_message* m, const EntryLimit& limit) {
  SubmitRequest req;
  const char *text = nullptr, *dest = nullptr, *policy = nullptr;
  check(sd_bus_message_read(m, "sss", &text, &dest, &policy), "manifest, destination, policy");
  req.dest = dest;
  req.policy = policy;
  req.options = read_options(m, &req.credentials);
  req.manifest = manifest_from_text(text, limit);
  return req;
}

}  // namespace xferd
