#if canImport(Glibc)
import Glibc
#endif

/// A blocking name lookup (`getaddrinfo`) for a thread that may wait (never an event loop:
/// a lookup can take seconds): the first address of each family, as numeric text.
public enum HostLookup {
    /// The first IPv4 and the first IPv6 address of `name` in the resolver's order (a literal
    /// gives itself); both nil when the lookup fails. `datagram` asks for UDP, else TCP.
    public static func firstAddresses(of name: String, datagram: Bool) -> (ipv4: String?, ipv6: String?) {
        let found = orderedFirstAddresses(of: name, datagram: datagram)
        return (found.first { !$0.contains(":") }, found.first { $0.contains(":") })
    }

    /// The first address of each family, in the resolver's order (RFC 6724's preference:
    /// the family to try first comes first); empty when the lookup fails.
    public static func orderedFirstAddresses(of name: String, datagram: Bool) -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(datagram ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard !name.isEmpty, getaddrinfo(name, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var found: [String] = []
        var families: Set<Int32> = []
        var node = list
        // Bounded: the resolver's list, and at most one address per family (two in all).
        while let info = node?.pointee, families.count < 2 {
            node = info.ai_next
            guard info.ai_family == AF_INET || info.ai_family == AF_INET6, !families.contains(info.ai_family), let address = info.ai_addr else { continue }
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, info.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            families.insert(info.ai_family)
            found.append(text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return found
    }
}
