import AgentProto
import SwiftProtobuf
import Tailnet
import Testing

/// The agent's addresses, node id and Node as coderd checks them.
@Suite struct NodeTests {
    /// 12345678-9abc-def0-1234-56789abcdef0, the spec's example.
    static let agentID: [UInt8] = [
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
    ]

    @Test func addressesAndIDComeFromTheUUID() throws {
        let addresses = try #require(TailnetAddresses(agentID: Self.agentID))
        #expect(
            addresses.prefixes == [
                "fd7a:115c:a1e0:def0:1234:5678:9abc:def0/128",
                "fd60:627a:a42b:def0:1234:5678:9abc:def0/128",
            ])
        #expect(addresses.nodeID == 1311768467463790320)
        #expect(TailnetAddresses(agentID: Array(Self.agentID.prefix(15))) == nil)
    }

    @Test func negativeAndExtremeIDsAreMadeNonNegative() throws {
        var id = Self.agentID
        for i in 8..<16 { id[i] = 0xff }
        #expect(try #require(TailnetAddresses(agentID: id)).nodeID == 1)
        id[8] = 0x80
        for i in 9..<16 { id[i] = 0 }
        #expect(try #require(TailnetAddresses(agentID: id)).nodeID == Int64.max)
    }

    @Test func addressTextIsCanonicalCompressedLowercase() {
        var bytes = [UInt8](repeating: 0, count: 16)
        bytes[0] = 0xfd; bytes[1] = 0x7a; bytes[15] = 0x01
        #expect(TailnetAddresses.text(bytes) == "fd7a::1")
        #expect(TailnetAddresses.parse("FD7A:0:0::1") == bytes)
        #expect(TailnetAddresses.parse("10.0.0.1") == nil)
    }

    @Test func nodeHasEveryFieldCoderdRequires() throws {
        let addresses = try #require(TailnetAddresses(agentID: Self.agentID))
        let key = [UInt8](repeating: 0xab, count: 32)
        let disco = [UInt8](0..<32)
        var node = SelfNode(addresses: addresses, nodeKey: key, discoKey: disco)
        #expect(!node.isSendable)
        node.preferredDERP = 999
        #expect(node.isSendable)
        let message = node.message(asOf: (seconds: 1_700_000_000, nanos: 123_456_789))
        #expect(message.id == 1311768467463790320)
        #expect(Array(message.key) == Array("np".utf8) + key)
        #expect(message.disco == "discokey:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(message.disco.utf8.count == 73)
        #expect(message.preferredDerp == 999)
        #expect(message.addresses == addresses.prefixes)
        #expect(message.allowedIps == addresses.prefixes)
        #expect(message.endpoints.isEmpty)
        #expect(message.asOf.seconds == 1_700_000_000 && message.asOf.nanos == 123_456_000)
        #expect(SelfNode.parseDisco(message.disco) == disco)
        #expect(SelfNode.parseDisco("discokey:zz") == nil)
    }
}
