/* What the flow monitor's BPF programs and userspace share. Flows are keyed
 * by socket cookie; only sockets the engine registered in `owned` (cookie ->
 * job id) are followed, so other TCP traffic costs one hash lookup. */
#ifndef XFER_FLOWMON_H
#define XFER_FLOWMON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define FLOWMON_MAX_FLOWS 65536

enum flowmon_event_type { FLOWMON_OPEN = 1, FLOWMON_CLOSE = 2 };

struct flowmon_stats {
  __u64 bytes_received;   /* tcp_sock.bytes_received */
  __u64 bytes_acked;      /* tcp_sock.bytes_acked */
  __u64 first_ns, last_ns;
  __u32 srtt_us;          /* smoothed RTT of our own sent data (srtt_us >> 3) */
  __u32 rttvar_us;        /* mdev_us >> 2 */
  __u32 rcv_rtt_us;       /* receiver-side RTT estimate (rcv_rtt_est >> 3): what a download has */
  __u32 total_retrans;    /* our retransmissions */
  __u32 lost_out;
  __u32 rcv_ooopack;      /* out-of-order packets received: the receiver's sight of loss */
  __u32 delivered;
  __u32 snd_cwnd;
  __u32 segs_in;          /* data segments received */
  __u32 job;
  __u32 saddr, daddr;     /* IPv4, network order (0 for IPv6) */
  __u16 sport, dport;     /* host order */
  __u32 samples;          /* times the program updated this entry */
};

struct flowmon_event {
  __u64 cookie;
  __u64 ts_ns;
  __u32 type;             /* enum flowmon_event_type */
  __u32 job;
  struct flowmon_stats stats;
};

#endif
