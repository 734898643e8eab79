import AgentCore
import DERP
#if canImport(Glibc)
import Glibc
#endif

/// `GET /api/v0/netcheck` in the reference's shape (`healthsdk.AgentNetcheckReport`): the
/// report's severity and warnings, tailscale's `NetInfo` as far as this agent knows it, and
/// the workspace's network interfaces.
///
/// `NetInfo` comes from the last STUN report (UDP, the mapped addresses, whether the NAT maps
/// per destination) and the home region the agent holds (0 before it has one). Latencies are
/// the STUN round trips by region (as upstream tailscale records them; Coder's fork times
/// regions over HTTPS instead). No port mapping.
struct NetcheckReport: Encodable {
    struct Warning: Encodable {
        var code: String
        var message: String
    }

    struct NetInfo: Encodable {
        var mappingVariesByDestIP: Bool?
        var workingUDP: Bool = false
        var workingIPv6: Bool = false
        var havePortMap: Bool = false
        var preferredDERP: Int32
        var derpLatency: [String: Double] = [:]
        var udp = false
        var ipv4 = false
        var ipv6 = false
        var ipv4CanSend = false
        var ipv6CanSend = false
        var globalV4: String?
        var globalV6: String?

        enum CodingKeys: String, CodingKey {
            case mappingVariesByDestIP = "MappingVariesByDestIP"
            case workingUDP = "WorkingUDP", workingIPv6 = "WorkingIPv6", havePortMap = "HavePortMap"
            case preferredDERP = "PreferredDERP", derpLatency = "DERPLatency"
            case udp = "UDP", ipv4 = "IPv4", ipv6 = "IPv6", ipv4CanSend = "IPv4CanSend", ipv6CanSend = "IPv6CanSend"
            case globalV4 = "GlobalV4", globalV6 = "GlobalV6"
        }

        init(preferredDERP: Int32, report: NetcheckResult?) {
            self.preferredDERP = preferredDERP
            guard let report else { return }
            mappingVariesByDestIP = report.mappingVariesByDestIP
            workingUDP = report.udp
            workingIPv6 = report.ipv6
            udp = report.udp
            ipv4 = report.ipv4
            ipv6 = report.ipv6
            ipv4CanSend = report.ipv4CanSend
            ipv6CanSend = report.ipv6CanSend
            globalV4 = report.globalV4?.description
            globalV6 = report.globalV6?.description
            for (key, latency) in report.stunLatency { derpLatency[key] = Double(latency) / 1e9 }
        }
    }

    struct Interface: Encodable {
        var name: String
        var mtu: Int
        var addresses: [String]
    }

    struct Interfaces: Encodable {
        var severity: String
        var warnings: [Warning]
        var dismissed = false
        var interfaces: [Interface]
    }

    var severity: String
    var warnings: [Warning]
    var dismissed = false
    var netInfo: NetInfo?
    var interfaces: Interfaces

    enum CodingKeys: String, CodingKey {
        case severity, warnings, dismissed, netInfo = "net_info", interfaces
    }

    /// `net_info` is always present, null without a tailnet (Go's nil pointer).
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(severity, forKey: .severity)
        try container.encode(warnings, forKey: .warnings)
        try container.encode(dismissed, forKey: .dismissed)
        if let netInfo { try container.encode(netInfo, forKey: .netInfo) } else { try container.encodeNil(forKey: .netInfo) }
        try container.encode(interfaces, forKey: .interfaces)
    }

    /// Below this an interface's MTU may hurt direct connections (the reference's rule, 1378).
    static let minimumMTU = 1378

    /// The report for a tailnet whose home region is `homeRegion` and whose home relay is or
    /// is not connected; nil `homeRegion`: no tailnet (`net_info` is then null).
    init(homeRegion: Int32?, homeConnected: Bool, report: NetcheckResult? = nil, interfaces: [Interface]) {
        var warnings: [Warning] = []
        if let homeRegion {
            netInfo = NetInfo(preferredDERP: homeRegion, report: report)
            if !homeConnected {
                warnings.append(Warning(code: "EDERP01", message: "The agent is not connected to its home DERP region \(homeRegion)."))
            }
        }
        var interfaceWarnings: [Warning] = []
        for interface in interfaces where interface.mtu > 0 && interface.mtu < Self.minimumMTU && interface.name != "lo" {
            interfaceWarnings.append(
                Warning(
                    code: "EIF01",
                    message: "Network interface \(interface.name) has MTU \(interface.mtu) (less than \(Self.minimumMTU)), which may degrade the quality of direct connections or render them unusable."))
        }
        self.interfaces = Interfaces(severity: interfaceWarnings.isEmpty ? "ok" : "warning", warnings: interfaceWarnings, interfaces: interfaces)
        self.warnings = warnings + interfaceWarnings
        severity = self.warnings.isEmpty ? "ok" : "warning"
    }

    /// The host's interfaces that are up, with their MTU and addresses (`10.0.0.2/24`).
    static func hostInterfaces() -> [Interface] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var order: [String] = []
        var addresses: [String: [String]] = [:]
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard entry.pointee.ifa_flags & UInt32(IFF_UP) != 0, let namePointer = entry.pointee.ifa_name else { continue }
            let name = String(cString: namePointer)
            if addresses[name] == nil {
                order.append(name)
                addresses[name] = []
            }
            if let text = prefixText(entry.pointee.ifa_addr, mask: entry.pointee.ifa_netmask) { addresses[name]!.append(text) }
        }
        return order.map { name in Interface(name: name, mtu: mtu(name), addresses: addresses[name] ?? []) }
    }

    static func mtu(_ name: String) -> Int {
        guard name.utf8.allSatisfy({ $0 != UInt8(ascii: "/") }) else { return 0 }
        let fd = open("/sys/class/net/\(name)/mtu", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &bytes, bytes.count)
        guard n > 0 else { return 0 }
        return Int(String(decoding: bytes[0..<n], as: UTF8.self).trimmingWhitespace()) ?? 0
    }

    /// `address/prefix` for an IPv4 or IPv6 socket address and its mask.
    static func prefixText(_ address: UnsafeMutablePointer<sockaddr>?, mask: UnsafeMutablePointer<sockaddr>?) -> String? {
        guard let address else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var bits = 0
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                var raw = v4.pointee.sin_addr
                _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
            }
            if let mask {
                bits = mask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr).nonzeroBitCount }
            }
        case AF_INET6:
            address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                var raw = v6.pointee.sin6_addr
                _ = inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
            }
            if let mask {
                bits = mask.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { m in
                    withUnsafeBytes(of: m.pointee.sin6_addr) { $0.reduce(0) { $0 + $1.nonzeroBitCount } }
                }
            }
        default:
            return nil
        }
        return String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/\(bits)"
    }
}
