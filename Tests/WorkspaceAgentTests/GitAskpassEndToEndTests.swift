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
    static let path = "/api/v2/workspaceagents/me/external-auth"
    static let token = "gho_0123456789abcdefTOKEN"

    /// Starts the git server (accepting `user:password`) and the double; `answer` serves the
    /// external-auth route (after the double's token check).
    static func withServers(
        user: String, password: String,
        _ answer: @escaping @Sendable (DoubleHTTPRequest, _ origin: String) -> DoubleHTTPResponse,
        _ body: @escaping @Sendable (GitWorkspace, _ origin: String, _ environment: [String: String], ControlPlaneDouble, ServerChild) async throws -> Void
    ) async throws {
        let workspace = try await GitWorkspace()
        defer { workspace.remove() }
        let script = String("\(#filePath)".prefix { _ in true }.dropLast("GitAskpassEndToEndTests.swift".count)) + "Servers/git_http_backend.py"
        let server = try ServerChild(["python3", script, workspace.directory + "/srv", user, password])
        defer { server.stop() }
        let port = try #require(await server.line(), "the git server printed no port")
        let origin = "http://127.0.0.1:\(port)"
        let double = ControlPlaneDouble()
        try await double.run { base in
            double.handleHTTP("GET", Self.path) { request in
                if let denied = double.agentAuthorization(request) { return denied }
                return answer(request, origin)
            }
            let environment = ["GIT_ASKPASS": AgentDaemon.binaryPath, "CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token]
            try await body(workspace, origin, environment, double, server)
        }
    }

    static func tokenAnswer(username: String, password: String) -> DoubleHTTPResponse {
        .json(200, #"{"access_token":"\#(token)","token_extra":null,"url":"","type":"github","username":"\#(username)","password":"\#(password)"}"#)
    }

    @Test func aCloneOverHTTPGetsTheOwnersTokenThroughAskpass() async throws {
        try await Self.withServers(user: Self.token, password: Self.token, { request, origin in
            request.queryValue("match") == origin ? Self.tokenAnswer(username: Self.token, password: "") : .error(404, "no provider")
        }) { workspace, origin, environment, double, _ in
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
        try await Self.withServers(user: "oauth2", password: Self.token, { _, _ in
            Self.tokenAnswer(username: "oauth2", password: Self.token)
        }) { workspace, origin, environment, _, _ in
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: environment)
            #expect(cloned.status == 0, "\(cloned.stdout)")
            #expect(workspace.clonedContent("dest") == GitWorkspace.content)
        }
    }

    @Test func anUnlinkedProviderIsWaitedForWithListen() async throws {
        let listens = Mutex(0)
        try await Self.withServers(user: Self.token, password: Self.token, { request, _ in
            guard request.queryValue("listen") != nil else {
                return .json(200, #"{"access_token":"","url":"https://coder.example.com/external-auth/github","type":"github","username":"","password":""}"#)
            }
            // The first wait fails (a proxy cut it): the askpass tries again.
            let number = listens.withLock { count -> Int in
                count += 1
                return count
            }
            return number == 1 ? .error(502, "Bad gateway.") : Self.tokenAnswer(username: Self.token, password: "")
        }) { workspace, origin, environment, _, _ in
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: environment)
            #expect(cloned.status == 0, "\(cloned.stdout)")
            #expect(cloned.stdout.contains("Open the following URL to authenticate with Git:\nhttps://coder.example.com/external-auth/github"))
            #expect(cloned.stdout.contains("You've been authenticated with Git!"))
            #expect(workspace.clonedContent("dest") == GitWorkspace.content)
            #expect(listens.withLock { $0 } >= 2)
        }
    }

    @Test func noMatchingProviderWarnsAndLeavesGitToItsDefault() async throws {
        try await Self.withServers(user: Self.token, password: Self.token, { _, origin in
            .error(404, "No matching external auth provider found in Coder for the url \"\(origin)\".", detail: "configured: id=\"github\"")
        }) { workspace, origin, environment, _, _ in
            let cloned = await workspace.git(["clone", "-q", origin + "/repo.git", "dest"], environment: environment)
            #expect(cloned.status != 0)
            #expect(cloned.stdout.contains("WARN: Coder was unable to handle this git request. The default git behavior will be used instead.\r\n  | No matching external auth provider found in Coder for the url \"\(origin)\".\r\n  | configured: id=\"github\"\r\n"))
        }
    }

    @Test func aChatAgentGetsTheURLAtOnceInsteadOfAWait() async throws {
        try await Self.withServers(user: Self.token, password: Self.token, { _, _ in
            .json(200, #"{"url":"https://coder.example.com/external-auth/github"}"#)
        }) { workspace, origin, environment, double, _ in
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
    static func run(_ arguments: [String], answer: @escaping @Sendable (DoubleHTTPRequest) -> DoubleHTTPResponse) async throws -> (ChildProgram.Outcome, [DoubleHTTPRequest]) {
        let link = try CoderLink()
        defer { link.remove() }
        let double = ControlPlaneDouble()
        let outcome = Mutex<ChildProgram.Outcome?>(nil)
        try await double.run { base in
            double.handleHTTP("GET", GitAskpassEndToEndTests.path) { request in
                double.agentAuthorization(request) ?? answer(request)
            }
            let result = await link.run(["external-auth", "access-token"] + arguments, environment: ["CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token])
            outcome.withLock { $0 = result }
        }
        return (try #require(outcome.withLock { $0 }), double.httpRequests)
    }

    @Test func theTokenIsPrintedWithoutANewline() async throws {
        let (outcome, requests) = try await Self.run(["github"]) { _ in GitAskpassEndToEndTests.tokenAnswer(username: "u", password: "") }
        #expect(outcome.status == 0)
        #expect(outcome.stdout == GitAskpassEndToEndTests.token)
        #expect(requests.first?.queryValue("id") == "github")
        #expect(requests.first?.queryValue("match") == "")
    }

    @Test func withoutALinkTheURLIsPrintedAndTheStatusIsOne() async throws {
        let (outcome, _) = try await Self.run(["github"]) { _ in .json(200, #"{"url":"https://coder.example.com/external-auth/github"}"#) }
        #expect(outcome.status == 1)
        #expect(outcome.stdout == "https://coder.example.com/external-auth/github")
    }

    @Test func extraAndJSONOutput() async throws {
        let answer: @Sendable (DoubleHTTPRequest) -> DoubleHTTPResponse = { _ in
            .json(200, #"{"access_token":"xoxp","token_extra":{"authed_user":{"id":"U42"}},"type":"slack","expires_at":"2026-12-01T00:00:00Z"}"#)
        }
        let (extra, _) = try await Self.run(["slack", "--extra", "authed_user.id"], answer: answer)
        #expect(extra.status == 0)
        #expect(extra.stdout == "U42")
        let (json, _) = try await Self.run(["slack", "-o", "json"], answer: answer)
        #expect(json.status == 0)
        #expect(json.stdout.hasPrefix("{\n  \"access_token\": \"xoxp\",\n  \"token_extra\": {\n    \"authed_user\": {\n      \"id\": \"U42\"\n    }\n  },\n"))
        #expect(json.stdout.contains("\"expires_at\": \"2026-12-01T00:00:00Z\""))
    }

    @Test func anUnknownProviderIsTheSDKsError() async throws {
        let (outcome, _) = try await Self.run(["nope"]) { _ in .error(404, "No matching external auth provider found in Coder for the url \"\".") }
        #expect(outcome.status == 1)
        #expect(outcome.stdout.contains("error: get external auth token: GET "))
        #expect(outcome.stdout.contains("unexpected status code 404: No matching external auth provider found"))
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
