import AgentProto
import DRPC
import FoundationEssentials
import SwiftProtobuf
import Synchronization

/// coderd's tailnet coordinator as the agent sees it, for tests: the agent's side of
/// `/coder.tailnet.v2.Tailnet/Coordinate` and `/StreamDERPMaps`.
/// It records every Node the agent sends (`update_self`), every `ready_for_handshake` ack and
/// `disconnect`, tells each new stream of the peers set with ``setPeer(id:node:)`` (NODE,
/// reason `add tunnel`) and every stream of later changes (NODE / DISCONNECTED), and streams
/// the DERP map: at once, then on each ``setDERPMap(_:)``.
///
/// Transport-agnostic: the dRPC handlers of ``ControlPlaneDouble`` call ``coordinate(requests:respond:)``
/// and ``streamDERPMaps(respond:)`` with decoded message bytes.
public final class TailnetCoordinatorDouble: Sendable {
    public struct Recorded: Sendable {
        public var nodes: [Coder_Tailnet_V2_Node] = []
        /// Peer ids acked with `ready_for_handshake`, in order, repeats included.
        public var acks: [[UInt8]] = []
        public var disconnects = 0
        public var coordinateStreams = 0
        public var derpMapStreams = 0
        /// Requests that were neither update_self, ready_for_handshake nor disconnect.
        public var other: [Coder_Tailnet_V2_CoordinateRequest] = []
    }

    public let recorded = Mutex(Recorded())

    private struct State: Sendable {
        var peers: [[UInt8]: Coder_Tailnet_V2_Node] = [:]
        var map = Coder_Tailnet_V2_DERPMap()
        var nextStream = 0
        var coordinateStreams: [Int: AsyncStream<Coder_Tailnet_V2_CoordinateResponse>.Continuation] = [:]
        var mapStreams: [Int: AsyncStream<Coder_Tailnet_V2_DERPMap>.Continuation] = [:]
    }

    private let state = Mutex(State())

    public init(derpMap: Coder_Tailnet_V2_DERPMap = .init()) {
        state.withLock { $0.map = derpMap }
    }

    /// The agent's latest Node, if it sent one.
    public var agentNode: Coder_Tailnet_V2_Node? { recorded.withLock { $0.nodes.last } }

    /// Adds or replaces a peer (NODE to every open stream), or removes it with `node == nil`
    /// (DISCONNECTED, reason `graceful disconnect`).
    public func setPeer(id: [UInt8], node: Coder_Tailnet_V2_Node?) {
        var update = Coder_Tailnet_V2_CoordinateResponse.PeerUpdate()
        update.id = Data(id)
        if let node {
            update.kind = .node
            update.node = node
            update.reason = "add tunnel"
        } else {
            update.kind = .disconnected
            update.reason = "graceful disconnect"
        }
        var response = Coder_Tailnet_V2_CoordinateResponse()
        response.peerUpdates = [update]
        let streams = state.withLock { s in
            s.peers[id] = node
            return Array(s.coordinateStreams.values)
        }
        for stream in streams { stream.yield(response) }
    }

    /// Sends a response as it is (an `error`, a LOST update, anything malformed) to every open stream.
    public func send(_ response: Coder_Tailnet_V2_CoordinateResponse) {
        for stream in state.withLock({ Array($0.coordinateStreams.values) }) { stream.yield(response) }
    }

    /// Replaces the DERP map and streams it to every open StreamDERPMaps.
    public func setDERPMap(_ map: Coder_Tailnet_V2_DERPMap) {
        let streams = state.withLock { s in
            s.map = map
            return Array(s.mapStreams.values)
        }
        for stream in streams { stream.yield(map) }
    }

    /// Ends every open stream (the agent sees the stream end, as when coderd restarts).
    public func endStreams() {
        let (coordinate, maps) = state.withLock { s in
            defer { s.coordinateStreams = [:]; s.mapStreams = [:] }
            return (Array(s.coordinateStreams.values), Array(s.mapStreams.values))
        }
        for stream in coordinate { stream.finish() }
        for stream in maps { stream.finish() }
    }

    /// Serves one Coordinate stream until the agent's requests end (after `disconnect`, the
    /// stream is closed by the server as coderd does) or ``endStreams()``.
    public func coordinate<Requests: AsyncSequence & Sendable>(
        requests: Requests, respond: @escaping @Sendable ([UInt8]) async throws -> Void
    ) async throws where Requests.Element == [UInt8] {
        // Bounded as coderd's per-peer response buffer (512).
        let (responses, continuation) = AsyncStream.makeStream(
            of: Coder_Tailnet_V2_CoordinateResponse.self,
            bufferingPolicy: .bufferingOldest(512))
        let (id, peers) = state.withLock { s in
            s.nextStream += 1
            s.coordinateStreams[s.nextStream] = continuation
            return (s.nextStream, s.peers)
        }
        recorded.withLock { $0.coordinateStreams += 1 }
        defer { _ = state.withLock { $0.coordinateStreams.removeValue(forKey: id) } }
        if !peers.isEmpty {
            var response = Coder_Tailnet_V2_CoordinateResponse()
            response.peerUpdates = peers.map { id, node in
                var update = Coder_Tailnet_V2_CoordinateResponse.PeerUpdate()
                update.id = Data(id)
                update.kind = .node
                update.node = node
                update.reason = "add tunnel"
                return update
            }
            continuation.yield(response)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await response in responses {
                    try await respond(try response.serializedBytes())
                }
            }
            group.addTask {
                defer { continuation.finish() }
                for try await bytes in requests {
                    let request = try Coder_Tailnet_V2_CoordinateRequest(serializedBytes: bytes)
                    var handled = false
                    self.recorded.withLock { r in
                        if request.hasUpdateSelf { r.nodes.append(request.updateSelf.node); handled = true }
                        if !request.readyForHandshake.isEmpty {
                            r.acks.append(contentsOf: request.readyForHandshake.map { Array($0.id) })
                            handled = true
                        }
                        if request.hasDisconnect { r.disconnects += 1; handled = true }
                        if !handled { r.other.append(request) }
                    }
                    if request.hasDisconnect { return }
                }
            }
            // Either side ending ends the stream: the agent's disconnect (or its requests
            // ending), or endStreams() finishing the responses.
            try await group.next()
            group.cancelAll()
        }
    }

    /// Serves one StreamDERPMaps stream: the map at once, then each change, until ``endStreams()``.
    public func streamDERPMaps(respond: @escaping @Sendable ([UInt8]) async throws -> Void) async throws {
        let (maps, continuation) = AsyncStream.makeStream(
            of: Coder_Tailnet_V2_DERPMap.self,
            bufferingPolicy: .bufferingNewest(4))
        let id = state.withLock { s in
            s.nextStream += 1
            s.mapStreams[s.nextStream] = continuation
            continuation.yield(s.map)
            return s.nextStream
        }
        recorded.withLock { $0.derpMapStreams += 1 }
        defer { _ = state.withLock { $0.mapStreams.removeValue(forKey: id) } }
        for await map in maps {
            try await respond(try map.serializedBytes())
        }
    }
}

extension TailnetCoordinatorDouble {
    /// Serves `/coder.tailnet.v2.Tailnet/Coordinate` and `/StreamDERPMaps` on `double`'s
    /// connections made from now on.
    public func install(on double: ControlPlaneDouble) {
        double.handleStream("/coder.tailnet.v2.Tailnet/Coordinate") { call in
            let requests = AsyncThrowingStream<[UInt8], any Error> {
                try await call.receive()
            }
            try await self.coordinate(requests: requests) { bytes in try await call.send(bytes) }
        }
        double.handleServerStream("/coder.tailnet.v2.Tailnet/StreamDERPMaps") { _, call in
            try await self.streamDERPMaps { bytes in try await call.send(bytes) }
        }
    }
}

extension TailnetCoordinatorDouble {
    /// The DERP map tests and benchmarks give the agent: region 1 (`test`) with one node, a
    /// relay on 127.0.0.1:`relayPort` over plain HTTP (as coder's `tailnettest` does, IPv6 off).
    public static func loopbackDERPMap(relayPort: Int) -> Coder_Tailnet_V2_DERPMap {
        var node = Coder_Tailnet_V2_DERPMap.Region.Node()
        node.name = "t2"
        node.regionID = 1
        node.hostName = "127.0.0.1"
        node.ipv4 = "127.0.0.1"
        node.ipv6 = "none"
        node.derpPort = Int32(relayPort)
        node.forceHTTP = true
        node.stunPort = -1
        var region = Coder_Tailnet_V2_DERPMap.Region()
        region.regionID = 1
        region.regionCode = "test"
        region.regionName = "Test"
        region.nodes = [node]
        var map = Coder_Tailnet_V2_DERPMap()
        map.regions[1] = region
        return map
    }
}
