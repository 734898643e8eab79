import AgentProto
import Foundation
import SwiftProtobuf
import Testing

/// The Agent API v2.10 context-state messages: field numbers and exact bytes, so a
/// control plane built from the reference's schema reads what the agent sends.
struct ContextStateWireTests {
    /// version 1, aggregate_hash 2, initial 4, snapshot_error 6 (5 is reserved).
    @Test func requestScalarsGoldenBytes() throws {
        var request = Coder_Agent_V2_PushContextStateRequest()
        request.version = 1
        request.aggregateHash = Data([0xAB])
        request.initial = true
        request.snapshotError = "e"
        let bytes: [UInt8] = try request.serializedBytes()
        #expect(bytes == [0x08, 0x01, 0x12, 0x01, 0xAB, 0x20, 0x01, 0x32, 0x01, 0x65])
        let decoded = try Coder_Agent_V2_PushContextStateRequest(serializedBytes: bytes)
        #expect(decoded == request)

        var response = Coder_Agent_V2_PushContextStateResponse()
        response.accepted = true
        let responseBytes: [UInt8] = try response.serializedBytes()
        #expect(responseBytes == [0x08, 0x01])
    }

    /// A resource's fields 1-6 and the skill variant at 11; `source_path` has presence, so an
    /// empty one set is still sent.
    @Test func resourceGoldenBytes() throws {
        var skill = Coder_Agent_V2_SkillMetaBody()
        skill.name = "n"
        var resource = Coder_Agent_V2_ContextResource()
        resource.source = "s"
        resource.sourcePath = ""
        resource.contentHash = Data([0x01])
        resource.sizeBytes = 2
        resource.status = .invalid
        resource.error = "x"
        resource.body = .skill(skill)
        var request = Coder_Agent_V2_PushContextStateRequest()
        request.resources = [resource]
        let bytes: [UInt8] = try request.serializedBytes()
        let resourceBytes: [UInt8] = [
            0x0A, 0x01, 0x73,  // source = "s"
            0x12, 0x00,  // source_path = "" (present)
            0x1A, 0x01, 0x01,  // content_hash
            0x20, 0x02,  // size_bytes = 2
            0x28, 0x04,  // status = INVALID
            0x32, 0x01, 0x78,  // error = "x"
            0x5A, 0x03, 0x12, 0x01, 0x6E,  // skill (11) { name (2) = "n" }
        ]
        #expect(bytes == [0x1A, UInt8(resourceBytes.count)] + resourceBytes)
        let decoded = try Coder_Agent_V2_PushContextStateRequest(serializedBytes: bytes)
        #expect(decoded.resources.first?.hasSourcePath == true)
        #expect(decoded.resources.first?.skill.name == "n")
    }

    /// Every body variant's tag, and an empty body still on the wire (the kind is the variant).
    @Test func bodyVariantTags() throws {
        func encoded(_ body: Coder_Agent_V2_ContextResource.OneOf_Body) throws -> [UInt8] {
            var resource = Coder_Agent_V2_ContextResource()
            resource.body = body
            return try resource.serializedBytes()
        }
        var instruction = Coder_Agent_V2_InstructionFileBody()
        instruction.content = Data("hi".utf8)
        #expect(try encoded(.instructionFile(instruction)) == [0x52, 0x04, 0x0A, 0x02, 0x68, 0x69])
        #expect(try encoded(.instructionFile(.init())) == [0x52, 0x00])
        #expect(try encoded(.skill(.init())) == [0x5A, 0x00])
        #expect(try encoded(.mcpConfig(.init())) == [0x62, 0x00])
        var server = Coder_Agent_V2_MCPServerBody()
        server.serverName = "g"
        #expect(try encoded(.mcpServer(server)) == [0x6A, 0x03, 0x0A, 0x01, 0x67])
    }

    /// An MCP tool's input schema is a google.protobuf.Struct at field 3.
    @Test func toolSchemaIsAStruct() throws {
        var tool = Coder_Agent_V2_MCPTool()
        tool.name = "t"
        tool.inputSchema = Google_Protobuf_Struct(fields: ["type": Google_Protobuf_Value(stringValue: "object")])
        let bytes: [UInt8] = try tool.serializedBytes()
        // Struct { fields (1): entry { key (1) = "type", value (2) = Value { string_value (3) } } }
        let value: [UInt8] = [0x1A, 0x06] + Array("object".utf8)
        let entry: [UInt8] = [0x0A, 0x04] + Array("type".utf8) + [0x12, UInt8(value.count)] + value
        let schema: [UInt8] = [0x0A, UInt8(entry.count)] + entry
        #expect(bytes == [0x0A, 0x01, 0x74, 0x1A, UInt8(schema.count)] + schema)
    }

    /// Status names and numbers as the reference's enum.
    @Test func statusNumbers() {
        typealias Status = Coder_Agent_V2_ContextResource.Status
        #expect([Status.unspecified, .ok, .oversize, .unreadable, .invalid, .excluded].map(\.rawValue) == [0, 1, 2, 3, 4, 5])
        #expect(DRPCMethodPath.agent("PushContextState") == "/coder.agent.v2.Agent/PushContextState")
    }
}
