import AgentProto
import FoundationEssentials
import Tailnet
import Testing

/// Peer updates and acks on the coordination stream.
@Suite struct CoordinationStateTests {
    static func update(
        _ id: UInt8, kind: Coder_Tailnet_V2_CoordinateResponse.PeerUpdate.Kind,
        key: UInt8 = 1, derp: Int32 = 999
    ) -> Coder_Tailnet_V2_CoordinateResponse.PeerUpdate {
        var update = Coder_Tailnet_V2_CoordinateResponse.PeerUpdate()
        update.id = Data([UInt8](repeating: id, count: 16))
        update.kind = kind
        if kind == .node {
            update.node.key = Data(Array("np".utf8) + [UInt8](repeating: key, count: 32))
            update.node.disco = "discokey:" + String(repeating: "ab", count: 32)
            update.node.preferredDerp = derp
            update.node.allowedIps = ["fd7a:115c:a1e0::\(id)/128"]
        }
        return update
    }

    static func response(_ updates: Coder_Tailnet_V2_CoordinateResponse.PeerUpdate...) -> Coder_Tailnet_V2_CoordinateResponse {
        var response = Coder_Tailnet_V2_CoordinateResponse()
        response.peerUpdates = updates
        return response
    }

    @Test func everyNodeUpdateIsAckedRepeatsAndRefusalsIncluded() {
        var state = CoordinationState()
        let first = state.apply(Self.response(Self.update(1, kind: .node), Self.update(2, kind: .node, derp: 0)))
        #expect(first.ack?.readyForHandshake.map { Array($0.id) } == [[UInt8](repeating: 1, count: 16), [UInt8](repeating: 2, count: 16)])
        #expect(first.changes.count == 1)
        #expect(first.refused.map(\.reason) == [.noHomeRegion])
        let repeated = state.apply(Self.response(Self.update(1, kind: .node)))
        #expect(repeated.ack?.readyForHandshake.count == 1)
        #expect(state.peers.count == 1)
    }

    @Test func replacedKeyRemovesTheOldPeerDisconnectRemovesLostKeeps() {
        var state = CoordinationState()
        _ = state.apply(Self.response(Self.update(1, kind: .node, key: 1)))
        let replaced = state.apply(Self.response(Self.update(1, kind: .node, key: 2)))
        #expect(replaced.changes.count == 2)
        if case .remove(_, let key) = replaced.changes.first { #expect(key == [UInt8](repeating: 1, count: 32)) } else { Issue.record("no removal") }
        let lost = state.apply(Self.response(Self.update(1, kind: .lost)))
        #expect(lost.changes.isEmpty && lost.ack == nil)
        #expect(state.peers.first?.value.lost == true)
        _ = state.apply(Self.response(Self.update(1, kind: .node, key: 2)))
        #expect(state.peers.first?.value.lost == false)
        state.streamEnded()
        #expect(state.peers.first?.value.lost == true)
        let gone = state.apply(Self.response(Self.update(1, kind: .disconnected)))
        #expect(gone.changes == [.remove(id: [UInt8](repeating: 1, count: 16), nodeKey: [UInt8](repeating: 2, count: 32))])
        #expect(state.peers.isEmpty)
    }

    @Test func malformedNodesAreRefusedWithAReason() {
        var state = CoordinationState()
        var badKey = Self.update(3, kind: .node)
        badKey.node.key = Data(Array("np".utf8) + [1, 2])
        var badDisco = Self.update(4, kind: .node)
        badDisco.node.disco = ""
        var badIP = Self.update(5, kind: .node)
        badIP.node.allowedIps = ["not an ip"]
        var badID = Self.update(6, kind: .node)
        badID.id = Data([1])
        var errored = Self.response(badKey, badDisco, badIP, badID)
        errored.error = "authorization: nope"
        let outcome = state.apply(errored)
        #expect(outcome.refused.map(\.reason) == [.badKey, .badDisco, .badAllowedIP, .badID])
        #expect(outcome.error == "authorization: nope")
        #expect(outcome.ack?.readyForHandshake.count == 4)
        #expect(state.peers.isEmpty)
    }

    @Test func thePeerTableIsBounded() {
        var state = CoordinationState()
        var updates: [Coder_Tailnet_V2_CoordinateResponse.PeerUpdate] = []
        for i in 0..<(CoordinationState.maxPeers + 3) {
            var update = Self.update(0, kind: .node)
            update.id = Data(withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) } + [UInt8](repeating: 0, count: 8))
            updates.append(update)
        }
        var response = Coder_Tailnet_V2_CoordinateResponse()
        response.peerUpdates = updates
        let outcome = state.apply(response)
        #expect(outcome.overflow == 3)
        #expect(state.peers.count == CoordinationState.maxPeers)
    }

    static func id(_ i: Int) -> Data { Data(withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) } + [UInt8](repeating: 0, count: 8)) }

    /// A lost peer goes once it has been lost for the timeout with no handshake in it, as the
    /// Go agent removes it; one whose handshake is recent stays until that is as old; one that
    /// comes back (NODE) stays. Checked on each response, on an injected clock.
    @Test func aLostPeerIsRemovedAfterTheTimeoutWithoutAHandshake() {
        var state = CoordinationState()
        let start = ContinuousClock.now
        let timeout = CoordinationState.lostTimeout
        _ = state.apply(Self.response(Self.update(1, kind: .node, key: 1), Self.update(2, kind: .node, key: 2), Self.update(3, kind: .node, key: 3)), now: start)
        _ = state.apply(Self.response(Self.update(1, kind: .lost), Self.update(2, kind: .lost), Self.update(3, kind: .lost)), now: start)
        _ = state.apply(Self.response(Self.update(3, kind: .node, key: 3)), now: start + .seconds(60))
        let handshakes: ([UInt8]) -> Duration? = { key in key.first == 2 ? .seconds(120) : nil }
        let early = state.apply(Self.response(), now: start + timeout - .seconds(1), sinceHandshake: handshakes)
        #expect(early.changes.isEmpty && state.peers.count == 3)
        let due = state.apply(Self.response(), now: start + timeout, sinceHandshake: handshakes)
        #expect(due.changes == [.remove(id: [UInt8](repeating: 1, count: 16), nodeKey: [UInt8](repeating: 1, count: 32))])
        // Peer 2 shook hands 2 minutes before: looked at again 13 minutes later.
        #expect(state.apply(Self.response(), now: start + timeout + .seconds(779), sinceHandshake: { _ in nil }).changes.isEmpty)
        let later = state.apply(Self.response(), now: start + timeout + .seconds(780), sinceHandshake: { _ in nil })
        #expect(later.changes == [.remove(id: [UInt8](repeating: 2, count: 16), nodeKey: [UInt8](repeating: 2, count: 32))])
        #expect(state.peers.keys.map { $0 } == [[UInt8](repeating: 3, count: 16)], "the peer that came back stays")
        // A dropped stream marks the rest lost, on the same clock.
        state.streamEnded(now: start + .seconds(7200))
        #expect(state.apply(Self.response(), now: start + .seconds(7200) + timeout).changes.count == 1)
        #expect(state.peers.isEmpty)
    }

    /// A full table of peers that were all lost still takes a new peer: the one lost longest
    /// makes room. (A table full of live peers refuses, as before.)
    @Test func aFullTableMakesRoomByTheLongestLostPeer() {
        var state = CoordinationState()
        let start = ContinuousClock.now
        var response = Coder_Tailnet_V2_CoordinateResponse()
        for i in 0..<CoordinationState.maxPeers {
            var update = Self.update(0, kind: .node, key: UInt8(i % 200))
            update.id = Self.id(i)
            response.peerUpdates.append(update)
        }
        _ = state.apply(response, now: start)
        for i in 0..<CoordinationState.maxPeers {
            var lost = Self.update(0, kind: .lost)
            lost.id = Self.id(i)
            _ = state.apply(Self.response(lost), now: start + .milliseconds(i))
        }
        var newcomer = Self.update(0, kind: .node, key: 250)
        newcomer.id = Self.id(5000)
        let outcome = state.apply(Self.response(newcomer), now: start + .seconds(2))
        #expect(outcome.overflow == 0)
        #expect(state.peers.count == CoordinationState.maxPeers)
        #expect(state.peers[Array(Self.id(0))] == nil, "the peer lost first made room")
        #expect(state.peers[Array(Self.id(5000))]?.lost == false)
    }

    /// Two ids with one node key: removing one keeps the key's WireGuard peer, as the other
    /// holds it (its node is applied again); removing both removes it.
    @Test func aKeyHeldByTwoIdsStaysUntilNeitherHoldsIt() {
        var state = CoordinationState()
        _ = state.apply(Self.response(Self.update(1, kind: .node, key: 7), Self.update(2, kind: .node, key: 7)))
        let first = state.apply(Self.response(Self.update(2, kind: .disconnected)))
        guard case .upsert(let node) = first.changes.first, first.changes.count == 1 else {
            Issue.record("\(first.changes)")
            return
        }
        #expect(node.id == [UInt8](repeating: 1, count: 16))
        let second = state.apply(Self.response(Self.update(1, kind: .disconnected)))
        #expect(second.changes == [.remove(id: [UInt8](repeating: 1, count: 16), nodeKey: [UInt8](repeating: 7, count: 32))])
    }

    @Test func requestsHaveTheirShapes() {
        #expect(CoordinationState.disconnect.hasDisconnect)
        var node = Coder_Tailnet_V2_Node()
        node.preferredDerp = 7
        #expect(CoordinationState.updateSelf(node).updateSelf.node.preferredDerp == 7)
    }
}
