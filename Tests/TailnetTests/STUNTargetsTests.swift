import AgentProto
import DERP
import Synchronization
import Testing
@testable import Tailnet

/// Where the DERP map's STUN nodes are probed: literal addresses, and host names (Coder's
/// default STUN regions carry only `stun.l.google.com` and port 19302) resolved off the loop
/// and cached.
@Suite struct STUNTargetsTests {
    static func node(host: String = "", ipv4: String = "", ipv6: String = "", testIP: String = "", port: Int32 = 19302) -> Coder_Tailnet_V2_DERPMap.Region.Node {
        var node = Coder_Tailnet_V2_DERPMap.Region.Node()
        node.hostName = host
        node.ipv4 = ipv4
        node.ipv6 = ipv6
        node.stunTestIp = testIP
        node.stunPort = port
        node.stunOnly = true
        return node
    }

    static func map(_ regions: [Int64: [Coder_Tailnet_V2_DERPMap.Region.Node]]) -> Coder_Tailnet_V2_DERPMap {
        var map = Coder_Tailnet_V2_DERPMap()
        for (id, nodes) in regions {
            var region = Coder_Tailnet_V2_DERPMap.Region()
            region.regionID = id
            region.nodes = nodes
            map.regions[id] = region
        }
        return map
    }

    static func servers(_ targets: STUNTargets, _ resolved: [String: STUNResolver.Addresses] = [:]) -> [String] {
        targets.servers(resolved: resolved).map { "\($0.region) \($0.endpoint)" }
    }

    @Test func coderDefaultRegionsAreHostNamesResolvedForBothFamilies() {
        let targets = STUNTargets(Self.map([1001: [Self.node(host: "stun1.l.google.com")], 1000: [Self.node(host: "stun.l.google.com")]]))
        #expect(targets.hostNames == ["stun.l.google.com", "stun1.l.google.com"])
        #expect(Self.servers(targets).isEmpty, "nothing to probe before the names resolve")
        let resolved: [String: STUNResolver.Addresses] = [
            "stun.l.google.com": .init(ipv4: "192.0.2.1", ipv6: "2001:db8::1"),
            "stun1.l.google.com": .init(ipv4: "192.0.2.2", ipv6: nil),
        ]
        #expect(Self.servers(targets, resolved) == ["1000 192.0.2.1:19302", "1000 [2001:db8::1]:19302", "1001 192.0.2.2:19302"])
    }

    @Test func aLiteralAddressWinsOverTheNameAndNoneDisablesItsFamily() {
        let targets = STUNTargets(
            Self.map([
                1: [Self.node(host: "a.example", ipv4: "198.51.100.7")],  // v4 literal, v6 by name
                2: [Self.node(host: "b.example", ipv4: "none")],  // v6 by name only
                3: [Self.node(host: "c.example", ipv4: "2001:db8::9", ipv6: "198.51.100.9")],  // wrong families: neither
                4: [Self.node(host: "d.example", ipv4: "203.0.113.4", testIP: "127.0.0.1", port: 0)],  // the test IP alone, port 3478
                5: [Self.node(host: "e.example", port: -1)],  // no STUN
            ]))
        #expect(targets.hostNames == ["a.example", "b.example"])
        let resolved: [String: STUNResolver.Addresses] = [
            "a.example": .init(ipv4: "192.0.2.10", ipv6: "2001:db8::a"),
            "b.example": .init(ipv4: "192.0.2.11", ipv6: "2001:db8::b"),
        ]
        #expect(Self.servers(targets, resolved) == ["1 198.51.100.7:19302", "1 [2001:db8::a]:19302", "2 [2001:db8::b]:19302", "4 127.0.0.1:3478"])
    }

    @Test func theTargetsAreBounded() {
        let nodes = (0..<40).map { Self.node(host: "n\($0).example") }
        let targets = STUNTargets(Self.map([1000: nodes]))
        #expect(targets.hostNames.count == STUNServer.maxServers / 2)
        let long = STUNTargets(Self.map([1000: [Self.node(host: String(repeating: "a", count: 254))]]))
        #expect(long.hostNames.isEmpty, "longer than any DNS name")
    }

    @Test func theSystemResolverFindsLocalhost() {
        // /etc/hosts: no network needed.
        #expect(STUNResolver.systemLookup("localhost").ipv4 == "127.0.0.1")
        #expect(STUNResolver.systemLookup("203.0.113.5") == .init(ipv4: "203.0.113.5", ipv6: nil), "a numeric host name is its address")
        #expect(STUNResolver.systemLookup("no-such-host.invalid").isEmpty)
    }

    @Test func answersAreCachedAndANameWithoutOneIsAskedAgain() async throws {
        let answers = Mutex<[String: STUNResolver.Addresses]>(["a.example": .init(ipv4: "192.0.2.1", ipv6: nil)])
        let resolver = STUNResolver { name in answers.withLock { $0[name] ?? .init() } }
        #expect(resolver.cached(["a.example"]).stale)
        let first = try #require(await resolver.resolve(["a.example", "b.example"]))
        #expect(first == ["a.example": .init(ipv4: "192.0.2.1", ipv6: nil)])
        #expect(resolver.lookups.load(ordering: .relaxed) == 2)

        // a.example is fresh now; b.example had no answer and is asked again.
        answers.withLock { $0["a.example"] = .init(ipv4: "192.0.2.99", ipv6: nil) }
        answers.withLock { $0["b.example"] = .init(ipv4: nil, ipv6: "2001:db8::2") }
        let second = try #require(await resolver.resolve(["a.example", "b.example"]))
        #expect(second["a.example"]?.ipv4 == "192.0.2.1", "a cached answer is used within the TTL")
        #expect(second["b.example"]?.ipv6 == "2001:db8::2")
        #expect(resolver.lookups.load(ordering: .relaxed) == 3)
        #expect(!resolver.cached(["a.example", "b.example"]).stale)

        // Past the TTL, both are stale and looked up again.
        #expect(resolver.cached(["a.example"], now: .now + STUNResolver.ttl).stale)
        // A name no longer asked for leaves the cache.
        _ = await resolver.resolve(["b.example"])
        #expect(resolver.cached(["a.example"]).addresses.isEmpty)
    }
}
