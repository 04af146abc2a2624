// The daemon's refusals: a D-Bus error name and a sentence a person can act
// on. Shared by the service, the bus glue and the argument decoding.
#pragma once

#include <systemd/sd-bus.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace xferd {

// Error names, org.xferd.Xferd1.Error.*: every refusal carries one and a
// sentence a person can act on.
namespace err {
inline constexpr const char* kInvalidManifest = "org.xferd.Xferd1.Error.InvalidManifest";
inline constexpr const char* kUnsupportedUrl = "org.xferd.Xferd1.Error.UnsupportedURL";
inline constexpr const char* kBadFileName = "org.xferd.Xferd1.Error.BadFileName";
inline constexpr const char* kDestination = "org.xferd.Xferd1.Error.DestinationNotWritable";
inline constexpr const char* kTooManyEntries = "org.xferd.Xferd1.Error.TooManyEntries";
inline constexpr const char* kTooManyJobs = "org.xferd.Xferd1.Error.TooManyJobs";
inline constexpr const char* kUnknownPolicy = "org.xferd.Xferd1.Error.UnknownPolicy";
inline constexpr const char* kPolicyForbidden = "org.xferd.Xferd1.Error.PolicyForbidden";
inline constexpr const char* kInvalidArguments = "org.xferd.Xferd1.Error.InvalidArguments";
inline constexpr const char* kNoSuchJob = "org.xferd.Xferd1.Error.NoSuchJob";
inline constexpr const char* kNotOwner = "org.xferd.Xferd1.Error.NotJobOwner";
inline constexpr const char* kBadState = "org.xferd.Xferd1.Error.BadJobState";
inline constexpr const char* kConfig = "org.xferd.Xferd1.Error.ConfigInvalid";
inline constexpr const char* kNotPrivileged = "org.xferd.Xferd1.Error.NotPrivileged";
inline constexpr const char* kInternal = "org.xferd.Xferd1.Error.Internal";
inline constexpr const char* kNameInUse = "org.xferd.Xferd1.Error.NameInUse";
inline constexpr const char* kFloorDoesNotFit = "org.xferd.Xferd1.Error.FloorDoesNotFit";
inline constexpr const char* kSecretsTooLarge = "org.xferd.Xferd1.Error.SecretsTooLarge";
}  // namespace err

// A refusal: the D-Bus error name and its message.
struct Refusal : std::runtime_error {
  Refusal(const char* n, const std::string& m) : std::runtime_error(m), name(n) {}
  const char* name;
};

// An sd-bus call on the caller's message that failed (r < 0): the caller sent
// something other than the method's signature says.
inline void check(int r, const char* what) {
  if (r < 0) throw Refusal(err::kInvalidArguments, std::string(what) + ": " + strerror(-r));
}

// Enters the variant at m's position (an a{sv} entry's value); returns its
// signature ("s", "a{sv}", ...). `what` names it in the refusal.
inline std::string enter_variant(sd_bus_message* m, const char* what) {
  char type = 0;
  const char* contents = nullptr;
  check(sd_bus_message_peek_type(m, &type, &contents), what);
  check(sd_bus_message_enter_container(m, 'v', contents), what);
  return contents ? contents : "";
}

}  // namespace xferd
