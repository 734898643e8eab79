import CAgentTLS

/// A DNS or IP name of a certificate's subject alternative names, as its bytes: what an
/// identity check (Go's `VerifyHostname`) compares.
public struct SubjectAlternativeName: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case dnsName
        /// 4 or 16 bytes.
        case ipAddress
    }

    public let kind: Kind
    public let contents: [UInt8]

    public init(kind: Kind, contents: [UInt8]) {
        self.kind = kind
        self.contents = contents
    }

    /// The names of the first certificate in PEM `bytes`, nil when there is none.
    public static func names(pem bytes: [UInt8]) -> [SubjectAlternativeName]? {
        read { out, capacity in bytes.withUnsafeBufferPointer { agent_tls_pem_names($0.baseAddress, $0.count, out, capacity) } }
    }

    /// Calls `fill` (the C side's record writer) with a buffer large enough, then parses the
    /// records; nil when `fill` reports no certificate.
    static func read(_ fill: (UnsafeMutablePointer<UInt8>?, Int) -> Int) -> [SubjectAlternativeName]? {
        var capacity = 1024
        // Twice at most: the first answer says how much the records need.
        for _ in 0..<2 {
            var buffer = [UInt8](repeating: 0, count: capacity)
            let needed = buffer.withUnsafeMutableBufferPointer { fill($0.baseAddress, $0.count) }
            if needed < 0 { return nil }
            if needed <= capacity { return parse(buffer[..<needed]) }
            capacity = needed
        }
        return nil
    }

    /// Records of a kind byte, a length byte and the name.
    static func parse(_ records: ArraySlice<UInt8>) -> [SubjectAlternativeName] {
        var names: [SubjectAlternativeName] = []
        var index = records.startIndex
        while index + 2 <= records.endIndex {
            let kind = records[index]
            let end = index + 2 + Int(records[index + 1])
            guard end <= records.endIndex else { break }
            let contents = Array(records[(index + 2)..<end])
            if kind == UInt8(AGENT_TLS_NAME_DNS) { names.append(SubjectAlternativeName(kind: .dnsName, contents: contents)) }
            if kind == UInt8(AGENT_TLS_NAME_IP) { names.append(SubjectAlternativeName(kind: .ipAddress, contents: contents)) }
            index = end
        }
        return names
    }
}
