import NIOCore

/// What a ``TunnelStack`` serves and the bounds it keeps.
///
/// Memory per tunnel connection is bounded by: the receive window lwIP announces
/// (`TCP_WND`, 64 KiB, the most it delivers before the local side consumed it: the stack
/// calls `tcp_recved` only for bytes written to the local socket), lwIP's send buffer
/// (`TCP_SND_BUF`, 64 KiB, 180 segments), one local read not yet taken by lwIP
/// (``maxLocalRead``), and at most ``maxOutOfOrderSegments`` out-of-order segments of at
/// most the MTU each: about 360 KiB. Times ``maxConnections`` that is the stack's bound.
/// One exception: when a local service shuts down its side, NIO reads its socket to EOF at
/// once, so what the kernel still held for that socket (our receive buffer and the
/// service's send buffer, finite since nothing can follow EOF) waits in the stack until
/// lwIP takes it.
///
/// UDP holds per flow at most ``maxUDPQueuedDatagrams`` datagrams while its local socket
/// binds (16 × 1232 bytes), then at most ``udpWriteBufferLimit`` bytes NIO has not yet
/// sent plus one datagram (more is dropped); nothing toward the peer (each datagram read is
/// sent on at once). Times ``maxUDPFlows``: 256 × ~20 KiB ≈ 5 MiB, and 256 descriptors.
public struct TunnelStackConfiguration: Sendable {
    /// The tunnel's MTU: IPv6 packets in and out are at most this long, and SYNs announce
    /// an MSS of MTU - 60 (1220 for 1280, tailscale's default).
    public var mtu: Int = 1280
    /// The agent's HTTP API port inside the tailnet (coderd dials it).
    public var httpPort: UInt16 = 4
    /// Ports below this one are reserved (1–8, as the Go agent): connections to them that
    /// nothing serves are reset at once. From here up they are forwarded to 127.0.0.1.
    public var firstForwardedPort: UInt16 = 9
    /// Forward TCP ports ≥ ``firstForwardedPort`` and UDP to the workspace's loopback.
    public var forwardToLoopback: Bool = true
    /// Tunnel connections at once: established, closing (lwIP still finishing them) and
    /// half-open together. A SYN beyond it is reset.
    public var maxConnections: Int = 256
    /// Half-open connections at once (handshakes not completed, forwards still connecting
    /// locally). A SYN beyond it is dropped, as a kernel does when its SYN queue is full.
    public var maxHalfOpen: Int = 64
    /// lwIP's TIME_WAIT connections kept (2 × MSL = 2 min each); the oldest beyond go.
    public var maxTimeWait: Int = 1024
    /// Out-of-order segments lwIP may hold per connection; beyond, it drops them all and the
    /// peer retransmits. The window (64 KiB) holds ⌈65535 / 1220⌉ = 54 full segments, so
    /// a normal peer never reaches 64; one that sends 1-byte segments does.
    public var maxOutOfOrderSegments: Int = 64
    /// Largest single read from a local socket (one read waits while lwIP's send buffer
    /// is full, so this bounds what the stack holds per connection toward the tunnel).
    public var maxLocalRead: Int = 64 * 1024
    /// Connecting to 127.0.0.1:<port> for a forwarded SYN; afterwards the peer gets RST.
    public var connectTimeout: TimeAmount = .seconds(5)
    /// A handshake (SYN received, final ACK not) is abandoned after this.
    public var handshakeTimeout: TimeAmount = .seconds(20)
    /// TCP keepalive on every accepted connection, as the Go agent's netstack (gVisor's, with
    /// Linux's timing): after this long without a segment from the peer, a probe every
    /// ``keepAliveInterval``; ``keepAliveProbes`` unanswered ones reset the connection both
    /// ways. A peer that answers keeps an idle connection open.
    public var keepAliveIdle: TimeAmount = .hours(2)
    public var keepAliveInterval: TimeAmount = .seconds(75)
    public var keepAliveProbes: Int = 9
    /// Ports whose connections wait longer before the first probe: SSH (1 and 22), 72 h as in
    /// Coder's netstack, since an idle session is usually meant to stay.
    public var keepAliveIdleByPort: [UInt16: TimeAmount] = [1: .hours(72), 22: .hours(72)]
    /// A forwarded connection with no byte either way for this long is reset (both sides);
    /// nil (the default): none, keepalive finds a peer that went away.
    public var idleTimeout: TimeAmount? = nil
    /// A connection one direction of which has finished (FIN from the peer or EOF from the
    /// local socket) and that moved no byte for this long is closed, not reset: what is
    /// queued toward the peer still goes, then FIN, and the local socket is closed. lwIP
    /// then ends the connection alone within its own bounds (20 s in FIN_WAIT_2,
    /// retransmissions). Without it a peer that never closes, and answers keepalive probes,
    /// would hold a connection slot for ever.
    public var halfClosedTimeout: TimeAmount = .minutes(5)
    /// A SYN on an open connection gets a challenge ACK (RFC 5961 4.2) at most once per this
    /// interval per connection (gVisor's 500 ms); SYNs between are dropped.
    public var challengeAckInterval: TimeAmount = .milliseconds(500)

    /// UDP flows (peer address:port → agent address:port, each a local socket) at once. A
    /// datagram that would open one more is dropped and counted. Coder has no bound.
    public var maxUDPFlows: Int = 256
    /// A UDP flow with no datagram either way for this long ends (Coder's 2 min).
    public var udpIdleTimeout: TimeAmount = .minutes(2)
    /// The same for flows to port 53 (Coder's 30 s: DNS queries are one exchange).
    public var udpDNSIdleTimeout: TimeAmount = .seconds(30)
    /// Datagrams from the peer kept while a new flow's local socket binds; more are dropped.
    public var maxUDPQueuedDatagrams: Int = 16
    /// Bytes toward a flow's local socket NIO may hold unsent; datagrams beyond are dropped
    /// (UDP's answer to a full buffer).
    public var udpWriteBufferLimit: Int = 16 * 1024

    /// The clock of the UDP idle timer and the challenge-ACK interval (tests inject one to
    /// expire flows without waiting).
    var clock: @Sendable () -> NIODeadline = { .now() }

    public init() {}
}
