/// DERP frame types; protocol version 2.
public enum DERPFrameType {
    public static let serverKey: UInt8 = 0x01
    public static let clientInfo: UInt8 = 0x02
    public static let serverInfo: UInt8 = 0x03
    public static let sendPacket: UInt8 = 0x04
    public static let recvPacket: UInt8 = 0x05
    public static let keepAlive: UInt8 = 0x06
    public static let notePreferred: UInt8 = 0x07
    public static let peerGone: UInt8 = 0x08
    /// Mesh only: 0x09 PeerPresent, 0x0a ForwardPacket, 0x10 WatchConns, 0x11 ClosePeer.
    public static let peerPresent: UInt8 = 0x09
    public static let ping: UInt8 = 0x12
    public static let pong: UInt8 = 0x13
    public static let health: UInt8 = 0x14
    public static let restarting: UInt8 = 0x15
}

/// DERP's fixed sizes and limits.
public enum DERPProtocol {
    /// The version this client speaks (`{"version":2,...}`).
    public static let version = 2
    /// Type byte plus big-endian 32-bit length.
    public static let headerLength = 5
    /// A frame header announcing more than this is corrupt: the connection is dropped as
    /// soon as the header is read (as the Go client's 1 MiB).
    public static let maxFrameLength = 1 << 20
    /// The server greeting may be longer than 40 bytes, but not past this (Go reads it
    /// with a 1 KiB limit).
    public static let maxGreetingLength = 1 << 10
    /// Largest packet inside SendPacket (the server refuses more).
    public static let maxPacketLength = 64 << 10
    /// `DERP🔑`: the first 8 bytes of the ServerKey frame.
    public static let magic: [UInt8] = [0x44, 0x45, 0x52, 0x50, 0xF0, 0x9F, 0x94, 0x91]
    /// Length of a Ping or Pong payload.
    public static let pingLength = 8
}
