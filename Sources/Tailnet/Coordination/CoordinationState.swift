import AgentProto
import FoundationEssentials

/// The agent's side of `Coordinate` as a pure state machine (time passed in):
/// it applies each response's peer updates (NODE adds or replaces, DISCONNECTED removes, LOST
/// keeps) and says which `ready_for_handshake` acks to send — one for every NODE update,
/// repeats and refused nodes included, as the Go agent does. The owner turns the changes into
/// WireGuard peers and sends the acks; it survives a dropped stream (peers are kept, marked
/// lost, and refreshed by the next stream's NODE updates).
///
/// A lost peer is removed once it has been lost for ``lostTimeout`` with no WireGuard
/// handshake in that time, as the Go agent's `peerLostTimeout` removes it (checked on each
/// response); when the table is full, the peer lost longest makes room for a new one. Two ids
/// with one node key keep the key's WireGuard peer until neither holds it.
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

    /// How long a lost peer is kept without a handshake (the Go agent's `lostTimeout`).
    public static let lostTimeout: Duration = .seconds(15 * 60)

    /// The peers by id, with whether the stream that told of them was lost.
    public private(set) var peers: [[UInt8]: (node: PeerNode, lost: Bool)] = [:]
    /// When each lost peer is looked at again (lost plus ``lostTimeout``, or its last
    /// handshake plus that); one entry per lost peer.
    private var lostDeadlines: [[UInt8]: ContinuousClock.Instant] = [:]

    public init() {}

    /// Applies one response at `now`; `sinceHandshake` says how long ago a node key's last
    /// WireGuard handshake was (nil: never), for the lost peers due then.
    public mutating func apply(
        _ response: Coder_Tailnet_V2_CoordinateResponse, now: ContinuousClock.Instant = .now,
        sinceHandshake: ([UInt8]) -> Duration? = { _ in nil }
    ) -> Outcome {
        var outcome = Outcome()
        outcome.changes = expireLost(now: now, sinceHandshake: sinceHandshake)
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
                        guard let oldest = lostDeadlines.min(by: { $0.value < $1.value })?.key else {
                            outcome.overflow += 1
                            continue
                        }
                        outcome.changes += remove(oldest)
                    }
                    if let old = peers[id], old.node.nodeKey != node.nodeKey {
                        outcome.changes += remove(id)
                    }
                    peers[id] = (node, false)
                    lostDeadlines[id] = nil
                    outcome.changes.append(.upsert(node))
                } catch {
                    outcome.refused.append((id, error))
                }
            case .disconnected:
                outcome.changes += remove(Array(update.id))
            case .lost:
                let id = Array(update.id)
                if peers[id]?.lost == false {
                    peers[id]?.lost = true
                    lostDeadlines[id] = now + Self.lostTimeout
                }
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
    public mutating func streamEnded(now: ContinuousClock.Instant = .now) {
        for (id, peer) in peers where !peer.lost {
            peers[id]?.lost = true
            lostDeadlines[id] = now + Self.lostTimeout
        }
    }

    /// Removes the lost peers due at `now` that had no handshake within ``lostTimeout``; one
    /// that had is looked at again that long after it.
    mutating func expireLost(now: ContinuousClock.Instant, sinceHandshake: ([UInt8]) -> Duration?) -> [Change] {
        var changes: [Change] = []
        for (id, deadline) in lostDeadlines where deadline <= now {
            guard let peer = peers[id] else { continue }
            if let since = sinceHandshake(peer.node.nodeKey), since < Self.lostTimeout {
                lostDeadlines[id] = now + (Self.lostTimeout - since)
            } else {
                changes += remove(id)
            }
        }
        return changes
    }

    /// Forgets peer `id`: its key's WireGuard peer goes, unless another id still holds the
    /// key (that one's node is applied again instead).
    private mutating func remove(_ id: [UInt8]) -> [Change] {
        lostDeadlines[id] = nil
        guard let old = peers.removeValue(forKey: id) else { return [] }
        if let other = peers.values.first(where: { $0.node.nodeKey == old.node.nodeKey }) {
            return [.upsert(other.node)]
        }
        return [.remove(id: id, nodeKey: old.node.nodeKey)]
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
