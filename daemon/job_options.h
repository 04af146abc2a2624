// The options a caller may give a job (Submit's a{sv}, xferctl submit's
// flags): one table, read by the daemon's parser and by xferctl's flags.
#pragma once

namespace xferd {

struct JobOption {
  const char* name;  // a{sv} key; xferctl's flag is --NAME with '_' as '-'
  char type;         // 's' text, 'd' number, 'u' count
  const char* help;
};

inline constexpr JobOption kJobOptions[] = {
    {"label", 's', "a name for the job, shown by list and status"},
    {"target_mbps", 'd', "throughput-target policies: the target in Mbit/s (instead of the policy's)"},
    {"target_pct", 'd', "throughput-target policies: the target in percent of the measured maximum"},
    {"max_channels", 'u', "at most this many channels (files in flight); only lowers the policy's limit"},
    {"ca_file", 's', "a PEM file of CA certificates to verify https servers against (read as the caller)"},
};

}  // namespace xferd
