import AgentCore

/// `GET /api/v2/workspaceagents/me/external-auth`: the query the SDK sends (Go's
/// `url.Values`, so its keys sorted) and what an answer means.
public struct ExternalAuthQuery: Sendable, Equatable {
    public static let path = "/api/v2/workspaceagents/me/external-auth"

    public var id = ""
    public var match = ""
    public var listen = false
    public var gitBranch = ""
    public var gitRemoteOrigin = ""
    public var chatID = ""

    public init(id: String = "", match: String = "", listen: Bool = false) {
        self.id = id
        self.match = match
        self.listen = listen
    }

    /// The query items, keys sorted; empty optional ones left out (`id` and `match` always sent).
    public var items: [(String, String)] {
        var items: [(String, String)] = []
        if !chatID.isEmpty { items.append(("chat_id", chatID)) }
        if !gitBranch.isEmpty { items.append(("git_branch", gitBranch)) }
        if !gitRemoteOrigin.isEmpty { items.append(("git_remote_origin", gitRemoteOrigin)) }
        items.append(("id", id))
        if listen { items.append(("listen", "true")) }
        items.append(("match", match))
        return items
    }
}

/// How a command that asked coderd for a token ends when it cannot print one.
public enum GitCredentialsFailure: Error, Equatable, CustomStringConvertible {
    /// Printed by the CLI as the reference prints an error (`error: …`), exit status 1.
    case message(String)
    /// What was to be said is said; exit status 1 with nothing more (the reference's
    /// "canceled" errors).
    case silent

    public var description: String {
        switch self {
        case .message(let text): return text
        case .silent: return "canceled"
        }
    }
}

/// Fetches an external-auth answer: a 200's body decoded; any other status as the SDK's
/// error (its text, and the status for callers that treat 404 apart).
public enum ExternalAuthFetch {
    public enum Outcome: Sendable {
        case answer(ExternalAuthResponse)
        case refused(CoderRESTResponse)
    }

    /// - Parameter context: what the command's errors begin with (`get git token`).
    public static func fetch(
        _ query: ExternalAuthQuery, api: any CoderRESTRequesting, context: String, timeout: Duration = .seconds(30)
    ) async throws(GitCredentialsFailure) -> Outcome {
        let response: CoderRESTResponse
        do {
            response = try await api.get(ExternalAuthQuery.path, query: query.items, timeout: timeout)
        } catch {
            throw .message("\(context): \(error.description)")
        }
        guard response.status == 200 else { return .refused(response) }
        do {
            return .answer(try ExternalAuthResponse.decode(response.body))
        } catch {
            throw .message("\(context): \(error.description)")
        }
    }
}
