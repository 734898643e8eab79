/// What other modules (the agent socket) may do with the chat context: read and change the
/// user sources, read the current snapshot, and ask for a new resolve. The chat context
/// module's manager conforms; the socket gets it from the executable, so neither module
/// imports the other.
public protocol ContextControl: Sendable {
    /// The user sources' lexical paths, in the order added.
    var sources: [String] { get }

    /// The registered source with `path`'s lexical form. Throws ``ContextControlError/notFound(_:)``
    /// when none is, ``ContextControlError/invalid(_:)`` when `path` has no lexical form.
    func registeredSource(_ path: String) throws(ContextControlError) -> String

    /// Adds a source (nothing changes when it is already there) and asks for a resolve;
    /// returns its lexical path.
    func registerSource(_ path: String) throws(ContextControlError) -> String

    /// Removes a registered source and asks for a resolve.
    func unregisterSource(_ path: String) throws(ContextControlError)

    /// The latest snapshot, without a new resolve (version 0 and empty before the first).
    var snapshot: ContextSnapshot { get }

    /// The snapshot of a resolve that starts after this call (the version-0 empty one
    /// before the readiness gate opens).
    func resyncSnapshot() async throws(ContextControlError) -> ContextSnapshot
}

/// Why a ``ContextControl`` operation failed; each case carries the text a caller shows.
public enum ContextControlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path cannot be a source (`canonicalize: path "x" is not absolute`, `path "x" is
    /// not inside any allowed root`, the source cap, ...).
    case invalid(String)
    /// No source is registered under this lexical path.
    case notFound(String)
    /// The manager cannot answer (`agentcontext: manager closed`, `context canceled`).
    case unavailable(String)

    public var description: String {
        switch self {
        case .invalid(let text), .unavailable(let text): text
        case .notFound: "source not found"
        }
    }
}
