#ifndef CLWIPGLUE_H
#define CLWIPGLUE_H

// The C side of TunnelStack: everything that touches lwIP's structures lives here, compiled
// against the library's own lwipopts.h (checked at start: the pool sizes lwIP was built with
// must equal sizeof() of the structures seen here). Swift sees only this header: opaque
// pointers, plain integers and byte arrays.
//
// Threads: lwIP runs on one thread of the caller's choosing (one NIO event loop), without
// its tcpip thread: every tl_* function and every callback runs there, no lock is taken.

#include <stddef.h>
#include <stdint.h>

/// One lwIP netif (a tunnel interface without link layer), owned by a Swift context.
typedef struct tl_netif tl_netif;
/// An lwIP TCP connection (struct tcp_pcb), opaque here.
typedef struct tl_pcb tl_pcb;
/// Received data (struct pbuf chain), valid only during the receive callback.
typedef struct tl_data tl_data;

/// A TCP flow as seen from the stack: the peer is `remote`, the stack's address `local`.
typedef struct tl_flow {
    uint8_t remote[16];
    uint8_t local[16];
    uint16_t remote_port;
    uint16_t local_port;
} tl_flow;

/// What lwIP knows of one flow (tl_flow_lookup).
typedef struct tl_flow_state {
    /// lwIP's enum tcp_state (CLOSED 0, LISTEN 1, SYN_SENT 2, SYN_RCVD 3, ESTABLISHED 4,
    /// FIN_WAIT_1 5, FIN_WAIT_2 6, CLOSE_WAIT 7, CLOSING 8, LAST_ACK 9, TIME_WAIT 10).
    int state;
    /// Next sequence number expected from the peer, and the receive window from there.
    uint32_t rcv_nxt;
    uint32_t rcv_wnd;
} tl_flow_state;

/// Connections of one netif, by lwIP's lists (tl_netif_counts).
typedef struct tl_counts {
    /// Every pcb in lwIP's active list on this netif (SYN_RCVD to LAST_ACK).
    int active;
    /// Of those, the ones still in SYN_RCVD (half-open) with a local port below 9.
    int syn_rcvd_low_ports;
    /// Pcbs in TIME_WAIT on this netif.
    int time_wait;
} tl_counts;

/// Callbacks into Swift, set once by tl_core_start; all run on lwIP's one thread.
typedef struct tl_callbacks {
    /// One outgoing IPv6 packet of `netif_context`'s netif (valid during the call only).
    void (*output)(void *netif_context, const uint8_t *packet, size_t length);
    /// A handshake completed on a listener; `pcb` is new. Return nonzero to keep it (the
    /// callee attaches it with tl_pcb_attach), zero to refuse (lwIP resets it).
    int (*accept)(void *netif_context, tl_pcb *pcb, const tl_flow *flow);
    /// Data arrived (`length` bytes, copy them out with tl_data_copy). Return nonzero when
    /// taken; zero leaves them with lwIP, which offers them again later.
    int (*receive)(void *connection, tl_data *data, size_t length);
    /// The peer sent FIN.
    void (*finished)(void *connection);
    /// `length` bytes were acknowledged by the peer: there is room to send more.
    void (*sent)(void *connection, size_t length);
    /// lwIP freed the pcb (reset by the peer, retransmissions exhausted, netif removed);
    /// `error` is lwIP's err_t.
    void (*failed)(void *connection, int error);
} tl_callbacks;

/// Starts lwIP once per process (lwip_init, no tcpip thread) and records the callbacks.
/// Returns 0, or -1 when the structures seen here differ in size from the library's (built
/// with other options). Later calls return the first call's result and ignore their
/// arguments.
int tl_core_start(const tl_callbacks *callbacks);

/// Runs lwIP's timers that are due (TCP every 250 ms while connections exist, ND, MLD,
/// reassembly).
void tl_timers_run(void);
/// Milliseconds until lwIP's next timer is due (0xFFFFFFFF: none).
uint32_t tl_timers_sleep(void);
/// Nonzero while this thread is inside lwIP's input processing (a callback of
/// tl_netif_input): input must not be re-entered then.
int tl_in_input(void);

/// Adds a netif with no link layer: `count` (1...4) /128 addresses, MTU `mtu` (1280 for
/// the tunnel), up; its outgoing packets go to the output callback with `context`.
/// Returns NULL when lwIP refuses.
tl_netif *tl_netif_add(void *context, const uint8_t *addresses, int count, uint16_t mtu);
/// Aborts every connection of the netif (listeners, active, TIME_WAIT) and removes it.
void tl_netif_remove(tl_netif *netif);
/// lwIP's index of the netif (pcbs bound to it carry it).
uint8_t tl_netif_index(const tl_netif *netif);
/// Hands one IPv6 packet to lwIP (copied). Returns 0, or -1 when it could not be taken.
int tl_netif_input(tl_netif *netif, const uint8_t *packet, size_t length);
/// The MSS lwIP advertises to a peer at `remote` through this netif.
uint16_t tl_netif_mss(tl_netif *netif, const uint8_t remote[16]);
/// Counts this netif's pcbs.
tl_counts tl_netif_counts(const tl_netif *netif);

/// Looks up the active pcb of `flow` on this netif; nonzero when found.
int tl_flow_lookup(const tl_netif *netif, const tl_flow *flow, tl_flow_state *state);
/// Number of out-of-order segments lwIP holds for `flow`; drops them all when over `limit`
/// (lwIP does the same under memory pressure; the peer retransmits). Returns the count
/// before dropping.
int tl_flow_limit_ooseq(const tl_netif *netif, const tl_flow *flow, int limit);
/// Aborts `flow`'s pcb if it is still in SYN_RCVD (a handshake that took too long).
void tl_flow_abort_half_open(const tl_netif *netif, const tl_flow *flow);
/// Turns TCP keepalive on for an accepted pcb: after `idle_ms` without a segment from the
/// peer, a probe every `interval_ms`; `probes` unanswered ones reset the connection (lwIP
/// reports ERR_ABRT to its owner). A peer that answers keeps an idle connection open.
void tl_pcb_keepalive(tl_pcb *pcb, uint32_t idle_ms, uint32_t interval_ms, uint32_t probes);
/// A SYN arrived for `flow`, which lwIP holds synchronized (ESTABLISHED to LAST_ACK):
/// acknowledges what the flow has received, as RFC 5961 4.2 asks (a challenge ACK). A peer
/// that restarted answers it with a reset that ends the old connection, and its next SYN
/// opens a new one; a live peer ignores it. lwIP never sees the SYN. Nonzero when sent.
int tl_flow_challenge_ack(const tl_netif *netif, const tl_flow *flow);
/// A SYN with sequence number `sequence` arrived for `flow`, which no active pcb holds.
/// Ends the flow's TIME_WAIT pcb (freed, no RST) when the SYN is newer than anything the old
/// connection received (RFC 1122 4.2.2.13, as gVisor's netstack and Linux do), so that the
/// listener takes it: returns 1. Returns -1 when the TIME_WAIT pcb keeps the flow (an older
/// SYN): lwIP answers the SYN from it. Returns -2 for a newer SYN while a relay still holds
/// the pcb (for a loop turn): the SYN is dropped and the peer's retransmission opens. Returns
/// 0 when there is none (or the bound below ended it). In the same walk, ends this netif's
/// oldest TIME_WAIT pcbs beyond `limit`.
int tl_flow_end_time_wait(const tl_netif *netif, const tl_flow *flow, uint32_t sequence, int limit);

/// Listens on `address` (one of the netif's) and `port` for connections arriving on this
/// netif; accept goes to the callback with the netif's context. NULL when lwIP refuses.
tl_pcb *tl_listen(tl_netif *netif, const uint8_t address[16], uint16_t port);
/// Closes a listener (frees it at once).
void tl_listen_close(tl_pcb *listener);

/// Routes the pcb's events to the callbacks with `connection`.
void tl_pcb_attach(tl_pcb *pcb, void *connection);
/// Stops all callbacks of the pcb (before closing or aborting it).
void tl_pcb_detach(tl_pcb *pcb);
/// Closes gracefully (FIN; lwIP finishes the close alone). The pcb must not be used after.
void tl_pcb_close(tl_pcb *pcb);
/// Resets (RST). The pcb must not be used after; no callback runs.
void tl_pcb_abort(tl_pcb *pcb);
/// Sends FIN after the queued data; receiving goes on.
void tl_pcb_shutdown_output(tl_pcb *pcb);
/// Bytes tl_pcb_write accepts now (send buffer and segment queue room).
size_t tl_pcb_send_space(const tl_pcb *pcb);
/// Queues up to `length` bytes (copied) and sends; returns the number queued (0 when full).
size_t tl_pcb_write(tl_pcb *pcb, const void *bytes, size_t length);
/// Opens the receive window by `length` bytes the local side consumed.
void tl_pcb_received(tl_pcb *pcb, size_t length);

/// Copies `length` bytes of received data from `offset` into `destination`.
void tl_data_copy(const tl_data *data, void *destination, size_t length, size_t offset);

#endif
