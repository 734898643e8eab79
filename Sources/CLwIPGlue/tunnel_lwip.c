// The C side of TunnelStack (see CLwIPGlue.h): lwIP's netif, pcbs and pbufs, compiled with
// the library's lwipopts.h (pkg-config `lwip`, via the CLwIP system library).

#include "CLwIPGlue.h"

#include "lwip/opt.h"
#include "lwip/ip6.h"
#include "lwip/ip6_addr.h"
#include "lwip/memp.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/tcp.h"
#include "lwip/init.h"
#include "lwip/tcpip.h"
#include "lwip/timeouts.h"
#include "lwip/priv/memp_priv.h"
#include "lwip/priv/tcp_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/// A netif and the Swift context its packets and connections report to. `netif` comes
/// first: lwIP's struct netif pointers are tl_netif pointers.
struct tl_netif {
    struct netif netif;
    void *context;
    uint16_t mtu;
};

static tl_callbacks callbacks;
static pthread_mutex_t start_mutex = PTHREAD_MUTEX_INITIALIZER;
static int start_state;  // 0 not started, 1 started, <0 failed

/// Nesting of tl_netif_input on this thread.
static __thread int input_depth;

/// Largest packet the output path copies out of a pbuf chain (the tunnel MTU is 1280).
#define TL_MAX_PACKET 2048

/// The library's pools were sized with its own options: equal sizes here mean the
/// structures (and the options that shape them) agree.
static int layout_matches(void) {
    return MEMP_MAX == 19
        && memp_pools[MEMP_TCP_PCB]->size == LWIP_MEM_ALIGN_SIZE(sizeof(struct tcp_pcb))
        && memp_pools[MEMP_TCP_PCB_LISTEN]->size == LWIP_MEM_ALIGN_SIZE(sizeof(struct tcp_pcb_listen))
        && memp_pools[MEMP_TCP_SEG]->size == LWIP_MEM_ALIGN_SIZE(sizeof(struct tcp_seg))
        && memp_pools[MEMP_PBUF]->size == LWIP_MEM_ALIGN_SIZE(sizeof(struct pbuf));
}

int tl_core_start(const tl_callbacks *given) {
    pthread_mutex_lock(&start_mutex);
    if (start_state == 0) {
        if (!layout_matches()) {
            start_state = -1;
        } else {
            callbacks = *given;
            // lwIP's core without its tcpip thread: the caller's one thread runs every call
            // and the timers (tl_timers_run). The core lock is never created; its check
            // (sys_check_core_locking) passes while no thread is marked as tcpip's.
            lwip_init();
            start_state = 1;
        }
    }
    int state = start_state;
    pthread_mutex_unlock(&start_mutex);
    return state > 0 ? 0 : state;
}

void tl_timers_run(void) { sys_check_timeouts(); }

uint32_t tl_timers_sleep(void) { return sys_timeouts_sleeptime(); }

int tl_in_input(void) { return input_depth > 0; }

// MARK: - netif

static err_t netif_output(struct netif *netif, struct pbuf *p, const ip6_addr_t *destination) {
    // A tunnel has no multicast: MLD reports and neighbour discovery never leave.
    if (ip6_addr_ismulticast(destination)) return ERR_OK;
    tl_netif *owner = (tl_netif *)netif;
    if (p->next == NULL) {
        callbacks.output(owner->context, (const uint8_t *)p->payload, p->len);
    } else if (p->tot_len <= TL_MAX_PACKET) {
        uint8_t packet[TL_MAX_PACKET];
        pbuf_copy_partial(p, packet, p->tot_len, 0);
        callbacks.output(owner->context, packet, p->tot_len);
    }
    return ERR_OK;
}

static err_t netif_setup(struct netif *netif) {
    tl_netif *owner = (tl_netif *)netif;
    netif->name[0] = 't';
    netif->name[1] = 'l';
    netif->output_ip6 = netif_output;
    netif->mtu = owner->mtu;
    // No link layer: no ARP, no Ethernet, no MLD, no broadcast.
    netif->flags = 0;
    netif->hwaddr_len = 0;
    return ERR_OK;
}

static void address_from_bytes(ip6_addr_t *address, const uint8_t bytes[16]) {
    memset(address, 0, sizeof(*address));
    memcpy(address->addr, bytes, 16);
    ip6_addr_clear_zone(address);
}

static int flow_matches(const struct tcp_pcb *pcb, uint8_t index, const tl_flow *flow) {
    return pcb->netif_idx == index && pcb->local_port == flow->local_port && pcb->remote_port == flow->remote_port
        && IP_IS_V6_VAL(pcb->remote_ip)
        && memcmp(ip_2_ip6(&pcb->remote_ip)->addr, flow->remote, 16) == 0
        && memcmp(ip_2_ip6(&pcb->local_ip)->addr, flow->local, 16) == 0;
}

tl_netif *tl_netif_add(void *context, const uint8_t *addresses, int count, uint16_t mtu) {
    if (count < 1 || count > 4 || count > LWIP_IPV6_NUM_ADDRESSES) return NULL;
    tl_netif *owner = calloc(1, sizeof(tl_netif));
    if (owner == NULL) return NULL;
    owner->context = context;
    owner->mtu = mtu;
    struct netif *netif = &owner->netif;
    if (netif_add_noaddr(netif, owner, netif_setup, ip6_input) == NULL) {
        free(owner);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        ip6_addr_t address;
        address_from_bytes(&address, addresses + 16 * i);
        netif_ip6_addr_set(netif, (s8_t)i, &address);
        // Dynamic and never expiring: lwIP then treats it as a /128, not an implied /64
        // (RFC 5942), so routing between several netifs goes by exact address.
        netif_ip6_addr_set_valid_life(netif, i, IP6_ADDR_LIFE_INFINITE);
        netif_ip6_addr_set_pref_life(netif, i, IP6_ADDR_LIFE_INFINITE);
        // No duplicate address detection: the tunnel's addresses are ours by construction.
        netif_ip6_addr_set_state(netif, (s8_t)i, IP6_ADDR_PREFERRED);
    }
    netif->ip6_autoconfig_enabled = 0;
    netif_set_up(netif);
    netif_set_link_up(netif);
    // No router solicitations (set after going up: that restarts them).
    netif->rs_count = 0;
    // Our view of struct netif must be lwIP's: it finds what we stored where we stored it.
    int consistent = netif_get_by_index(netif_get_index(netif)) == netif;
    for (int i = 0; i < count && consistent; i++) {
        ip6_addr_t address;
        address_from_bytes(&address, addresses + 16 * i);
        consistent = netif_get_ip6_addr_match(netif, &address) == i;
    }
    if (consistent) {
        ip_addr_t remote;
        ip_addr_copy_from_ip6(remote, *netif_ip6_addr(netif, 0));
        consistent = tcp_eff_send_mss_netif(TCP_MSS, netif, &remote) == (u16_t)(mtu - 60);
    }
    if (!consistent) {
        netif_remove(netif);
        free(owner);
        return NULL;
    }
    return owner;
}

void tl_netif_remove(tl_netif *owner) {
    struct netif *netif = &owner->netif;
    uint8_t index = netif_get_index(netif);
    // Whatever the Swift side left: listeners, handshakes, closing and TIME_WAIT pcbs.
    struct tcp_pcb_listen *listener = tcp_listen_pcbs.listen_pcbs;
    while (listener != NULL) {
        struct tcp_pcb_listen *next = listener->next;
        if (listener->netif_idx == index) {
            tcp_arg((struct tcp_pcb *)listener, NULL);
            tcp_close((struct tcp_pcb *)listener);
        }
        listener = next;
    }
    for (int list = 0; list < 2; list++) {
        struct tcp_pcb *pcb = list == 0 ? tcp_active_pcbs : tcp_tw_pcbs;
        while (pcb != NULL) {
            struct tcp_pcb *next = pcb->next;
            if (pcb->netif_idx == index) {
                tl_pcb_detach((tl_pcb *)pcb);
                tcp_abort(pcb);
            }
            pcb = next;
        }
    }
    netif_set_down(netif);
    netif_remove(netif);
    free(owner);
}

uint8_t tl_netif_index(const tl_netif *owner) { return netif_get_index(&owner->netif); }

int tl_netif_input(tl_netif *owner, const uint8_t *packet, size_t length) {
    if (input_depth > 0 || length == 0 || length > 0xFFFF) return -1;
    struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)length, PBUF_RAM);
    if (p == NULL) return -1;
    memcpy(p->payload, packet, length);
    input_depth += 1;
    ip6_input(p, &owner->netif);
    input_depth -= 1;
    return 0;
}

uint16_t tl_netif_mss(tl_netif *owner, const uint8_t remote[16]) {
    ip_addr_t address;
    IP_SET_TYPE_VAL(address, IPADDR_TYPE_V6);
    address_from_bytes(ip_2_ip6(&address), remote);
    return tcp_eff_send_mss_netif(TCP_MSS, &owner->netif, &address);
}

tl_counts tl_netif_counts(const tl_netif *owner) {
    tl_counts counts = {0, 0, 0};
    uint8_t index = netif_get_index(&owner->netif);
    for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb != NULL; pcb = pcb->next) {
        if (pcb->netif_idx != index) continue;
        counts.active += 1;
        if (pcb->state == SYN_RCVD && pcb->local_port < 9) counts.syn_rcvd_low_ports += 1;
    }
    for (struct tcp_pcb *pcb = tcp_tw_pcbs; pcb != NULL; pcb = pcb->next) {
        if (pcb->netif_idx == index) counts.time_wait += 1;
    }
    return counts;
}

static struct tcp_pcb *flow_pcb(const tl_netif *owner, const tl_flow *flow) {
    uint8_t index = netif_get_index(&owner->netif);
    for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb != NULL; pcb = pcb->next) {
        if (flow_matches(pcb, index, flow)) return pcb;
    }
    return NULL;
}

int tl_flow_lookup(const tl_netif *owner, const tl_flow *flow, tl_flow_state *state) {
    struct tcp_pcb *pcb = flow_pcb(owner, flow);
    if (pcb == NULL) return 0;
    state->state = (int)pcb->state;
    state->rcv_nxt = pcb->rcv_nxt;
    state->rcv_wnd = (uint32_t)pcb->rcv_wnd;
    return 1;
}

int tl_flow_limit_ooseq(const tl_netif *owner, const tl_flow *flow, int limit) {
#if TCP_QUEUE_OOSEQ
    struct tcp_pcb *pcb = flow_pcb(owner, flow);
    if (pcb == NULL) return 0;
    int count = 0;
    for (struct tcp_seg *segment = pcb->ooseq; segment != NULL; segment = segment->next) count += 1;
    if (count > limit) tcp_free_ooseq(pcb);
    return count;
#else
    (void)owner; (void)flow; (void)limit;
    return 0;
#endif
}

void tl_flow_abort_half_open(const tl_netif *owner, const tl_flow *flow) {
    struct tcp_pcb *pcb = flow_pcb(owner, flow);
    if (pcb != NULL && pcb->state == SYN_RCVD) tcp_abort(pcb);
}

void tl_pcb_keepalive(tl_pcb *handle, uint32_t idle_ms, uint32_t interval_ms, uint32_t probes) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    ip_set_option(pcb, SOF_KEEPALIVE);
    pcb->keep_idle = idle_ms;
#if LWIP_TCP_KEEPALIVE
    pcb->keep_intvl = interval_ms;
    pcb->keep_cnt = probes;
#else
    (void)interval_ms; (void)probes;  // lwIP's defaults: 75 s, 9
#endif
}

int tl_flow_challenge_ack(const tl_netif *owner, const tl_flow *flow) {
    struct tcp_pcb *pcb = flow_pcb(owner, flow);
    if (pcb == NULL || pcb->state < ESTABLISHED) return 0;
    // An ACK alone: tcp_output could hold it back (Nagle) or send queued data with it.
    return tcp_send_empty_ack(pcb) == ERR_OK;
}

int tl_flow_end_time_wait(const tl_netif *owner, const tl_flow *flow, uint32_t sequence, int limit) {
    uint8_t index = netif_get_index(&owner->netif);
    int result = 0, seen = 0;
    // Newest first: the ones past `limit` are the oldest. A pcb still attached to a relay is
    // neither counted nor ended: lwIP frees TIME_WAIT pcbs without calling back, and the
    // relay detaches it within a loop turn.
    struct tcp_pcb *pcb = tcp_tw_pcbs;
    while (pcb != NULL) {
        struct tcp_pcb *next = pcb->next;
        if (pcb->netif_idx == index) {
            int attached = pcb->callback_arg != NULL;
            if (result == 0 && flow_matches(pcb, index, flow)) {
                if (!TCP_SEQ_GT(sequence, pcb->rcv_nxt)) {
                    result = -1;
                } else if (attached) {
                    result = -2;
                } else {
                    tcp_abort(pcb);  // in TIME_WAIT: unlinked and freed, nothing sent
                    result = 1;
                    pcb = next;
                    continue;
                }
            }
            if (!attached && ++seen > limit) {
                if (result == -1 && flow_matches(pcb, index, flow)) result = 0;
                tcp_abort(pcb);
            }
        }
        pcb = next;
    }
    return result;
}

// MARK: - connections

static err_t on_accept(void *argument, struct tcp_pcb *pcb, err_t error) {
    tl_netif *owner = argument;
    if (owner == NULL || pcb == NULL || error != ERR_OK || !IP_IS_V6_VAL(pcb->remote_ip)) return ERR_VAL;
    tl_flow flow;
    memcpy(flow.remote, ip_2_ip6(&pcb->remote_ip)->addr, 16);
    memcpy(flow.local, ip_2_ip6(&pcb->local_ip)->addr, 16);
    flow.remote_port = pcb->remote_port;
    flow.local_port = pcb->local_port;
    int keep = callbacks.accept(owner->context, (tl_pcb *)pcb, &flow);
    // Anything but ERR_OK makes lwIP abort the new pcb (RST).
    return keep ? ERR_OK : ERR_VAL;
}

static err_t on_receive(void *argument, struct tcp_pcb *pcb, struct pbuf *p, err_t error) {
    if (argument == NULL) return tcp_recv_null(NULL, pcb, p, error);
    if (p == NULL) {
        callbacks.finished(argument);
        return ERR_OK;
    }
    int taken = callbacks.receive(argument, (tl_data *)p, p->tot_len);
    if (!taken) return ERR_MEM;  // lwIP keeps it and offers it again (tl_pcb_received)
    pbuf_free(p);
    return ERR_OK;
}

static err_t on_sent(void *argument, struct tcp_pcb *pcb, u16_t length) {
    (void)pcb;
    if (argument != NULL) {
        callbacks.sent(argument, length);
    }
    return ERR_OK;
}

static void on_error(void *argument, err_t error) {
    if (argument == NULL) return;
    callbacks.failed(argument, error);
}

tl_pcb *tl_listen(tl_netif *owner, const uint8_t address[16], uint16_t port) {
    struct tcp_pcb *pcb = tcp_new_ip_type(IPADDR_TYPE_V6);
    if (pcb == NULL) return NULL;
    // Listeners of several netifs (and connections still open on this port) may share the
    // port: each listener is bound to one address and one netif.
    ip_set_option(pcb, SOF_REUSEADDR);
    tcp_bind_netif(pcb, &owner->netif);
    ip_addr_t local;
    IP_SET_TYPE_VAL(local, IPADDR_TYPE_V6);
    address_from_bytes(ip_2_ip6(&local), address);
    if (tcp_bind(pcb, &local, port) != ERR_OK) {
        tcp_abort(pcb);
        return NULL;
    }
    err_t error = ERR_OK;
    struct tcp_pcb *listener = tcp_listen_with_backlog_and_err(pcb, TCP_DEFAULT_LISTEN_BACKLOG, &error);
    if (listener == NULL) {
        tcp_abort(pcb);
        return NULL;
    }
    tcp_arg(listener, owner);
    tcp_accept(listener, on_accept);
    return (tl_pcb *)listener;
}

void tl_listen_close(tl_pcb *listener) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)listener;
    tcp_arg(pcb, NULL);
    tcp_close(pcb);
}

void tl_pcb_attach(tl_pcb *handle, void *connection) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    tcp_arg(pcb, connection);
    tcp_recv(pcb, on_receive);
    tcp_sent(pcb, on_sent);
    tcp_err(pcb, on_error);
}

void tl_pcb_detach(tl_pcb *handle) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    if (pcb->state == LISTEN) return;
    tcp_arg(pcb, NULL);
    tcp_recv(pcb, NULL);
    tcp_sent(pcb, NULL);
    tcp_err(pcb, NULL);
}

void tl_pcb_close(tl_pcb *handle) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    if (tcp_close(pcb) != ERR_OK) tcp_abort(pcb);
}

void tl_pcb_abort(tl_pcb *handle) { tcp_abort((struct tcp_pcb *)handle); }

void tl_pcb_shutdown_output(tl_pcb *handle) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    if (tcp_shutdown(pcb, 0, 1) == ERR_OK) tcp_output(pcb);
}

/// Segments kept free in lwIP's send queue beyond what a write needs (one for a FIN, one
/// for a segment tcp_write may split).
#define TL_QUEUE_SLACK 4

size_t tl_pcb_send_space(const tl_pcb *handle) {
    const struct tcp_pcb *pcb = (const struct tcp_pcb *)handle;
    size_t buffer = tcp_sndbuf(pcb);
    int queued = tcp_sndqueuelen(pcb);
    if (queued + TL_QUEUE_SLACK >= TCP_SND_QUEUELEN || pcb->mss == 0) return 0;
    size_t segments = (size_t)(TCP_SND_QUEUELEN - TL_QUEUE_SLACK - queued) * pcb->mss;
    return buffer < segments ? buffer : segments;
}

size_t tl_pcb_write(tl_pcb *handle, const void *bytes, size_t length) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    size_t space = tl_pcb_send_space(handle);
    size_t total = length < space ? length : space;
    size_t written = 0;
    // tcp_write takes at most 64 KiB - 1 per call.
    while (written < total) {
        size_t chunk = total - written;
        if (chunk > 16384) chunk = 16384;
        if (tcp_write(pcb, (const uint8_t *)bytes + written, (u16_t)chunk, TCP_WRITE_FLAG_COPY) != ERR_OK) break;
        written += chunk;
    }
    if (written > 0) tcp_output(pcb);
    return written;
}

void tl_pcb_received(tl_pcb *handle, size_t length) {
    struct tcp_pcb *pcb = (struct tcp_pcb *)handle;
    while (length > 0) {
        u16_t chunk = length > 0xFFFF ? 0xFFFF : (u16_t)length;
        tcp_recved(pcb, chunk);
        length -= chunk;
    }
    if (pcb->refused_data != NULL) tcp_process_refused_data(pcb);
}

void tl_data_copy(const tl_data *data, void *destination, size_t length, size_t offset) {
    pbuf_copy_partial((const struct pbuf *)data, destination, (u16_t)length, (u16_t)offset);
}
