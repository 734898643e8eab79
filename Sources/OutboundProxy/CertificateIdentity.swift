import AgentTLS

/// Go's `Certificate.VerifyHostname`: whether a leaf certificate (its subject alternative
/// names) is for `target`. An address
/// needs an IP name of the same bytes (an IPv4 address and its IPv4-mapped IPv6 form are one,
/// as in `net.IP.Equal`). A name needs a DNS name of the same labels, ASCII case and the
/// name's trailing dot aside, where a `*` first label stands for any one label; when the name
/// or the DNS name is not a valid host name or pattern (Go's `validHostname`: letters,
/// digits, `_`, `-` not first, no empty label, no bare `*`), the two must be equal instead.
/// The subject's common name never counts, and a non-ASCII name is compared as written (Go
/// would not convert it to punycode either). An address may come in brackets (`[::1]`).
enum CertificateIdentity {
    static func names(_ target: String, _ names: [SubjectAlternativeName]) -> Bool {
        let bare = target.count >= 3 && target.hasPrefix("[") && target.hasSuffix("]") ? String(target.dropFirst().dropLast()) : target
        if let address = IPAddressBytes(bare) {
            return names.contains { $0.kind == .ipAddress && IPAddressBytes(bytes: $0.contents) == address }
        }
        let candidate = lowercased(Array(target.utf8))
        var host = candidate
        if host.last == dot { host.removeLast() }
        let hostLabels = host.split(separator: dot, omittingEmptySubsequences: false)
        let validHost = isValid(hostLabels, pattern: false)
        return names.contains { name in
            guard name.kind == .dnsName else { return false }
            let pattern = lowercased(name.contents)
            let labels = pattern.split(separator: dot, omittingEmptySubsequences: false)
            guard validHost, isValid(labels, pattern: true) else {
                // Go's `matchExactly`.
                return !pattern.isEmpty && pattern != [dot] && !candidate.isEmpty && candidate != [dot] && pattern == candidate
            }
            guard labels.count == hostLabels.count else { return false }
            return zip(labels, hostLabels).enumerated().allSatisfy { index, pair in
                pair.0.elementsEqual(pair.1) || index == 0 && pair.0.elementsEqual([star])
            }
        }
    }

    private static let dot = UInt8(ascii: ".")
    private static let star = UInt8(ascii: "*")

    /// Go's `validHostname` over a name's labels (a host's trailing dot already dropped).
    static func isValid(_ labels: [ArraySlice<UInt8>], pattern: Bool) -> Bool {
        guard !labels.isEmpty, !(labels.count == 1 && labels[0].elementsEqual([star])) else { return false }
        for (index, label) in labels.enumerated() {
            if label.isEmpty { return false }
            if pattern && index == 0 && label.elementsEqual([star]) { continue }
            for (offset, byte) in label.enumerated() {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "_"):
                    continue
                case UInt8(ascii: "-") where offset != 0:
                    continue
                default:
                    return false
                }
            }
        }
        return true
    }

    /// ASCII letters lowercased; every other byte as it is (Go's `toLowerCaseASCII`).
    static func lowercased(_ bytes: [UInt8]) -> [UInt8] {
        bytes.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0 }
    }
}
