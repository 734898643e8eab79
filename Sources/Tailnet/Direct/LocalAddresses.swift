import DERP
#if canImport(Glibc)
import Glibc
#endif

/// The host's interface addresses that may serve as direct endpoints (port 0): every up
/// interface but `zt*`, without loopback, link-local and Coder's service prefix; IPv6 ULAs
/// and IPv4 link-local only when nothing else exists; loopback only when nothing at all.
enum LocalAddresses {
    /// At most this many addresses are read (a host has a few).
    static let maxAddresses = 64

    static func current() -> [DiscoEndpoint] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var all: [(name: String, endpoint: DiscoEndpoint)] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor, all.count < maxAddresses {
            defer { cursor = entry.pointee.ifa_next }
            guard entry.pointee.ifa_flags & UInt32(IFF_UP) != 0, let namePointer = entry.pointee.ifa_name,
                let address = entry.pointee.ifa_addr
            else { continue }
            let name = String(cString: namePointer)
            var raw: [UInt8]?
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                raw = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) } }
            case AF_INET6:
                raw = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) } }
            default:
                continue
            }
            if let raw, let endpoint = DiscoEndpoint(raw: raw, port: 0) { all.append((name, endpoint)) }
        }
        return choose(all)
    }

    /// The selection rules, apart from reading the interfaces (tests).
    static func choose(_ all: [(name: String, endpoint: DiscoEndpoint)]) -> [DiscoEndpoint] {
        let candidates = all.filter { !$0.name.hasPrefix("zt") && !$0.endpoint.isCoderServiceAddress && !$0.endpoint.isUnspecified }
        let regular = candidates.map(\.endpoint).filter { !$0.isLoopback && !$0.isLinkLocal && !$0.isUniqueLocal }
        if !regular.isEmpty { return dedupe(regular) }
        let fallback = candidates.map(\.endpoint).filter {
            !$0.isLoopback && ($0.isUniqueLocal || ($0.isLinkLocal && $0.isIPv4))
        }
        if !fallback.isEmpty { return dedupe(fallback) }
        return dedupe(candidates.map(\.endpoint).filter(\.isLoopback))
    }

    private static func dedupe(_ list: [DiscoEndpoint]) -> [DiscoEndpoint] {
        var seen = Set<DiscoEndpoint>()
        return list.filter { seen.insert($0).inserted }
    }
}
