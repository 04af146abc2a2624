// SPDX-License-Identifier: GPL-2.0
// Per-flow TCP measurements for the sockets xferd owns, sampled, not traced:
// nothing runs per received segment. Userspace gives each socket it owns an
// entry in a socket-local storage map (the job's id), and once per control
// interval reads a BPF iterator over that map, which copies each owned
// socket's counters into its stats entry. The walk visits our sockets only.
// Where the kernel refuses map-element iterators (seen on a 6.18 kernel in
// lockdown "integrity" mode without CAP_SYS_RESOURCE: EPERM at load, while
// iter/tcp and iter/bpf_map load), userspace loads flowmon_iter_tcp instead:
// an iterator over all TCP sockets that picks ours by the same storage map.
// It walks the whole established hash table (262,144 buckets on a 24-GiB
// machine, about 2 ms a sample), so it is the second choice. Open / close
// come from the inet_sock_set_state BTF tracepoint (a closed flow's final
// counters are taken there). Neither kprobes nor tracefs; CO-RE reads.
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "flowmon.h"

#define TCP_ESTABLISHED 1
#define TCP_CLOSE 7

char LICENSE[] SEC("license") = "GPL";

/* The sockets followed: userspace sets the job id by socket fd; the entry
 * goes with its socket. */
struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, __u32); /* job id */
} owned SEC(".maps");

/* Not preallocated: a preallocated map of FLOWMON_MAX_FLOWS entries was
 * filled at creation (about 6 MB, 40% of the monitor's start-up CPU), while
 * a job follows tens of flows. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, FLOWMON_MAX_FLOWS);
  __type(key, __u64);
  __type(value, struct flowmon_stats);
} flows SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Copy an owned socket's counters into its entry. */
static __always_inline void update(struct sock *sk, __u64 cookie, __u32 job) {
  struct tcp_sock *tp = (struct tcp_sock *)sk;
  struct flowmon_stats *st = bpf_map_lookup_elem(&flows, &cookie);
  if (!st) {
    struct flowmon_stats fresh = {};
    fresh.job = job;
    fresh.sport = BPF_CORE_READ(sk, __sk_common.skc_num);
    fresh.dport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
    bpf_map_update_elem(&flows, &cookie, &fresh, BPF_NOEXIST);
    st = bpf_map_lookup_elem(&flows, &cookie);
    if (!st) return;
  }
  st->bytes_received = BPF_CORE_READ(tp, bytes_received);
  st->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
  st->rttvar_us = BPF_CORE_READ(tp, mdev_us) >> 2;
  st->rcv_rtt_us = BPF_CORE_READ(tp, rcv_rtt_est.rtt_us) >> 3;
  st->total_retrans = BPF_CORE_READ(tp, total_retrans);
  st->rcv_ooopack = BPF_CORE_READ(tp, rcv_ooopack);
}

static __always_inline void emit(__u64 cookie, __u32 job, __u32 type) {
  struct flowmon_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) return;
  e->cookie = cookie;
  e->type = type;
  e->job = job;
  bpf_ringbuf_submit(e, 0);
}

/* One pass over the owned sockets (one read() of the iterator). */
SEC("iter/bpf_sk_storage_map")
int flowmon_iter(struct bpf_iter__bpf_sk_storage_map *ctx) {
  struct sock *sk = ctx->sk;
  __u32 *job = ctx->value;
  if (!sk || !job) return 0;
  update(sk, bpf_get_socket_cookie(sk), *job);
  return 0;
}

/* The same pass where the map iterator does not load: every TCP socket of
 * the namespace, ours found by their storage entry. */
SEC("iter/tcp")
int flowmon_iter_tcp(struct bpf_iter__tcp *ctx) {
  struct sock_common *skc = ctx->sk_common;
  if (!skc) return 0;
  struct tcp_sock *tp = bpf_skc_to_tcp_sock(skc);
  if (!tp) return 0;
  __u32 *job = bpf_sk_storage_get(&owned, tp, 0, 0);
  if (!job) return 0;
  struct sock *sk = (struct sock *)tp;
  update(sk, bpf_get_socket_cookie(sk), *job);
  return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(flowmon_state, const struct sock *csk, int oldstate, int newstate) {
  struct sock *sk = (struct sock *)csk;
  if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP) return 0;
  if (newstate != TCP_ESTABLISHED && newstate != TCP_CLOSE) return 0;
  __u32 *job = bpf_sk_storage_get(&owned, sk, 0, 0);
  if (!job) return 0;
  __u32 j = *job;
  __u64 cookie = bpf_get_socket_cookie(sk);
  update(sk, cookie, j); /* a closed flow's last counters */
  emit(cookie, j, newstate == TCP_ESTABLISHED ? FLOWMON_OPEN : FLOWMON_CLOSE);
  return 0;
}
