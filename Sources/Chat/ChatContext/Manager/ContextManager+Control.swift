import AgentCore

/// The manager as the agent socket reaches it: ``sources`` and ``snapshot`` as they are,
/// the source operations and resync with ``ContextControlError``'s texts.
extension ContextManager: ContextControl {
    public func registeredSource(_ path: String) throws(ContextControlError) -> String {
        do { return try source(path) } catch { throw Self.control(error) }
    }

    public func registerSource(_ path: String) throws(ContextControlError) -> String {
        do { return try addSource(path) } catch { throw Self.control(error) }
    }

    public func unregisterSource(_ path: String) throws(ContextControlError) {
        do { try removeSource(path) } catch { throw Self.control(error) }
    }

    public func resyncSnapshot() async throws(ContextControlError) -> ContextSnapshot {
        do {
            return try await resync()
        } catch is CancellationError {
            throw .unavailable("context canceled")
        } catch {
            throw .unavailable("\(error)")
        }
    }

    static func control(_ error: SourceError) -> ContextControlError {
        switch error {
        case .invalid(let text): .invalid(text)
        case .notFound(let path): .notFound(path)
        case .tooMany: .invalid("more than \(maxSources) context sources")
        }
    }
}
