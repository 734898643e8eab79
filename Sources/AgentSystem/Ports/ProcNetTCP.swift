/// The kernel's TCP socket tables (`/proc/net/tcp`, `/proc/net/tcp6`): a pure parser of
/// the text (listening sockets for the listening-ports route, any state for the owner of a
/// forwarded port), so it is tested and fuzzed without a kernel.
public enum ProcNetTCP {
    /// A socket in the LISTEN state: its local port and its inode (which finds its process).
    public struct Listener: Sendable, Equatable {
        public var port: UInt16
        public var inode: UInt64

        public init(port: UInt16, inode: UInt64) {
            self.port = port
            self.inode = inode
        }
    }

    /// One row of a table, in any state: its local port, its state (the kernel's number)
    /// and its inode (0 for a socket no process holds, as in TIME_WAIT).
    public struct Socket: Sendable, Equatable {
        public var port: UInt16
        public var state: UInt8
        public var inode: UInt64

        public init(port: UInt16, state: UInt8, inode: UInt64) {
            self.port = port
            self.state = state
            self.inode = inode
        }
    }

    /// The kernel's number for TCP_LISTEN in the `st` column.
    public static let listenState: UInt8 = 0x0A

    /// Every LISTEN row of a table, in the table's order. Rows that do not parse (the
    /// header, a truncated last line, anything unexpected) are skipped, never trusted.
    public static func listeners(_ text: [UInt8]) -> [Listener] {
        sockets(text).compactMap { $0.state == listenState ? Listener(port: $0.port, inode: $0.inode) : nil }
    }

    /// Every row of a table in any state, in the table's order; rows that do not parse are
    /// skipped.
    public static func sockets(_ text: [UInt8]) -> [Socket] {
        var found: [Socket] = []
        for line in text.split(separator: UInt8(ascii: "\n")) {
            if let socket = socket(line) { found.append(socket) }
        }
        return found
    }

    /// One row: `sl: local rem st tx:rx tr:when retrnsmt uid timeout inode ...`.
    static func socket(_ line: ArraySlice<UInt8>) -> Socket? {
        let fields = line.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
        guard fields.count >= 10, fields[0].last == UInt8(ascii: ":") else { return nil }
        // The local address is `HEX:PORT` (8 hex digits for IPv4, 32 for IPv6).
        let local = fields[1]
        guard let colon = local.lastIndex(of: UInt8(ascii: ":")),
            let port = hex(local[local.index(after: colon)...], maxDigits: 4),
            let state = hex(fields[3], maxDigits: 2),
            let inode = decimal(fields[9])
        else { return nil }
        return Socket(port: UInt16(port), state: UInt8(state), inode: inode)
    }

    static func hex(_ digits: some Collection<UInt8>, maxDigits: Int) -> UInt64? {
        guard !digits.isEmpty, digits.count <= maxDigits else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    /// A decimal of at most 19 digits (an inode number), so it cannot overflow.
    public static func decimal(_ digits: some Collection<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return value
    }
}
