import AgentCore
import AgentProto
import Logging
import SwiftProtobuf

/// The tailnet's work on each upward session: `StreamDERPMaps` (every map applied, rewritten)
/// and `Coordinate` (the agent's node up, peers down), both reopened on every new session
/// with the same keys (../shared/spec/tailnet.md §2).
struct TailnetParticipant: UpwardParticipant {
    static let coordinateRPC = "/coder.tailnet.v2.Tailnet/Coordinate"
    static let derpMapsRPC = "/coder.tailnet.v2.Tailnet/StreamDERPMaps"

    let runtime: TailnetRuntime

    var name: String { "tailnet coordination" }

    func run(on session: any UpwardSession) async throws {
        guard let engine = try runtime.engineForCurrentManifest() else { return }
        _ = engine
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let request: [UInt8] = try Coder_Tailnet_V2_StreamDERPMapsRequest().serializedBytes()
                let maps = try await session.serverStream(Self.derpMapsRPC, request: request)
                try await runtime.follower.follow(maps)
            }
            group.addTask {
                let stream = try await session.bidiStream(Self.coordinateRPC)
                try await runtime.coordination.run(responses: stream.messages) { bytes in try await stream.send(bytes) }
                // The server closed the stream (after our disconnect, or its own end):
                // half-close ours too.
                try? await stream.closeSend()
            }
            // Either stream ending ends this session's work (the session reconnects both).
            try await group.next()
            group.cancelAll()
        }
    }
}
