import AgentProto
import FoundationEssentials

/// The agent's side of `Coordinate` as a pure state machine:
/// it applies each response's peer updates (NODE adds or replaces, DISCONNECTED removes, LOST
/// keeps) and says which `ready_for_handshake` acks to send — one for every NODE update,
/// repeats and refused nodes included, as the Go agent does. The owner turns the changes into
/// WireGuard peers and sends the acks; it survives a dropped stream (peers are kept, marked
/// lost, and refreshed by the next stream's NODE updates).
public struct CoordinationState: Sendable {
    /// What changed in the peer table because of one response.
    public enum Change: Sendable, Equatable {
        case upsert(PeerNode)
        case remove(id: [UInt8], nodeKey: [UInt8])
    }

    /// The outcome of one response.
    public struct Outcome: Sendable, Equatable {
        public var changes: [Change] = []
        /// The request to send back (`ready_for_handshake` for every NODE update), or nil.
        public var ack: Coder_Tailnet_V2_CoordinateRequest?
        /// Nodes refused (the peer id and why).
        public var refused: [(id: [UInt8], reason: PeerNode.Refusal)] = []
        /// The response's `error`, if any (`ready for handshake error…` is only a warning).
        public var error: String?
        /// Updates dropped because the table is full.
        public var overflow = 0

        public static func == (a: Outcome, b: Outcome) -> Bool {
            a.changes == b.changes && a.ack == b.ack && a.error == b.error && a.overflow == b.overflow
                && a.refused.map(\.id) == b.refused.map(\.id) && a.refused.map(\.reason) == b.refused.map(\.reason)
        }
    }

    /// At most this many peers are kept (coderd replicas and clients with a tunnel to this
    /// agent; the coordinator batches at most 1024 updates per response).
    public static let maxPeers = 1024

    /// The peers by id, with whether the stream that told of them was lost.
    public private(set) var peers: [[UInt8]: (node: PeerNode, lost: Bool)] = [:]

    public init() {}

    /// Applies one response.
    public mutating func apply(_ response: Coder_Tailnet_V2_CoordinateResponse) -> Outcome {
        var outcome = Outcome()
        var acks: [Coder_Tailnet_V2_CoordinateRequest.ReadyForHandshake] = []
        for update in response.peerUpdates {
            switch update.kind {
            case .node:
                var ack = Coder_Tailnet_V2_CoordinateRequest.ReadyForHandshake()
                ack.id = update.id
                acks.append(ack)
                let id = Array(update.id)
                do {
                    let node = try PeerNode(id: id, node: update.node)
                    if peers[id] == nil, peers.count >= Self.maxPeers {
                        outcome.overflow += 1
                        continue
                    }
                    if let old = peers[id], old.node.nodeKey != node.nodeKey {
                        outcome.changes.append(.remove(id: id, nodeKey: old.node.nodeKey))
                    }
                    peers[id] = (node, false)
                    outcome.changes.append(.upsert(node))
                } catch {
                    outcome.refused.append((id, error))
                }
            case .disconnected:
                let id = Array(update.id)
                if let old = peers.removeValue(forKey: id) {
                    outcome.changes.append(.remove(id: id, nodeKey: old.node.nodeKey))
                }
            case .lost:
                let id = Array(update.id)
                peers[id]?.lost = true
            case .readyForHandshake, .unspecified, .UNRECOGNIZED:
                continue
            }
        }
        if !acks.isEmpty {
            var request = Coder_Tailnet_V2_CoordinateRequest()
            request.readyForHandshake = acks
            outcome.ack = request
        }
        if !response.error.isEmpty { outcome.error = response.error }
        return outcome
    }

    /// The stream ended: every peer is kept and marked lost until fresh NODE updates arrive.
    public mutating func streamEnded() {
        for id in peers.keys { peers[id]?.lost = true }
    }

    /// `update_self` with the agent's node.
    public static func updateSelf(_ node: Coder_Tailnet_V2_Node) -> Coder_Tailnet_V2_CoordinateRequest {
        var request = Coder_Tailnet_V2_CoordinateRequest()
        request.updateSelf.node = node
        return request
    }

    /// `disconnect{}`: the graceful end (peers get DISCONNECTED rather than LOST).
    public static var disconnect: Coder_Tailnet_V2_CoordinateRequest {
        var request = Coder_Tailnet_V2_CoordinateRequest()
        request.disconnect = .init()
        return request
    }
}
