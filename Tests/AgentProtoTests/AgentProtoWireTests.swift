import AgentProto
import Foundation
import SwiftProtobuf
import Testing

/// Field numbers and wire bytes of the generated messages.
struct AgentProtoWireTests {
    @Test func updateLifecycleGoldenBytes() throws {
        var request = Coder_Agent_V2_UpdateLifecycleRequest()
        request.lifecycle.state = .ready
        request.lifecycle.changedAt = Google_Protobuf_Timestamp(seconds: 1_700_000_000)
        let bytes: [UInt8] = try request.serializedBytes()
        #expect(bytes == [0x0A, 0x0A, 0x08, 0x05, 0x12, 0x06, 0x08, 0x80, 0xE2, 0xCF, 0xAA, 0x06])
        let decoded = try Coder_Agent_V2_UpdateLifecycleRequest(serializedBytes: bytes)
        #expect(decoded.lifecycle.state == .ready)
    }

    @Test func unknownManifestFieldsSurviveARoundTrip() throws {
        var manifest = Coder_Agent_V2_Manifest()
        manifest.directory = "/home/coder"
        manifest.environmentVariables = ["A": "1"]
        var bytes: [UInt8] = try manifest.serializedBytes()
        // A future field 99, not modelled here.
        bytes += [0x9A, 0x06, 0x01, 0x7F]
        let decoded = try Coder_Agent_V2_Manifest(serializedBytes: bytes)
        #expect(decoded.directory == "/home/coder")
        let again: [UInt8] = try decoded.serializedBytes()
        #expect(again.count == bytes.count)
        #expect(Data(again).range(of: Data([0x9A, 0x06, 0x01, 0x7F])) != nil)
    }

    /// derp_map = 9 is a coder.tailnet.v2.DERPMap (tag 0x4A); its regions map is field 2.
    @Test func manifestCarriesTheDERPMap() throws {
        var region = Coder_Tailnet_V2_DERPMap.Region()
        region.regionID = 999
        region.embeddedRelay = true
        var map = Coder_Tailnet_V2_DERPMap()
        map.regions[999] = region
        let mapBytes: [UInt8] = try map.serializedBytes()
        // regions entry: key 1 = 999 (varint E7 07), value 2 = Region{1: 999, 2: true}.
        #expect(mapBytes == [0x12, 0x0A, 0x08, 0xE7, 0x07, 0x12, 0x05, 0x08, 0xE7, 0x07, 0x10, 0x01])
        let bytes: [UInt8] = [0x4A, UInt8(mapBytes.count)] + mapBytes
        let decoded = try Coder_Agent_V2_Manifest(serializedBytes: bytes)
        #expect(decoded.derpMap.regions[999]?.embeddedRelay == true)
    }

    @Test func fieldNumbersOnTheWire() throws {
        var manifest = Coder_Agent_V2_Manifest()
        manifest.agentName = "main"  // 15 -> tag 0x7A
        manifest.ownerUsername = "alice"  // 13 -> tag 0x6A
        manifest.workspaceName = "ws"  // 16 -> tag 0x82 0x01
        let bytes: [UInt8] = try manifest.serializedBytes()
        #expect(bytes.contains(0x7A) && bytes.contains(0x6A))
        #expect(Data(bytes).range(of: Data([0x82, 0x01, 0x02, 0x77, 0x73])) != nil)

        var startup = Coder_Agent_V2_UpdateStartupRequest()
        startup.startup.version = "v0.1.0"
        startup.startup.expandedDirectory = "/w"
        let startupBytes: [UInt8] = try startup.serializedBytes()
        #expect(startupBytes == [0x0A, 0x0C, 0x0A, 0x06] + Array("v0.1.0".utf8) + [0x12, 0x02] + Array("/w".utf8))

        var status = Coder_Agent_V2_UpdateAppStatusRequest()
        status.slug = "app"
        status.state = .failure
        status.message = "m"
        status.uri = "u"
        let statusBytes: [UInt8] = try status.serializedBytes()
        #expect(statusBytes == [0x0A, 0x03] + Array("app".utf8) + [0x10, 0x03, 0x1A, 0x01, 0x6D, 0x22, 0x01, 0x75])

        var logs = Coder_Agent_V2_BatchCreateLogsResponse()
        logs.logLimitExceeded = true
        let limitBytes: [UInt8] = try logs.serializedBytes()
        #expect(limitBytes == [0x08, 0x01])
    }

    @Test func boundaryEnvelopeTags() throws {
        var log = Coder_Agent_V2_BoundaryLog()
        log.allowed = true
        log.httpRequest.method = "GET"
        log.httpRequest.url = "https://example.com"
        log.sequenceNumber = 4
        var request = Coder_Agent_V2_ReportBoundaryLogsRequest()
        request.logs = [log]
        request.sessionID = "s"
        var envelope = Coder_Boundarylogproxy_Codec_V1_BoundaryMessage()
        envelope.logs = request
        let envelopeBytes: [UInt8] = try envelope.serializedBytes()
        #expect(envelopeBytes.first == 0x0A)
        var status = Coder_Boundarylogproxy_Codec_V1_BoundaryMessage()
        status.status.droppedChannelFull = 3
        let statusEnvelope: [UInt8] = try status.serializedBytes()
        #expect(statusEnvelope == [0x12, 0x02, 0x08, 0x03])
        let bare: [UInt8] = try request.serializedBytes()
        #expect(bare.first == 0x0A)
        let decoded = try Coder_Boundarylogproxy_Codec_V1_BoundaryMessage(serializedBytes: envelopeBytes)
        #expect(decoded.logs.logs.first?.sequenceNumber == 4)
    }

    @Test func agentSocketMessages() throws {
        var want = Coder_Agentsocket_V1_SyncWantRequest()
        want.unit = "a"
        want.dependsOn = "b"
        let wantBytes: [UInt8] = try want.serializedBytes()
        #expect(wantBytes == [0x0A, 0x01, 0x61, 0x12, 0x01, 0x62])
        #expect(DRPCMethodPath.agentSocket("SyncWant") == "/coder.agentsocket.v1.AgentSocket/SyncWant")
        #expect(DRPCMethodPath.agent("GetManifest") == "/coder.agent.v2.Agent/GetManifest")
    }

    @Test func garbageNeverTraps() {
        var state: UInt64 = 99
        for _ in 0..<3000 {
            let bytes: [UInt8] = (0..<Int(state % 40)).map { _ in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return UInt8(truncatingIfNeeded: state >> 40)
            }
            _ = try? Coder_Agent_V2_Manifest(serializedBytes: bytes)
            _ = try? Coder_Boundarylogproxy_Codec_V1_BoundaryMessage(serializedBytes: bytes)
        }
    }
}
