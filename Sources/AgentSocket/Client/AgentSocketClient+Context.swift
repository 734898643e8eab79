import AgentProto

/// The chat context calls (what `exp chat context` uses).
extension AgentSocketClient {
    /// The user sources' paths, in the order added.
    public func contextSources() async throws(Failure) -> [String] {
        try await unary(
            "ContextSources", Coder_Agentsocket_V1_ContextSourcesRequest(), as: Coder_Agentsocket_V1_ContextSourcesResponse.self
        ).sources.map(\.path)
    }

    /// The registered source with `path`'s lexical form.
    public func contextSource(_ path: String) async throws(Failure) -> String {
        var request = Coder_Agentsocket_V1_GetContextSourceRequest()
        request.path = path
        return try await unary("GetContextSource", request, as: Coder_Agentsocket_V1_GetContextSourceResponse.self).source.path
    }

    /// Registers `path`; returns its lexical form.
    public func addContextSource(_ path: String) async throws(Failure) -> String {
        var request = Coder_Agentsocket_V1_AddContextSourceRequest()
        request.path = path
        return try await unary("AddContextSource", request, as: Coder_Agentsocket_V1_AddContextSourceResponse.self).source.path
    }

    public func removeContextSource(_ path: String) async throws(Failure) {
        var request = Coder_Agentsocket_V1_RemoveContextSourceRequest()
        request.path = path
        _ = try await unary("RemoveContextSource", request, as: Coder_Agentsocket_V1_RemoveContextSourceResponse.self)
    }

    /// The current snapshot, without a new resolve.
    public func contextSnapshot() async throws(Failure) -> Coder_Agentsocket_V1_ContextSnapshot {
        try await unary(
            "GetContextSnapshot", Coder_Agentsocket_V1_ContextSnapshotRequest(), as: Coder_Agentsocket_V1_ContextSnapshotResponse.self
        ).snapshot
    }

    /// The snapshot of a resolve that began after the call.
    public func resyncContext() async throws(Failure) -> Coder_Agentsocket_V1_ContextSnapshot {
        try await unary(
            "ResyncContext", Coder_Agentsocket_V1_ResyncContextRequest(), as: Coder_Agentsocket_V1_ResyncContextResponse.self
        ).snapshot
    }
}
