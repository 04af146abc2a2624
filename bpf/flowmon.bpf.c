// SPDX-License-Identifier: GPL-2.0
// Per-flow TCP measurements for the sockets xferd owns. Hooks that need
// neither kprobes nor tracefs: every segment a downloading socket receives,
// through fentry on tcp_rcv_established where the kernel has BPF trampolines,
// else the tcp_probe BTF tracepoint it fires (userspace probes and picks one:
// the same handler serves both); open / close through inet_sock_set_state.
// CO-RE reads only.
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "flowmon.h"

#define TCP_ESTABLISHED 1
#define TCP_CLOSE 7
#define AF_INET 2

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FLOWMON_MAX_FLOWS);
  __type(key, __u64);   /* socket cookie */
  __type(value, __u32); /* job id */
} owned SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, FLOWMON_MAX_FLOWS);
  __type(key, __u64);
  __type(value, struct flowmon_stats);
} flows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* One handler for every hook: copy the socket's counters into its entry. */
static __always_inline struct flowmon_stats *update(struct sock *sk, __u64 cookie, __u32 job) {
  struct tcp_sock *tp = (struct tcp_sock *)sk;
  struct flowmon_stats *st = bpf_map_lookup_elem(&flows, &cookie);
  __u64 now = bpf_ktime_get_ns();
  if (!st) {
    struct flowmon_stats fresh = {};
    fresh.first_ns = now;
    fresh.job = job;
    if (BPF_CORE_READ(sk, __sk_common.skc_family) == AF_INET) {
      fresh.saddr = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
      fresh.daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
    }
    fresh.sport = BPF_CORE_READ(sk, __sk_common.skc_num);
    fresh.dport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
    bpf_map_update_elem(&flows, &cookie, &fresh, BPF_NOEXIST);
    st = bpf_map_lookup_elem(&flows, &cookie);
    if (!st) return 0;
  }
  st->last_ns = now;
  st->bytes_received = BPF_CORE_READ(tp, bytes_received);
  st->bytes_acked = BPF_CORE_READ(tp, bytes_acked);
  st->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
  st->rttvar_us = BPF_CORE_READ(tp, mdev_us) >> 2;
  st->rcv_rtt_us = BPF_CORE_READ(tp, rcv_rtt_est.rtt_us) >> 3;
  st->total_retrans = BPF_CORE_READ(tp, total_retrans);
  st->lost_out = BPF_CORE_READ(tp, lost_out);
  st->rcv_ooopack = BPF_CORE_READ(tp, rcv_ooopack);
  st->delivered = BPF_CORE_READ(tp, delivered);
  st->snd_cwnd = BPF_CORE_READ(tp, snd_cwnd);
  st->segs_in = BPF_CORE_READ(tp, data_segs_in);
  st->samples++;
  return st;
}

static __always_inline void emit(__u64 cookie, __u32 job, __u32 type, struct flowmon_stats *st) {
  struct flowmon_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) return;
  e->cookie = cookie;
  e->ts_ns = bpf_ktime_get_ns();
  e->type = type;
  e->job = job;
  if (st) __builtin_memcpy(&e->stats, st, sizeof(*st));
  else __builtin_memset(&e->stats, 0, sizeof(e->stats));
  bpf_ringbuf_submit(e, 0);
}

static __always_inline int on_segment(struct sock *sk) {
  __u64 cookie = bpf_get_socket_cookie(sk);
  __u32 *job = bpf_map_lookup_elem(&owned, &cookie);
  if (!job) return 0;
  update(sk, cookie, *job);
  return 0;
}

SEC("fentry/tcp_rcv_established")
int BPF_PROG(flowmon_rcv, struct sock *sk, struct sk_buff *skb) { return on_segment(sk); }

SEC("tp_btf/tcp_probe")
int BPF_PROG(flowmon_probe, struct sock *sk, struct sk_buff *skb) { return on_segment(sk); }

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(flowmon_state, const struct sock *csk, int oldstate, int newstate) {
  struct sock *sk = (struct sock *)csk;
  if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP) return 0;
  __u64 cookie = bpf_get_socket_cookie(sk);
  __u32 *job = bpf_map_lookup_elem(&owned, &cookie);
  if (!job) return 0;
  __u32 j = *job;
  if (newstate == TCP_ESTABLISHED) {
    emit(cookie, j, FLOWMON_OPEN, update(sk, cookie, j));
  } else if (newstate == TCP_CLOSE) {
    emit(cookie, j, FLOWMON_CLOSE, update(sk, cookie, j));
  }
  return 0;
}
