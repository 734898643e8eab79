/// yamux frame types.
public enum YamuxType: UInt8, Sendable, CaseIterable {
    case data = 0
    case windowUpdate = 1
    case ping = 2
    case goAway = 3
}

/// yamux header flags.
public struct YamuxFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Opens a stream (or asks for a ping reply).
    public static let syn = YamuxFlags(rawValue: 0x1)
    /// Accepts a stream (or answers a ping).
    public static let ack = YamuxFlags(rawValue: 0x2)
    /// Half-closes a stream.
    public static let fin = YamuxFlags(rawValue: 0x4)
    /// Aborts a stream.
    public static let rst = YamuxFlags(rawValue: 0x8)
}

/// GoAway codes: 0 ends new opens only; 1 and 2 end the session.
public enum YamuxGoAwayCode: UInt32, Sendable {
    case normal = 0
    case protocolError = 1
    case internalError = 2
}

/// The 12-byte big-endian yamux header: version, type, flags, stream ID, length.
///
/// `length` is the payload size for Data, the credit delta for WindowUpdate, the opaque
/// value for Ping and the code for GoAway.
public struct YamuxHeader: Equatable, Sendable {
    public static let size = 12
    public static let version: UInt8 = 0
    /// Initial per-stream window each way: 256 KiB.
    public static let initialWindow: UInt32 = 256 * 1024

    public var type: YamuxType
    public var flags: YamuxFlags
    public var streamID: UInt32
    public var length: UInt32

    public init(type: YamuxType, flags: YamuxFlags = [], streamID: UInt32, length: UInt32) {
        self.type = type
        self.flags = flags
        self.streamID = streamID
        self.length = length
    }

    public func encode(into out: inout [UInt8]) {
        out.append(YamuxHeader.version)
        out.append(type.rawValue)
        out.append(UInt8(flags.rawValue >> 8))
        out.append(UInt8(flags.rawValue & 0xFF))
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: streamID >> UInt32(shift))) }
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> UInt32(shift))) }
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.size)
        encode(into: &out)
        return out
    }

    /// Decodes exactly 12 bytes starting at `offset`.
    public init(decoding bytes: [UInt8], at offset: Int = 0) throws(YamuxError) {
        precondition(bytes.count - offset >= Self.size)
        guard bytes[offset] == Self.version else { throw .unsupportedVersion(bytes[offset]) }
        guard let type = YamuxType(rawValue: bytes[offset + 1]) else { throw .invalidType(bytes[offset + 1]) }
        func u32(_ at: Int) -> UInt32 {
            bytes[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) }
        }
        self.type = type
        self.flags = YamuxFlags(rawValue: UInt16(bytes[offset + 2]) << 8 | UInt16(bytes[offset + 3]))
        self.streamID = u32(offset + 4)
        self.length = u32(offset + 8)
    }
}

/// Session-fatal framing errors (the session answers GoAway(1) and closes).
public enum YamuxError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsupportedVersion(UInt8)
    case invalidType(UInt8)
    /// A Data frame larger than the receiver could ever have granted.
    case payloadTooLarge(UInt32)

    public var description: String {
        switch self {
        case .unsupportedVersion(let v): return "yamux: unsupported protocol version \(v)"
        case .invalidType(let t): return "yamux: invalid frame type \(t)"
        case .payloadTooLarge(let n): return "yamux: data frame of \(n) bytes exceeds the receive window"
        }
    }
}
