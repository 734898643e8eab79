import AgentCore
import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The binary's instance-identity authentication against the double and metadata services on
/// loopback: each cloud's exchange, the token exchanged again before each connection, coderd's
/// refusals in the log with retries, and metadata services that hang or answer garbage.
@Suite(.timeLimit(.minutes(5)))
struct WorkspaceAgentAuthTests {
    enum Cloud: String, CaseIterable, Sendable {
        case google, aws, azure

        var auth: String { rawValue + "-instance-identity" }
        var hostVariable: String {
            switch self {
            case .google: "GCE_METADATA_HOST"
            case .aws: "CODER_AGENT_AWS_METADATA_HOST"
            case .azure: "CODER_AGENT_AZURE_METADATA_HOST"
            }
        }
    }

    /// A metadata service that proves `instanceID` (`instance` read on every request, so a
    /// test can change it) the way `cloud`'s does.
    static func metadata(_ cloud: Cloud, instance: @escaping @Sendable () -> String) async throws -> MetadataServer {
        try await MetadataServer { request in
            let id = instance()
            let path = String(request.uri.prefix { $0 != "?" })
            switch (cloud, request.method, path) {
            case (.google, "GET", "/computeMetadata/v1/instance/service-accounts/default/identity"):
                return .respond(status: 200, body: InstanceIdentityDouble.googleJWT(instanceID: id))
            case (.aws, "PUT", "/latest/api/token"):
                return .respond(status: 200, body: "imds-token")
            case (.aws, "GET", "/latest/dynamic/instance-identity/signature"):
                return .respond(status: 200, body: InstanceIdentityDouble.signature(of: InstanceIdentityDouble.awsDocument(instanceID: id)))
            case (.aws, "GET", "/latest/dynamic/instance-identity/document"):
                return .respond(status: 200, body: InstanceIdentityDouble.awsDocument(instanceID: id))
            case (.azure, "GET", "/metadata/attested/document"):
                return .respond(status: 200, body: InstanceIdentityDouble.azureAttested(vmID: id))
            default:
                return .respond(status: 404, body: "not found")
            }
        }
    }

    static func launch(_ cloud: Cloud, url: String, metadata: MetadataServer, arguments: [String] = [], environment: [String: String] = [:]) throws -> AgentDaemon {
        var variables = ["CODER_AGENT_URL": url, "CODER_AGENT_AUTH": cloud.auth, cloud.hostVariable: metadata.host]
        variables.merge(environment) { $1 }
        return try AgentDaemon.launch(["--http-address", "127.0.0.1:0"] + arguments, environment: variables)
    }

    /// The token each RPC upgrade presented, in order.
    static func presentedTokens(_ double: ControlPlaneDouble) -> [String] {
        double.recorded.withLock { $0.upgradeHeaders }.map { headers in headers.first { $0.name == "Coder-Session-Token" }?.value ?? "" }
    }

    /// Each cloud: the metadata requests with their headers, the body posted (`agent_name` only
    /// when set), the connection made with the exchanged token, and commands given that token.
    @Test(arguments: Cloud.allCases)
    func eachCloudsIdentityIsExchangedForTheToken(_ cloud: Cloud) async throws {
        let double = ControlPlaneDouble()
        let identity = double.serveInstanceIdentity()
        let exchanged = "3f2a9c1e-7b4d-4e8a-9c2b-5d6e7f8a9b0c"
        identity.register(instanceID: "i-\(cloud)", name: "main", token: exchanged)
        let metadata = try await Self.metadata(cloud) { "i-\(cloud)" }
        // Azure names its agent: `agent_name` is sent; the others leave it out.
        let named = cloud == .azure
        try await double.run { url in
            let agent = try Self.launch(cloud, url: url, metadata: metadata, environment: named ? ["CODER_AGENT_NAME": "main"] : [:])
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { !$0.startups.isEmpty } }, "\(agent.log)")
            #expect(Self.presentedTokens(double).first == exchanged, "\(agent.log)")
            #expect(double.recorded.withLock { $0.refusals }.isEmpty)

            let body = try #require(identity.exchanges(cloud.rawValue).first)
            switch cloud {
            case .google:
                #expect(body == .object([("json_web_token", .string(InstanceIdentityDouble.googleJWT(instanceID: "i-google")))]))
                let request = try #require(metadata.requests.first)
                #expect(request.uri == "/computeMetadata/v1/instance/service-accounts/default/identity?audience=coder&format=full")
                #expect(request.header("Metadata-Flavor") == "Google")
            case .aws:
                let document = InstanceIdentityDouble.awsDocument(instanceID: "i-aws")
                #expect(body == .object([("signature", .string(InstanceIdentityDouble.signature(of: document))), ("document", .string(document))]))
                let requests = metadata.requests.prefix(3)
                #expect(requests.map(\.method) == ["PUT", "GET", "GET"])
                #expect(requests.first?.header("X-aws-ec2-metadata-token-ttl-seconds") == "21600")
                #expect(requests.dropFirst().allSatisfy { $0.header("X-aws-ec2-metadata-token") == "imds-token" })
            case .azure:
                let attested = try JSONValue.parseWhole(Array(InstanceIdentityDouble.azureAttested(vmID: "i-azure").utf8))
                #expect(
                    body
                        == .object([
                            ("signature", attested["signature"] ?? .null), ("encoding", .string("pkcs7")), ("agent_name", .string("main")),
                        ]))
                let request = try #require(metadata.requests.first)
                #expect(request.uri == "/metadata/attested/document?api-version=2020-09-01")
                #expect(request.header("Metadata") == "true")
            }
            // No session token on the exchange itself.
            #expect(double.httpRequests.first { $0.path.hasSuffix("-instance-identity") }?.header("Coder-Session-Token") == nil)

            // Commands get the exchanged token as CODER_AGENT_TOKEN, once the manifest is in
            // their environment (READY comes after it; UpdateStartup may come before).
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.lifecycle }.contains(.ready) }, "\(agent.log)")
            let client = RawHTTPClient(port: try await agent.port())
            let start = try await client.request("POST", "/api/v0/processes/start", json: #"{"command":"printf %s \"$CODER_AGENT_TOKEN\""}"#)
            let id = try #require(jsonObject(start.body)?["id"] as? String, "\(start)")
            let out = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
            #expect(jsonObject(out.body)?["output"] as? String == exchanged, "\(out)")
        }
        await metadata.close()
    }

    /// Before each connection the token is exchanged again: after the control plane drops
    /// the connection, a second exchange happens and the rotated token is the one presented.
    @Test func theTokenIsExchangedAgainBeforeEachConnection() async throws {
        let double = ControlPlaneDouble()
        let identity = double.serveInstanceIdentity()
        let first = "11111111-2222-4333-8444-555555555555"
        let rotated = "66666666-7777-4888-9999-aaaaaaaaaaaa"
        identity.register(instanceID: "i-rotate", token: first)
        let metadata = try await Self.metadata(.aws) { "i-rotate" }
        try await double.run { url in
            let agent = try Self.launch(.aws, url: url, metadata: metadata)
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.manifests } >= 1 }, "\(agent.log)")
            #expect(identity.exchanges("aws").count == 1)
            // A rebuilt workspace: the same instance, a new agent token.
            identity.register(instanceID: "i-rotate", token: rotated)
            await double.dropConnections()
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.manifests } >= 2 }, "\(agent.log)")
            #expect(identity.exchanges("aws").count >= 2)
            #expect(Self.presentedTokens(double).first == first)
            #expect(Self.presentedTokens(double).last == rotated, "\(Self.presentedTokens(double))")
        }
        await metadata.close()
    }

    enum Refusal: String, CaseIterable, Sendable {
        /// A proof the double did not sign: 401.
        case invalidIdentity
        /// No agent on the instance: 404.
        case unknownInstance
        /// Two agents on the instance and no name: 409.
        case ambiguousAgent
    }

    /// coderd's refusals reach the agent's log in its words, and the agent tries again with
    /// its back-off (several exchanges, still running).
    @Test(arguments: Refusal.allCases)
    func coderdsRefusalsAreLoggedAndRetried(_ refusal: Refusal) async throws {
        let double = ControlPlaneDouble()
        let identity = double.serveInstanceIdentity()
        var expected = ""
        switch refusal {
        case .invalidIdentity:
            identity.register(instanceID: "i-1", token: double.token)
            expected = "unexpected status code 401: Invalid AWS identity."
        case .unknownInstance:
            expected = #"unexpected status code 404: Instance with id "i-1" not found."#
        case .ambiguousAgent:
            identity.register(instanceID: "i-1", name: "b", token: double.token)
            identity.register(instanceID: "i-1", name: "a", token: "0a0a0a0a-0a0a-4a0a-8a0a-0a0a0a0a0a0a")
            expected = #"unexpected status code 409: Multiple agents found with instance ID "i-1". Set CODER_AGENT_NAME to one of: a, b"#
        }
        let metadata = try await Self.metadata(.aws) { "i-1" }
        let message = expected
        if refusal == .invalidIdentity {
            let honest = try await Self.metadata(.aws) { "i-1" }
            metadata.answer { request in
                request.uri.hasSuffix("/signature") ? .respond(status: 200, body: "forged") : honest.answer(for: request)
            }
        }
        try await double.run { url in
            let agent = try Self.launch(.aws, url: url, metadata: metadata)
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(60)) { identity.exchanges("aws").count >= 6 }, "\(agent.log)")
            // Backed off, not a busy loop: five waits of at least 81, 131, 212, 342 and 554 ms
            // (the schedule's 162 ms × 1.618ⁿ, each drawn from the upper half of its step) lie
            // between the first exchange and the sixth.
            let starts = metadata.requests.filter { $0.method == "PUT" }.map(\.at)
            #expect(starts.count >= 6 && starts[5] - starts[0] >= .milliseconds(1300), "\(starts)")
            #expect(await eventually(timeout: .seconds(30)) { agent.log.contains(message) }, "\(agent.log)")
            #expect(agent.log.contains("refresh token: POST \(url)/api/v2/workspaceagents/aws-instance-identity"), "\(agent.log)")
            #expect(agent.reap() == nil, "\(agent.log)")
            #expect(double.recorded.withLock { $0.upgradeAttempts } == 0)
        }
        await metadata.close()
    }

    /// A metadata service that answers bytes that are not HTTP, then one that never answers:
    /// each is an error the agent logs and retries (the hang cut at its timeout); once the
    /// service answers, the agent connects.
    @Test func aGarbageOrHangingMetadataServiceIsRetried() async throws {
        let double = ControlPlaneDouble()
        let identity = double.serveInstanceIdentity()
        identity.register(instanceID: "i-g", token: double.token)
        let honest = try await Self.metadata(.google) { "i-g" }
        let calls = Mutex(0)
        let metadata = try await MetadataServer { request in
            let call = calls.withLock { n -> Int in
                n += 1
                return n
            }
            switch call {
            case 1: return .garbage(Array("\u{0}\u{1}not http at all\r\n\r\n".utf8))
            case 2: return .respond(status: 503, body: "unavailable")
            case 3: return .hang
            default: return honest.answer(for: request)
            }
        }
        try await double.run { url in
            let agent = try Self.launch(.google, url: url, metadata: metadata)
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(120)) { double.recorded.withLock { !$0.startups.isEmpty } }, "\(agent.log)")
            #expect(calls.withLock { $0 } >= 4)
            #expect(agent.log.contains("compute: Received 503 `unavailable`"), "\(agent.log)")
            #expect(agent.log.contains("context deadline exceeded"), "\(agent.log)")
            #expect(agent.reap() == nil)
        }
        await metadata.close()
        await honest.close()
    }

    enum HeaderSource: String, CaseIterable, Sendable {
        case flags
        case variables
    }

    /// The extra headers (given and from the command, which sees `CODER_URL`) reach the
    /// metadata service, the exchange, the RPC dial and the REST `/reinit` request.
    @Test(arguments: HeaderSource.allCases)
    func extraHeadersReachEveryRequest(_ source: HeaderSource) async throws {
        let double = ControlPlaneDouble()
        let identity = double.serveInstanceIdentity()
        identity.register(instanceID: "i-h", token: double.token)
        let reinit = double.serveReinit()
        let metadata = try await Self.metadata(.aws) { "i-h" }
        let command = #"echo "X-Command=two"; echo "X-Url=$CODER_URL"; echo ignored >&2"#
        try await double.run { url in
            let agent: AgentDaemon
            switch source {
            case .flags:
                agent = try Self.launch(
                    .aws, url: url, metadata: metadata,
                    arguments: ["--agent-header", "X-Given=one", "--agent-header", "X-Also=a=b", "--agent-header-command", command])
            case .variables:
                agent = try Self.launch(
                    .aws, url: url, metadata: metadata,
                    environment: ["CODER_AGENT_HEADER": "X-Given=one,X-Also=a=b", "CODER_AGENT_HEADER_COMMAND": command])
            }
            defer { agent.cleanup() }
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { !$0.startups.isEmpty } && reinit.requests >= 1 }, "\(agent.log)")
            let expected = ["X-Given": "one", "X-Also": "a=b", "X-Command": "two", "X-Url": url]
            func carries(_ headers: [(name: String, value: String)]) -> Bool {
                expected.allSatisfy { name, value in headers.contains { $0.name == name && $0.value == value } }
            }
            #expect(metadata.requests.count >= 3 && metadata.requests.allSatisfy { carries($0.headers) }, "\(metadata.requests.map(\.headers))")
            let exchange = try #require(double.httpRequests.first { $0.path.hasSuffix("aws-instance-identity") })
            #expect(carries(exchange.headers), "\(exchange.headers)")
            let upgrade = try #require(double.recorded.withLock { $0.upgradeHeaders.first })
            #expect(carries(upgrade), "\(upgrade)")
            let poll = try #require(double.httpRequests.first { $0.path == "/api/v2/workspaceagents/me/reinit" })
            #expect(carries(poll.headers), "\(poll.headers)")
            #expect(poll.header("Coder-Session-Token") == double.token)
            #expect(poll.queryValue("wait") == "true")
        }
        await metadata.close()
    }

    /// An in-workspace command under instance identity does its own exchange, as the
    /// reference's: the external-auth request carries the exchanged token, not the
    /// `CODER_AGENT_TOKEN` it was given (a token coderd would refuse here).
    @Test func inWorkspaceCommandsExchangeTheirOwnToken() async throws {
        let double = ControlPlaneDouble()
        let identity = double.serveInstanceIdentity()
        let exchanged = "5e5e5e5e-1111-4222-8333-444444444444"
        identity.register(instanceID: "i-cmd", token: exchanged)
        let metadata = try await Self.metadata(.aws) { "i-cmd" }
        let link = try CoderLink()
        defer { link.remove() }
        try await double.run { base in
            double.externalAuth.withLock { $0.providers = [DoubleExternalAuthProvider(id: "github", regex: "^https://github\\.com/")] }
            double.linkExternalAuth("github", token: GitAskpassEndToEndTests.token)
            let outcome = await link.run(
                ["external-auth", "access-token", "github"],
                environment: [
                    "CODER_AGENT_URL": base, "CODER_AGENT_AUTH": "aws-instance-identity", "CODER_AGENT_AWS_METADATA_HOST": metadata.host,
                    "CODER_AGENT_TOKEN": "00000000-0000-4000-8000-000000000000",
                ])
            #expect(outcome.status == 0, "\(outcome.stdout)")
            #expect(outcome.stdout == GitAskpassEndToEndTests.token)
            let request = try #require(double.httpRequests.first { $0.path == GitAskpassEndToEndTests.path })
            #expect(request.header("Coder-Session-Token") == exchanged)
            #expect(identity.exchanges("aws").count == 1)
        }
        await metadata.close()
    }
}
