import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Logging
import Synchronization
import SwiftProtobuf
import Testing

/// PushContextState through the real upward session (WebSocket, yamux, dRPC) to the double,
/// which keeps and validates what it receives as coderd does.
@Suite(.timeLimit(.minutes(3)))
struct ContextStatePushTests {
    static let method = DRPCMethodPath.agent("PushContextState")

    static func resource(_ source: String, status: Coder_Agent_V2_ContextResource.Status = .ok) -> Coder_Agent_V2_ContextResource {
        var resource = Coder_Agent_V2_ContextResource()
        resource.source = source
        resource.contentHash = Data(repeating: 7, count: 32)
        resource.sizeBytes = 5
        resource.status = status
        var body = Coder_Agent_V2_InstructionFileBody()
        body.content = Data("hello".utf8)
        resource.body = .instructionFile(body)
        return resource
    }

    static func push(version: UInt64, initial: Bool, _ resources: [Coder_Agent_V2_ContextResource]) throws -> [UInt8] {
        var request = Coder_Agent_V2_PushContextStateRequest()
        request.version = version
        request.initial = initial
        request.aggregateHash = Data(repeating: 1, count: 32)
        request.resources = resources
        return try request.serializedBytes()
    }

    /// What each call answered: "accepted", "stale", or the error.
    static func outcome(_ session: any UpwardSession, _ request: [UInt8]) async -> String {
        do {
            let bytes = try await session.unary(method, request: request)
            return try Coder_Agent_V2_PushContextStateResponse(serializedBytes: bytes).accepted ? "accepted" : "stale"
        } catch let error as UpwardStreamError {
            switch error.kind {
            case .remote(_, let message): return message
            case .unsupported: return "unsupported"
            default: return "\(error)"
            }
        } catch {
            return "\(error)"
        }
    }

    @Test func pushesAreRecordedValidatedAndVersioned() async throws {
        let double = ControlPlaneDouble()
        let outcomes = Mutex<[String]>([])
        let done = TestFlag()
        let pusher = ClosureParticipant(name: "context") { session in
            let first = try Self.push(version: 3, initial: true, [Self.resource("/w/AGENTS.md")])
            let replay = try Self.push(version: 3, initial: false, [Self.resource("/w/AGENTS.md")])
            let newer = try Self.push(version: 4, initial: false, [Self.resource("/w/AGENTS.md"), Self.resource("/w/CLAUDE.md", status: .invalid)])
            let duplicate = try Self.push(version: 5, initial: false, [Self.resource("/w/a"), Self.resource("/w/a")])
            var noBody = Self.resource("/w/b")
            noBody.body = nil
            let bodiless = try Self.push(version: 6, initial: false, [noBody])
            var long = Self.resource("/w/c", status: .unreadable)
            long.error = String(repeating: "e", count: 4097)
            let longError = try Self.push(version: 7, initial: false, [long])
            var results: [String] = []
            for request in [first, replay, newer, duplicate, bodiless, longError] {
                results.append(await Self.outcome(session, request))
            }
            double.contextState.withLock { $0.unimplemented = true }
            results.append(await Self.outcome(session, first))
            outcomes.withLock { $0 = results }
            done.set()
        }
        try await double.run { url in
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.shutdownDeadline = .seconds(30)
            let session = ControlPlaneSession(
                configuration: configuration,
                dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: UpwardParticipantTests.quiet),
                logger: UpwardParticipantTests.quiet, participants: UpwardParticipants([pusher]))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: UpwardParticipantTests.patience) { done.isSet })
            session.beginShutdown()
            try await running.value
        }
        #expect(
            outcomes.withLock { $0 } == [
                "accepted", "stale", "accepted",
                "agentapi: PushContextState duplicate source \"/w/a\"",
                "resource \"/w/b\": missing body variant; status OK requires a typed body",
                "resource \"/w/c\": error is 4097 bytes, exceeds 4096 byte cap",
                "unsupported",
            ])
        let state = double.contextState.withLock { $0 }
        #expect(state.pushes.map(\.version) == [3, 3, 4])
        #expect(state.stored?.version == 4)
        #expect(state.stored?.resources.map(\.source) == ["/w/AGENTS.md", "/w/CLAUDE.md"])
        #expect(state.stored?.resources.first?.instructionFile.content == Data("hello".utf8))
        #expect(state.rejections.count == 3)
    }
}
