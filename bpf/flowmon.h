/* What the flow monitor's BPF programs and userspace share. Flows are keyed
 * by socket cookie; only sockets the engine registered in `owned` (socket
 * storage: the job id) are followed; other TCP traffic costs nothing but the
 * state-change tracepoint's storage lookup. */
#ifndef XFER_FLOWMON_H
#define XFER_FLOWMON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define FLOWMON_MAX_FLOWS 65536

enum flowmon_event_type { FLOWMON_OPEN = 1, FLOWMON_CLOSE = 2 };

/* Only what userspace reads: every field is a CO-RE read, once per sample
 * of every owned flow (and once more when it closes). */
struct flowmon_stats {
  __u64 bytes_received;   /* tcp_sock.bytes_received (the final count of a closed flow) */
  __u32 srtt_us;          /* smoothed RTT of our own sent data (srtt_us >> 3) */
  __u32 rttvar_us;        /* mdev_us >> 2 */
  __u32 rcv_rtt_us;       /* receiver-side RTT estimate (rcv_rtt_est >> 3): what a download has */
  __u32 total_retrans;    /* our retransmissions */
  __u32 rcv_ooopack;      /* out-of-order packets received: the receiver's sight of loss */
  __u32 job;
  __u16 sport, dport;     /* host order; read once, when the entry is made */
};

/* A flow opened or closed: userspace needs only which. */
struct flowmon_event {
  __u64 cookie;
  __u32 type;             /* enum flowmon_event_type */
  __u32 job;
};

#endif
