import AgentCore
import AgentProto
import AgentRPC
import SwiftProtobuf

/// Protobuf decoding of every message the agent reads from outside (control plane, agent
/// socket clients, boundary, the tailnet's coordination): the first byte picks the type. A
/// message that decodes re-encodes (in deterministic order) to the same bytes twice. A manifest becomes the
/// variables processes get: `CODER=true` always, and `$` expansion gives the same result
/// on its ASCII fast path as on the character walk.
public func fuzzAgentProto(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let pick = Int(input.byte())
    let bytes = input.rest()
    if pick == 255 {
        expansion(bytes)
        return 0
    }
    let type = messageTypes[pick % messageTypes.count]
    roundTrip(type, bytes)
    return 0
}

private let messageTypes: [any SwiftProtobuf.Message.Type] = [
    Coder_Agent_V2_WorkspaceApp.self, Coder_Agent_V2_WorkspaceAgentScript.self, Coder_Agent_V2_WorkspaceAgentMetadata.self,
    Coder_Agent_V2_WorkspaceAgentDevcontainer.self, Coder_Agent_V2_WorkspaceSecret.self, Coder_Agent_V2_Manifest.self,
    Coder_Agent_V2_GetManifestRequest.self, Coder_Agent_V2_Lifecycle.self, Coder_Agent_V2_UpdateLifecycleRequest.self,
    Coder_Agent_V2_Startup.self, Coder_Agent_V2_UpdateStartupRequest.self, Coder_Agent_V2_Log.self,
    Coder_Agent_V2_BatchCreateLogsRequest.self, Coder_Agent_V2_BatchCreateLogsResponse.self, Coder_Agent_V2_BoundaryLog.self,
    Coder_Agent_V2_ReportBoundaryLogsRequest.self, Coder_Agent_V2_ReportBoundaryLogsResponse.self,
    Coder_Agent_V2_UpdateAppStatusRequest.self, Coder_Agent_V2_UpdateAppStatusResponse.self,
    Coder_Agentsocket_V1_PingRequest.self, Coder_Agentsocket_V1_PingResponse.self, Coder_Agentsocket_V1_SyncStartRequest.self,
    Coder_Agentsocket_V1_SyncStartResponse.self, Coder_Agentsocket_V1_SyncWantRequest.self, Coder_Agentsocket_V1_SyncWantResponse.self,
    Coder_Agentsocket_V1_SyncCompleteRequest.self, Coder_Agentsocket_V1_SyncCompleteResponse.self,
    Coder_Agentsocket_V1_SyncReadyRequest.self, Coder_Agentsocket_V1_SyncReadyResponse.self,
    Coder_Agentsocket_V1_SyncStatusRequest.self, Coder_Agentsocket_V1_DependencyInfo.self,
    Coder_Agentsocket_V1_SyncStatusResponse.self, Coder_Agentsocket_V1_SyncListRequest.self, Coder_Agentsocket_V1_UnitInfo.self,
    Coder_Agentsocket_V1_SyncListResponse.self, Coder_Boundarylogproxy_Codec_V1_BoundaryMessage.self,
    Coder_Boundarylogproxy_Codec_V1_BoundaryStatus.self,
    // The tailnet's (coordination and DERP maps, from the control plane).
    Coder_Tailnet_V2_DERPMap.self, Coder_Tailnet_V2_Node.self, Coder_Tailnet_V2_CoordinateRequest.self,
    Coder_Tailnet_V2_CoordinateResponse.self, Coder_Tailnet_V2_StreamDERPMapsRequest.self,
]

private func roundTrip<M: SwiftProtobuf.Message>(_ type: M.Type, _ bytes: [UInt8]) {
    guard let message = try? M(serializedBytes: bytes) else { return }
    // Map fields (a manifest's variables) are written in dictionary order unless asked for
    // a deterministic one.
    var options = BinaryEncodingOptions()
    options.useDeterministicOrdering = true
    guard let encoded: [UInt8] = try? message.serializedBytes(options: options) else {
        require(false, "\(M.self) decoded but does not encode")
        return
    }
    guard let again = try? M(serializedBytes: encoded) else {
        require(false, "\(M.self) does not decode its own encoding")
        return
    }
    // Equality of the messages is checked through their deterministic encodings: a DERP map's
    // and a Node's double fields (region scores, latencies) may be NaN, which equals nothing.
    let twice: [UInt8]? = try? again.serializedBytes(options: options)
    require(twice == encoded, "\(M.self) encodes differently the second time")
    if let manifest = message as? Coder_Agent_V2_Manifest {
        let result = ControlPlaneSession.agentManifest(from: manifest, environment: ["HOME": "/home/coder", "PATH": "/bin"])
        require(result.environment["CODER"] == "true", "CODER is not true")
        // The secrets as the control plane may send them: a variable never holds NUL or "=",
        // and a path resolves to a clean absolute one or is refused.
        for (name, value) in result.commandSecrets.variables {
            require(!name.contains("=") && !name.utf8.contains(0) && !value.utf8.contains(0), "an unrepresentable secret variable")
        }
        for secret in manifest.secrets {
            if case .path(let path, _) = ManifestSecrets.resolve(secret.filePath, home: "/home/coder") {
                require(path.hasPrefix("/") && !path.split(separator: "/").contains(".."), "an unclean secret path")
            }
        }
    }
}

/// `$NAME`, `${NAME}` and `~` expansion: ASCII text takes a byte-level fast path, anything
/// else a character walk; appending a non-ASCII character that is neither a letter nor a
/// digit (so it ends any name) must only append it to the result.
private func expansion(_ bytes: [UInt8]) {
    let text = String(decoding: bytes.filter { $0 < 0x80 }, as: UTF8.self)
    let environment = ["HOME": "/home/coder", "A": "x", "B_1": "$A", "EMPTY": ""]
    let overrides = ["A": "y", "Z": "${A}"]
    let fast = ControlPlaneSession.expand(text, environment: environment, overrides: overrides)
    guard text != "~" else { return }
    let walked = ControlPlaneSession.expand(text + "\u{B7}", environment: environment, overrides: overrides)
    require(walked == fast + "\u{B7}", "the fast path and the character walk differ")
    if !text.contains("$"), text != "~", !text.hasPrefix("~/") { require(fast == text, "text without $ or ~ changed") }
}
