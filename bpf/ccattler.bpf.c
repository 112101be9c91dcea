/* CCattler's eBPF data plane, attached to one node's container cgroup (never the root: several
 * nodes on one machine share the cgroup tree).
 *
 * Socket load balancing (Cilium's socket LB): connect4/sendmsg4 translate a VIP:port to a backend
 * once per connection (no per-packet NAT), recvmsg4/getpeername4 show the VIP back.
 * Policy: cgroup_skb/ingress admits a packet into a default-deny destination identity only when
 * (destination, source identity, port, protocol) is in `cca_policy`; replies to flows the node's own
 * sockets opened pass: `cca_clients` holds (socket cookie, peer address, peer port) for each peer a
 * socket connected or sent to first, and only a packet from that very peer to that socket matches.
 * A UDP server's reply is not such a flow: a peer a socket heard from first is noted in
 * `cca_inbound`, and sendmsg4 to it marks nothing (so a reply never opens the server to anyone, and
 * revoking the peer's tuple still cuts it). Revoking a tuple cuts live connections at their next
 * packet. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "maps.h"

#define ETH_P_IP 0x0800
#define PROTO_ICMP 1
#define PROTO_TCP 6
#define PROTO_UDP 17

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct svc_key);
	__type(value, struct svc_val);
} cca_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct backend_key);
	__type(value, struct backend_val);
} cca_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, __u64);
	__type(value, struct revnat_val);
} cca_revnat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct flow_key);
	__type(value, __u8);
} cca_clients SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct flow_key);
	__type(value, __u8);
} cca_inbound SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 524288);
	__type(key, __u32);
	__type(value, struct ipcache_val);
} cca_ipcache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, struct policy_key);
	__type(value, struct policy_val);
} cca_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct policed_val);
} cca_policed SEC(".maps");

/* 1: translated or not a VIP; 0: a VIP with no ready backend (the caller gets EPERM at once). */
static __always_inline int translate(struct bpf_sock_addr *ctx, __u8 proto)
{
	struct svc_key key = {.vip = ctx->user_ip4, .port = (__u16)ctx->user_port, .proto = proto};
	struct svc_val *svc = bpf_map_lookup_elem(&cca_services, &key);
	if (!svc)
		return 1;
	if (svc->count == 0)
		return 0;
	struct backend_key bkey = {.id = svc->id, .slot = bpf_get_prandom_u32() % svc->count};
	struct backend_val *be = bpf_map_lookup_elem(&cca_backends, &bkey);
	if (!be)
		return 0;
	__sync_fetch_and_add(&svc->hits, 1);
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct revnat_val rev = {.vip = key.vip, .backend = be->addr, .vport = key.port, .bport = be->port};
	bpf_map_update_elem(&cca_revnat, &cookie, &rev, BPF_ANY);
	ctx->user_ip4 = be->addr;
	ctx->user_port = be->port;
	return 1;
}

/* The socket opens a flow to the peer it connects or sends to (after translation: the backend). */
static __always_inline void mark_client(struct bpf_sock_addr *ctx, int unless_inbound)
{
	struct flow_key key = {.cookie = bpf_get_socket_cookie(ctx), .addr = ctx->user_ip4,
			       .port = (__u16)ctx->user_port};
	if (unless_inbound && bpf_map_lookup_elem(&cca_inbound, &key))
		return; /* a reply to a peer that spoke first: its packets stay under policy */
	__u8 one = 1;
	bpf_map_update_elem(&cca_clients, &key, &one, BPF_ANY);
}

SEC("cgroup/connect4")
int cca_connect4(struct bpf_sock_addr *ctx)
{
	__u8 proto = ctx->type == 1 /* SOCK_STREAM */ ? PROTO_TCP : PROTO_UDP;
	if (!translate(ctx, proto))
		return 0;
	mark_client(ctx, 0);
	return 1;
}

SEC("cgroup/sendmsg4")
int cca_sendmsg4(struct bpf_sock_addr *ctx)
{
	if (!translate(ctx, PROTO_UDP))
		return 0;
	mark_client(ctx, 1);
	return 1;
}

static __always_inline void untranslate(struct bpf_sock_addr *ctx)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct revnat_val *rev = bpf_map_lookup_elem(&cca_revnat, &cookie);
	if (rev && rev->backend == ctx->user_ip4 && rev->bport == (__u16)ctx->user_port) {
		ctx->user_ip4 = rev->vip;
		ctx->user_port = rev->vport;
	}
}

SEC("cgroup/recvmsg4")
int cca_recvmsg4(struct bpf_sock_addr *ctx)
{
	untranslate(ctx);
	return 1;
}

SEC("cgroup/getpeername4")
int cca_getpeername4(struct bpf_sock_addr *ctx)
{
	untranslate(ctx);
	return 1;
}

static __always_inline int allowed(__u32 dst, __u32 src, __u16 port, __u8 proto)
{
	struct policy_key k = {.dst_id = dst, .src_id = src, .port = port, .proto = proto};
	struct policy_val *v = bpf_map_lookup_elem(&cca_policy, &k);
	if (!v) {
		k.port = 0;
		v = bpf_map_lookup_elem(&cca_policy, &k);
	}
	if (!v) {
		k.port = port;
		k.proto = 0;
		v = bpf_map_lookup_elem(&cca_policy, &k);
	}
	if (!v) {
		k.port = 0;
		v = bpf_map_lookup_elem(&cca_policy, &k);
	}
	if (!v)
		return 0;
	__sync_fetch_and_add(&v->hits, 1);
	return 1;
}

/* A UDP datagram admitted from a peer the socket had not sent to first: the peer spoke first, so
 * the socket's sends back to it are replies (sendmsg4 marks no client flow for them). */
static __always_inline void note_inbound(struct flow_key *key)
{
	if (bpf_map_lookup_elem(&cca_clients, key) || bpf_map_lookup_elem(&cca_inbound, key))
		return;
	__u8 one = 1;
	bpf_map_update_elem(&cca_inbound, key, &one, BPF_ANY);
}

SEC("cgroup_skb/ingress")
int cca_ingress(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return 1;
	struct iphdr iph;
	if (bpf_skb_load_bytes(skb, 0, &iph, sizeof(iph)) < 0)
		return 1;
	__u32 daddr = iph.daddr, saddr = iph.saddr;
	__u8 proto = iph.protocol;
	__u32 l4 = (iph.ihl & 0xf) * 4;
	int l4ports = proto == PROTO_TCP || proto == PROTO_UDP;
	__be16 ports[2] = {0, 0}; /* source, destination: network order */
	int truncated = l4ports && bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)) < 0;
	struct flow_key flow = {.cookie = bpf_get_socket_cookie(skb), .addr = saddr, .port = ports[0]};
	struct ipcache_val *dst = bpf_map_lookup_elem(&cca_ipcache, &daddr);
	__u32 dst_id = dst ? dst->identity : 0;
	struct policed_val *policed = dst ? bpf_map_lookup_elem(&cca_policed, &dst_id) : 0;
	if (!policed) {
		if (proto == PROTO_UDP && !truncated)
			note_inbound(&flow);
		return 1;
	}
	if (truncated)
		return 0;
	if (l4ports && bpf_map_lookup_elem(&cca_clients, &flow))
		return 1; /* a reply on a flow this socket opened to this very peer */
	struct ipcache_val *src = bpf_map_lookup_elem(&cca_ipcache, &saddr);
	__u32 src_id = src ? src->identity : 0;
	__u16 port = 0;
	if (l4ports) {
		port = bpf_ntohs(ports[1]);
	} else if (proto == PROTO_ICMP) {
		__u8 type = 0;
		if (bpf_skb_load_bytes(skb, l4, &type, 1) < 0)
			return 0;
		if (type == 0 || type == 3 || type == 11) /* echo reply, unreachable, time exceeded */
			return 1;
	}
	if (src_id == CCA_HOST_IDENTITY || allowed(dst_id, src_id, port, proto)) {
		if (proto == PROTO_UDP)
			note_inbound(&flow);
		return 1;
	}
	__sync_fetch_and_add(&policed->drops, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
