import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// git's `GIT_ASKPASS` is the agent's binary: a clone over HTTP from `git http-backend` on
/// loopback that accepts only the token the control-plane double hands out.
@Suite(.timeLimit(.minutes(3)))
struct GitAskpassEndToEndTests {
    static let path = ControlPlaneDouble.externalAuthPath
    static let token = "gho_0123456789abcdefTOKEN"

    /// Starts the git server (accepting `user:password`) and the double with a provider of
    /// `type` for the server's origin (`configure` links it, or not).
    static func withServers(
        user: String, password: String, type: String = "github",
        configure: @escaping @Sendable (ControlPlaneDouble) -> Void = { $0.linkExternalAuth("github", token: token) },
        _ body: @escaping @Sendable (GitWorkspace, _ origin: String, _ environment: [String: String], ControlPlaneDouble, ServerChild) async throws -> Void
    ) async throws {
        let workspace = try await GitWorkspace()
        defer { workspace.remove() }
        let script = String("\(#filePath)".dropLast("GitAskpassEndToEndTests.swift".count)) + "Servers/git_http_backend.py"
        let server = try ServerChild(["python3", script, workspace.directory + "/srv", user, password])
        defer { server.stop() }
        let port = try #require(await server.line(), "the git server printed no port")
        let origin = "http://127.0.0.1:\(port)"
        let double = ControlPlaneDouble()
        double.externalAuth.withLock {
            $0.providers = [
                DoubleExternalAuthProvider(id: "gitlab-elsewhere", regex: #"^https://gitlab\.example\.com"#, type: "gitlab"),
                DoubleExternalAuthProvider(id: "github", regex: "^" + NSRegularExpression.escapedPattern(for: origin), type: type),
            ]
        }
        configure(double)
        try await double.run { base in
            let environment = ["GIT_ASKPASS": AgentDaemon.binaryPath, "CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token]
            try await body(workspace, origin, environment, double, server)
        }
    }

    @Test func aCloneOverHTTPGetsTheOwnersTokenThroughAskpass() async throws {
        try await Self.withServers(user: Self.token, password: Self.token) { workspace, origin, environment, double, _ in
            // Without the agent as askpass git has no credentials: the server's check is real.
            let refused = await workspace.git(["clone", "-q", origin + "/repo.git", "plain"])
            #expect(refused.status != 0)
            #expect(workspace.clonedContent("plain") == nil)

            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "with-askpass"], environment: environment)
            #expect(cloned.status == 0, "\(cloned.stdout)")
            #expect(workspace.clonedContent("with-askpass") == GitWorkspace.content)
            let asked = double.httpRequests.filter { $0.path == Self.path }
            #expect(asked.count == 2)  // Username, then Password
            #expect(asked.allSatisfy { $0.queryValue("match") == origin && $0.header("Coder-Session-Token") == double.token })
            #expect(asked.allSatisfy { $0.queryValue("listen") == nil })
        }
    }

    @Test func gitlabStyleProvidersAnswerUsernameThenPassword() async throws {
        try await Self.withServers(user: "oauth2", password: Self.token, type: "gitlab") { workspace, origin, environment, _, _ in
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: environment)
            #expect(cloned.status == 0, "\(cloned.stdout)")
            #expect(workspace.clonedContent("dest") == GitWorkspace.content)
        }
    }

    @Test func anUnlinkedProviderIsWaitedForWithListen() async throws {
        try await Self.withServers(user: Self.token, password: Self.token, configure: { _ in }) { workspace, origin, environment, double, _ in
            // The owner links the provider once the askpass waits for it.
            let owner = Task {
                var deadline = PollDeadline(.seconds(60))
                while !deadline.hasPassed, !double.httpRequests.contains(where: { $0.queryValue("listen") != nil }) {
                    await deadline.sleep(.milliseconds(20))
                }
                double.linkExternalAuth("github", token: Self.token)
            }
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: environment)
            _ = await owner.value
            #expect(cloned.status == 0, "\(cloned.stdout)")
            #expect(cloned.stdout.contains("Open the following URL to authenticate with Git:\nhttps://coder.example.com/external-auth/github"))
            #expect(cloned.stdout.contains("You've been authenticated with Git!"))
            #expect(workspace.clonedContent("dest") == GitWorkspace.content)
        }
    }

    @Test func noMatchingProviderWarnsAndLeavesGitToItsDefault() async throws {
        try await Self.withServers(
            user: Self.token, password: Self.token,
            configure: { double in
                double.externalAuth.withLock { _ = $0.providers.removeLast() }
            }
        ) { workspace, origin, environment, _, _ in
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: environment)
            #expect(cloned.status != 0)
            #expect(
                cloned.stdout.contains(
                    """
                    WARN: Coder was unable to handle this git request. The default git behavior will be used instead.\r
                      | No matching external auth provider found in Coder for the url "\(origin)".\r
                      | The configured external auth provider have regex filters that do not match the url. Provider url regex: gitlab-elsewhere="^https://gitlab\\\\.example\\\\.com"\r

                    """), "\(cloned.stdout)")
        }
    }

    @Test func aChatAgentGetsTheURLAtOnceInsteadOfAWait() async throws {
        try await Self.withServers(user: Self.token, password: Self.token, configure: { _ in }) { workspace, origin, environment, double, _ in
            var chat = environment
            chat["CODER_CHAT_AGENT"] = "true"
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: chat)
            #expect(cloned.status != 0)
            #expect(cloned.stdout.contains("https://coder.example.com/external-auth/github"))
            #expect(double.httpRequests.allSatisfy { $0.queryValue("listen") == nil })
        }
    }
}

/// `coder external-auth access-token <provider>` against the double.
@Suite(.timeLimit(.minutes(2)))
struct ExternalAuthCommandTests {
    static func run(_ arguments: [String], configure: @escaping @Sendable (ControlPlaneDouble) -> Void) async throws -> (ChildProgram.Outcome, [DoubleHTTPRequest]) {
        let link = try CoderLink()
        defer { link.remove() }
        let double = ControlPlaneDouble()
        double.externalAuth.withLock {
            $0.providers = [
                DoubleExternalAuthProvider(id: "github", regex: #"^https://github\.com"#),
                DoubleExternalAuthProvider(id: "slack", regex: #"^https://slack\.com"#, type: "slack"),
            ]
        }
        configure(double)
        let outcome = Mutex<ChildProgram.Outcome?>(nil)
        try await double.run { base in
            let result = await link.run(["external-auth", "access-token"] + arguments, environment: ["CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token])
            outcome.withLock { $0 = result }
        }
        return (try #require(outcome.withLock { $0 }), double.httpRequests)
    }

    @Test func theTokenIsPrintedWithoutANewline() async throws {
        let (outcome, requests) = try await Self.run(["github"]) { $0.linkExternalAuth("github", token: GitAskpassEndToEndTests.token) }
        #expect(outcome.status == 0)
        #expect(outcome.stdout == GitAskpassEndToEndTests.token)
        #expect(requests.first?.queryValue("id") == "github")
        #expect(requests.first?.queryValue("match") == "")
    }

    @Test func withoutALinkTheURLIsPrintedAndTheStatusIsOne() async throws {
        let (outcome, _) = try await Self.run(["github"]) { _ in }
        #expect(outcome.status == 1)
        #expect(outcome.stdout == "https://coder.example.com/external-auth/github")
    }

    @Test func extraAndJSONOutput() async throws {
        let answer: @Sendable (ControlPlaneDouble) -> Void = { $0.linkExternalAuth("slack", token: "xoxp", extra: #"{"authed_user":{"id":"U42"}}"#) }
        let (extra, _) = try await Self.run(["slack", "--extra", "authed_user.id"], configure: answer)
        #expect(extra.status == 0)
        #expect(extra.stdout == "U42")
        let (json, _) = try await Self.run(["slack", "-o", "json"], configure: answer)
        #expect(json.status == 0)
        #expect(json.stdout.hasPrefix("{\n  \"access_token\": \"xoxp\",\n  \"token_extra\": {\n    \"authed_user\": {\n      \"id\": \"U42\"\n    }\n  },\n"))
        #expect(json.stdout.contains("\"type\": \"slack\",\n  \"expires_at\": \"0001-01-01T00:00:00Z\",\n  \"username\": \"xoxp\""))
    }

    @Test func anUnknownProviderIsTheSDKsError() async throws {
        let (outcome, _) = try await Self.run(["nope"]) { _ in }
        #expect(outcome.status == 1)
        #expect(outcome.stdout.contains("error: get external auth token: GET "))
        #expect(outcome.stdout.contains("unexpected status code 404: No matching external auth provider found"))
    }

    @Test func aControlPlaneThatIsDownFailsAtOnce() async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let port = try GitSSHEndToEndTests.SSHDaemon.freePort()
        let outcome = await link.run(
            ["external-auth", "access-token", "github"], environment: ["CODER_AGENT_URL": "http://127.0.0.1:\(port)", "CODER_AGENT_TOKEN": "t"])
        #expect(outcome.status == 1)
        // Refused, not retried until the connect timeout ("context deadline exceeded").
        #expect(outcome.stdout.contains("error: get external auth token: GET http://127.0.0.1:\(port)/api/v2/workspaceagents/me/external-auth?id=github&match=: connect: connection refused"), "\(outcome.stdout)")
    }

    @Test func outsideAWorkspaceItSaysSo() async throws {
        let link = try CoderLink()
        defer { link.remove() }
        let outcome = await link.run(["external-auth", "access-token", "github"])
        #expect(outcome.status == 1)
        #expect(outcome.stdout.contains("No agent token found, this command must be run from inside a running workspace."))
        #expect(outcome.stdout.contains("error: agent token not found"))
    }
}
