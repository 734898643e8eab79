import AgentCore

/// git's `GIT_ASKPASS` answered with the user's external-auth token: asks coderd for the
/// prompt's origin, sends the user to the provider's URL when there is no token yet and
/// waits (`listen=true`) until they have authenticated, then prints git's one line.
public struct GitAskpass: Sendable {
    /// How long the wait for a browser authentication may last in all (the reference waits
    /// until git is killed).
    public static let maxListen: Duration = .seconds(30 * 60)
    /// One `listen` request's bound: coderd holds it until the token arrives.
    public static let listenRequestTimeout: Duration = .seconds(30)

    public let api: any CoderRESTRequesting
    /// `CODER_CHAT_ID`, the current branch and `origin`'s URL (sent when known).
    public var chatID = ""
    public var gitBranch = ""
    public var gitRemoteOrigin = ""
    /// `CODER_CHAT_AGENT=true`: an AI agent runs git; it cannot open a browser, so the URL is
    /// printed and git fails at once instead of waiting.
    public var chatAgent = false
    /// Waits between polls (tests pass a clock of their own).
    public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    /// The whole wait's bound (``maxListen``; tests choose a shorter one): a request under way
    /// when it ends is cut there too.
    public var listenLimit: Duration = GitAskpass.maxListen

    public init(api: any CoderRESTRequesting) {
        self.api = api
    }

    /// Runs the exchange for `prompt`; returns git's answer line (without newline).
    /// `stderr` gets the reference's notices.
    public func run(prompt: String, stderr: @Sendable (String) -> Void) async throws(GitCredentialsFailure) -> String {
        let parsed: AskpassPrompt
        do { parsed = try AskpassPrompt.parse(prompt) } catch { throw .message("parse host: \(error.description)") }
        var query = ExternalAuthQuery(match: parsed.host)
        query.chatID = chatID
        query.gitBranch = gitBranch
        query.gitRemoteOrigin = gitRemoteOrigin
        var token: ExternalAuthResponse
        switch try await ExternalAuthFetch.fetch(query, api: api, context: "get git token") {
        case .answer(let answer):
            token = answer
        case .refused(let response) where response.status == 404:
            let error = response.apiError
            var lines = [error?.message ?? ""]
            if let detail = error?.detail, !detail.isEmpty { lines.append(detail) }
            stderr(Self.warning("Coder was unable to handle this git request. The default git behavior will be used instead.", lines))
            throw .silent
        case .refused(let response):
            throw .message("get git token: " + response.unexpectedStatusText)
        }
        if !token.url.isEmpty {
            if chatAgent {
                stderr("Authentication with Git is required: ask the user to open this URL and authenticate, then run the command again:\r\n\(token.url)\r\n")
                throw .silent
            }
            stderr("Open the following URL to authenticate with Git:\n\(token.url)\r\n")
            token = try await listen(query)
            stderr("You've been authenticated with Git!\r\n")
        }
        return token.askpassAnswer(promptUser: parsed.user)
    }

    /// Polls with `listen=true` (at once, then 250 ms doubling to 10 s between tries) until
    /// coderd answers with a token; errors are tried again, up to ``listenLimit`` in all: each
    /// wait and each request is cut at that deadline (a request's own bound is
    /// ``listenRequestTimeout``). The polls carry the match alone (`id=&listen=true&match=…`),
    /// as the reference's do: the branch, origin and chat went with the first request, and
    /// coderd marks the chat's git state stale for each request that has them.
    func listen(_ base: ExternalAuthQuery) async throws(GitCredentialsFailure) -> ExternalAuthResponse {
        let query = ExternalAuthQuery(match: base.match, listen: true)
        var backoff = ListenBackoff()
        let clock = ContinuousClock()
        let deadline = clock.now + listenLimit
        while clock.now < deadline {
            do { try await sleep(min(backoff.next(), max(deadline - clock.now, .zero))) } catch { throw .message("waiting for Git authentication: canceled") }
            let remaining = deadline - clock.now
            guard remaining > .zero else { break }
            if case .answer(let answer)? = try? await ExternalAuthFetch.fetch(
                query, api: api, context: "get git token", timeout: min(Self.listenRequestTimeout, remaining)),
                answer.url.isEmpty
            {
                return answer
            }
        }
        throw .message("timed out after \(Self.text(listenLimit)) waiting for Git authentication")
    }

    /// `30 minutes`; a bound that is not whole minutes in seconds (`0.5 seconds`).
    static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0, seconds % 60 == 0 { return "\(seconds / 60) minutes" }
        return "\(Double(seconds) + Double(attoseconds) / 1e18) seconds"
    }

    /// The reference's `cliui.Warn`: `WARN: header`, then each line as `  | line`.
    static func warning(_ header: String, _ lines: [String]) -> String {
        "WARN: \(header)\r\n" + lines.map { "  | \($0)\r\n" }.joined()
    }
}
