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
  if (!st) {
    struct flowmon_stats fresh = {};
    fresh.job = job;
    fresh.sport = BPF_CORE_READ(sk, __sk_common.skc_num);
    fresh.dport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
    bpf_map_update_elem(&flows, &cookie, &fresh, BPF_NOEXIST);
    st = bpf_map_lookup_elem(&flows, &cookie);
    if (!st) return 0;
  }
  st->bytes_received = BPF_CORE_READ(tp, bytes_received);
  st->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
  st->rttvar_us = BPF_CORE_READ(tp, mdev_us) >> 2;
  st->rcv_rtt_us = BPF_CORE_READ(tp, rcv_rtt_est.rtt_us) >> 3;
  st->total_retrans = BPF_CORE_READ(tp, total_retrans);
  st->rcv_ooopack = BPF_CORE_READ(tp, rcv_ooopack);
  return st;
}

static __always_inline void emit(__u64 cookie, __u32 job, __u32 type) {
  struct flowmon_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) return;
  e->cookie = cookie;
  e->type = type;
  e->job = job;
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
  if (newstate == TCP_ESTABLISHED || newstate == TCP_CLOSE) {
    update(sk, cookie, j);  /* a closed flow's last counters */
    emit(cookie, j, newstate == TCP_ESTABLISHED ? FLOWMON_OPEN : FLOWMON_CLOSE);
  }
  return 0;
}
