import AgentProto
import Logging
import Synchronization
import SwiftProtobuf
import Tailnet
import Testing

/// The embedded-relay rewrite and the home-region choice.
@Suite struct DERPMapTests {
    static func map() -> Coder_Tailnet_V2_DERPMap {
        var map = Coder_Tailnet_V2_DERPMap()
        var embedded = Coder_Tailnet_V2_DERPMap.Region()
        embedded.regionID = 999
        embedded.embeddedRelay = true
        embedded.regionCode = "coder"
        var relay = Coder_Tailnet_V2_DERPMap.Region.Node()
        relay.name = "999b"
        relay.regionID = 999
        relay.hostName = "coder.example.com"
        relay.derpPort = 443
        relay.stunPort = -1
        var stun = Coder_Tailnet_V2_DERPMap.Region.Node()
        stun.name = "999stun"
        stun.stunOnly = true
        stun.hostName = "stun.example.com"
        embedded.nodes = [relay, stun]
        map.regions[999] = embedded
        var stunRegion = Coder_Tailnet_V2_DERPMap.Region()
        stunRegion.regionID = 1000
        stunRegion.nodes = [stun]
        map.regions[1000] = stunRegion
        var external = Coder_Tailnet_V2_DERPMap.Region()
        external.regionID = 7
        var externalNode = relay
        externalNode.hostName = "derp7.example.com"
        external.nodes = [externalNode]
        map.regions[7] = external
        return map
    }

    @Test func embeddedRegionPointsAtTheAccessURL() throws {
        var map = Self.map()
        DERPMapRewrite.apply(&map, accessURL: try #require(AccessURL("http://[::1]:3000/some/path")))
        let relay = try #require(map.regions[999]?.nodes.first)
        #expect(relay.hostName == "::1" && relay.derpPort == 3000 && relay.forceHTTP)
        #expect(map.regions[999]?.nodes[1].hostName == "stun.example.com")
        #expect(map.regions[7]?.nodes.first?.hostName == "derp7.example.com")
        DERPMapRewrite.apply(&map, accessURL: try #require(AccessURL("HTTPS://user@coder.internal")))
        let again = try #require(map.regions[999]?.nodes.first)
        #expect(again.hostName == "coder.internal" && again.derpPort == 443 && !again.forceHTTP)
    }

    @Test func accessURLParsesAsGoDoes() {
        #expect(AccessURL("http://127.0.0.1") == AccessURL("http://127.0.0.1:80"))
        #expect(AccessURL("https://h:8443/x?y")?.port == 8443)
        #expect(AccessURL("h:80") == nil)
        #expect(AccessURL("http://h:99999") == nil)
        #expect(AccessURL("http://[::1") == nil)
    }

    @Test func homeIsTheEmbeddedRelayNeverStunOnly() {
        let map = Self.map()
        #expect(HomeRegion.choose(in: map) == 999)
        var noEmbedded = map
        noEmbedded.regions[999] = nil
        #expect(HomeRegion.choose(in: noEmbedded) == 7)
        var onlyStun = noEmbedded
        onlyStun.regions[7] = nil
        #expect(HomeRegion.choose(in: onlyStun) == nil)
        #expect(HomeRegion.choose(in: map, current: 7) == 7)
        #expect(HomeRegion.choose(in: map, current: 1000) == 999)
        // A port from the map that is no TCP port makes a node undialable, not a crash.
        var badPorts = map
        badPorts.regions[999]!.nodes[0].derpPort = 70000
        badPorts.regions[7]!.nodes[0].derpPort = -1
        #expect(HomeRegion.dialable(badPorts.regions[999]!).isEmpty)
        #expect(HomeRegion.choose(in: badPorts) == nil)
    }
}

/// Streamed maps are rewritten and applied in order; unchanged maps do not notify.
@Suite struct DERPMapFollowerTests {
    @Test func everyStreamedMapIsRewrittenAndAppliedOnce() async throws {
        let seen = Mutex<[Coder_Tailnet_V2_DERPMap]>([])
        let follower = DERPMapFollower(accessURL: AccessURL("http://127.0.0.1:7080"), logger: Logger(label: "test")) { map in
            seen.withLock { $0.append(map) }
        }
        let map = DERPMapTests.map()
        follower.apply(map)
        let (stream, feed) = AsyncStream.makeStream(of: [UInt8].self)
        feed.yield(try map.serializedBytes())
        feed.yield([0xff, 0xff])
        var changed = map
        changed.regions[7] = nil
        feed.yield(try changed.serializedBytes())
        feed.finish()
        try await follower.follow(stream)
        let maps = seen.withLock { $0 }
        #expect(maps.count == 2)
        #expect(maps[0].regions[999]?.nodes.first?.hostName == "127.0.0.1")
        #expect(maps[0].regions[999]?.nodes.first?.derpPort == 7080)
        #expect(maps[1].regions[7] == nil)
        #expect(follower.map == maps[1])
    }
}
