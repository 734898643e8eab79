import AgentCore
import AgentProto
import Logging
import SwiftProtobuf

/// The tailnet's work on each upward session: `StreamDERPMaps` (every map applied, rewritten)
/// and `Coordinate` (the agent's node up, peers down), both reopened on every new session
/// with the same keys.
struct TailnetParticipant: UpwardParticipant {
    static let coordinateRPC = "/coder.tailnet.v2.Tailnet/Coordinate"
    static let derpMapsRPC = "/coder.tailnet.v2.Tailnet/StreamDERPMaps"

    let runtime: TailnetRuntime

    var name: String { "tailnet coordination" }

    func run(on session: any UpwardSession) async throws {
        guard let engine = try runtime.engineForCurrentManifest() else { return }
        _ = engine
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The DERP maps: a stream that ends (or fails) leaves the map in use and the
            // coordination running.
            group.addTask {
                do {
                    let request: [UInt8] = try Coder_Tailnet_V2_StreamDERPMapsRequest().serializedBytes()
                    let maps = try await session.serverStream(Self.derpMapsRPC, request: request)
                    try await runtime.follower.follow(maps)
                } catch {
                    runtime.logger.debug("DERP map stream ended", metadata: ["error": "\(error)"])
                }
            }
            // The coordination: when it ends (the server closed it after our disconnect, or
            // on its own), this session's work ends; the next session opens both again.
            let stream = try await session.bidiStream(Self.coordinateRPC)
            defer { group.cancelAll() }
            try await runtime.coordination.run(responses: stream.messages) { bytes in try await stream.send(bytes) }
            try? await stream.closeSend()
        }
    }
}
