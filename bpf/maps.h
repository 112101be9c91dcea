/* The maps' key and value layouts, shared by the BPF programs and checked against the Python
 * encodings (bpf/maps.py; tests/bpf/test_layouts.py compiles this header and compares offsets).
 * Addresses and VIP/backend ports are in network byte order, as the kernel hands them to the
 * programs; the policy key's port is in host order (the program converts the packet's). */
#ifndef CCA_MAPS_H
#define CCA_MAPS_H

/* services: a frontend (VIP, port, protocol) → its id and number of backend slots (0 = refuse). */
struct svc_key {
	__u32 vip;
	__u16 port;
	__u8 proto;   /* IPPROTO_TCP 6, IPPROTO_UDP 17 */
	__u8 pad;
};
struct svc_val {
	__u32 id;
	__u32 count;
	__u64 hits;   /* connections translated */
};

/* backends: (service id, slot 0..count-1) → one ready backend. */
struct backend_key {
	__u32 id;
	__u32 slot;
};
struct backend_val {
	__u32 addr;
	__u16 port;
	__u16 pad;
};

/* reverse translation per socket (socket cookie → what it asked for and what it got), for
 * getpeername() and recvmsg() to show the VIP. */
struct revnat_val {
	__u32 vip;
	__u32 backend;
	__u16 vport;
	__u16 bport;
	__u32 pad;
};

/* clients and inbound: one socket's flow with one peer (socket cookie, peer address, peer port in
 * network order). clients: the socket connected or sent to the peer first, so the peer's packets to
 * it are replies; inbound: the peer spoke first (a UDP server's client), so the socket's sends to it
 * are replies and open nothing. */
struct flow_key {
	__u64 cookie;
	__u32 addr;
	__u16 port;
	__u16 pad;
};

/* ipcache: an address → the numeric identity of the instance holding it (1 = the node itself). */
struct ipcache_val {
	__u32 identity;
};

/* policy: (destination identity, source identity, port, protocol) allowed; port 0 and protocol 0
 * are wildcards. The value counts the packets it let in. */
struct policy_key {
	__u32 dst_id;
	__u32 src_id;
	__u16 port;
	__u8 proto;
	__u8 pad;
};
struct policy_val {
	__u64 hits;
};

/* policed: a default-deny destination identity → the packets dropped on its way in. */
struct policed_val {
	__u64 drops;
};

#define CCA_HOST_IDENTITY 1

#endif
