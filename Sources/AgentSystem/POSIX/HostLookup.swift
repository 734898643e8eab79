#if canImport(Glibc)
import Glibc
#endif

/// A blocking name lookup (`getaddrinfo`) for a thread that may wait (never an event loop:
/// a lookup can take seconds): the first address of each family, as numeric text.
public enum HostLookup {
    /// The first IPv4 and the first IPv6 address of `name` in the resolver's order (a literal
    /// gives itself); both nil when the lookup fails. `datagram` asks for UDP, else TCP.
    public static func firstAddresses(of name: String, datagram: Bool) -> (ipv4: String?, ipv6: String?) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(datagram ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard !name.isEmpty, getaddrinfo(name, nil, &hints, &list) == 0 else { return (nil, nil) }
        defer { freeaddrinfo(list) }
        var ipv4: String?
        var ipv6: String?
        var node = list
        while let info = node?.pointee, ipv4 == nil || ipv6 == nil {
            node = info.ai_next
            let wanted = (info.ai_family == AF_INET && ipv4 == nil) || (info.ai_family == AF_INET6 && ipv6 == nil)
            guard wanted, let address = info.ai_addr else { continue }
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, info.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let numeric = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if info.ai_family == AF_INET { ipv4 = numeric } else { ipv6 = numeric }
        }
        return (ipv4, ipv6)
    }
}
