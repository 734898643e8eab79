import AgentCore
import GitCredentials
import Synchronization
import Testing

/// coderd as the askpass sees it: the answers given in order (then none: each request waits
/// out its timeout and fails, as a client against a silent server does), and every request's
/// query and timeout.
final class RecordingCoderd: CoderRESTRequesting, Sendable {
    struct Request: Sendable {
        var query: [String]
        var timeout: Duration
    }

    private let state: Mutex<(answers: [String], requests: [Request])>

    /// `answers`: 200 bodies.
    init(_ answers: [String]) {
        state = Mutex((answers: answers, requests: []))
    }

    var requests: [Request] { state.withLock { $0.requests } }

    func send(_ method: String, _ path: String, query: [(String, String)], json body: [UInt8]?, timeout: Duration) async throws(CoderRESTError) -> CoderRESTResponse {
        let answer = state.withLock { state -> String? in
            state.requests.append(Request(query: query.map { "\($0.0)=\($0.1)" }, timeout: timeout))
            return state.answers.isEmpty ? nil : state.answers.removeFirst()
        }
        guard let answer else {
            try? await Task.sleep(for: timeout)
            throw .connection(method: method, url: path, reason: "no answer within \(timeout)")
        }
        return CoderRESTResponse(method: method, url: "https://coder.example.com" + path, status: 200, body: Array(answer.utf8))
    }
}

@Suite(.timeLimit(.minutes(1)))
struct GitAskpassTests {
    static let prompt = "Username for 'https://github.com': "
    static let needsLink = #"{"url":"https://coder.example.com/external-auth/github"}"#

    /// The first request carries the repository's branch, origin and chat; the `listen`
    /// polls only the match, as the reference's (`ExternalAuthRequest{Match, Listen: true}`),
    /// so that coderd does not mark the chat's git state stale at every poll.
    @Test func listenPollsCarryTheMatchAlone() async throws {
        let coderd = RecordingCoderd([Self.needsLink, Self.needsLink, #"{"access_token":"gho_1","username":"gho_1"}"#])
        var askpass = GitAskpass(api: coderd)
        askpass.chatID = "8a5f0e8e-4f6c-4b7e-9d2a-0c1d2e3f4a5b"
        askpass.gitBranch = "main"
        askpass.gitRemoteOrigin = "https://github.com/coder/coder.git"
        askpass.sleep = { _ in }
        #expect(try await askpass.run(prompt: Self.prompt) { _ in } == "gho_1")
        let queries = coderd.requests.map(\.query)
        #expect(queries.count == 3)
        #expect(
            queries.first == [
                "chat_id=8a5f0e8e-4f6c-4b7e-9d2a-0c1d2e3f4a5b", "git_branch=main", "git_remote_origin=https://github.com/coder/coder.git", "id=",
                "match=https://github.com",
            ])
        #expect(queries.dropFirst().allSatisfy { $0 == ["id=", "listen=true", "match=https://github.com"] }, "\(queries)")
    }

    /// A request under way when the whole wait's bound ends is cut there: its timeout is no
    /// longer than what is left, so the askpass ends at the bound, not a request's 30 s later.
    @Test func theWholeWaitsBoundAlsoCutsARequestUnderWay() async throws {
        let coderd = RecordingCoderd([Self.needsLink])
        var askpass = GitAskpass(api: coderd)
        // No wait before a poll, and long enough that a busy host still makes a listen
        // request inside it.
        askpass.listenLimit = .seconds(3)
        askpass.sleep = { _ in }
        let configured = askpass
        let error = await #expect(throws: GitCredentialsFailure.self) { try await configured.run(prompt: Self.prompt) { _ in } }
        #expect(error == .message("timed out after 3.0 seconds waiting for Git authentication"))
        let listens = coderd.requests.dropFirst()
        #expect(!listens.isEmpty)
        #expect(listens.allSatisfy { $0.timeout <= .seconds(3) }, "\(listens.map(\.timeout))")
    }
}
