import AgentCore
import AgentRPC
import Testing

/// The exchanges' requests and bodies without I/O, as the reference's agent SDK makes them.
struct InstanceIdentityFlowTests {
    func metadata(_ step: InstanceIdentityFlow.Step) -> MetadataRequest? {
        if case .metadata(let request) = step { return request }
        return nil
    }

    func posted(_ step: InstanceIdentityFlow.Step) -> (String, JSONValue)? {
        if case .post(let path, let body) = step { return (path, (try? JSONValue.parseWhole(body)) ?? .null) }
        return nil
    }

    func failure(_ step: InstanceIdentityFlow.Step) -> String? {
        if case .failed(let error) = step { return error.description }
        return nil
    }

    @Test func googleAsksForTheFullIdentityAndPostsTheJWT() throws {
        var flow = InstanceIdentityFlow(cloud: .google, metadataHost: "127.0.0.1:8080", agentName: nil)
        let request = try #require(metadata(flow.start()))
        #expect(request.method == "GET")
        #expect(request.url == "http://127.0.0.1:8080/computeMetadata/v1/instance/service-accounts/default/identity?audience=coder&format=full")
        #expect(request.headers.map { "\($0.0): \($0.1)" } == ["Metadata-Flavor: Google", "User-Agent: gcloud-golang/0.1"])
        let (path, body) = try #require(posted(flow.received(status: 200, body: Array("a.b.c".utf8))))
        #expect(path == "/api/v2/workspaceagents/google-instance-identity")
        #expect(body == .object([("json_web_token", .string("a.b.c"))]))
    }

    @Test func googlesFailuresUseTheLibrarysWords() {
        var flow = InstanceIdentityFlow(cloud: .google, metadataHost: "h", agentName: nil)
        _ = flow.start()
        #expect(failure(flow.received(status: 404, body: [])) == #"get metadata identity: metadata: GCE metadata "instance/service-accounts/default/identity?audience=coder&format=full" not defined"#)
        var other = InstanceIdentityFlow(cloud: .google, metadataHost: "h", agentName: nil)
        _ = other.start()
        #expect(failure(other.received(status: 500, body: Array("boom".utf8))) == "get metadata identity: compute: Received 500 `boom`")
    }

    @Test func awsTakesATokenThenTheSignatureAndDocument() throws {
        var flow = InstanceIdentityFlow(cloud: .aws, metadataHost: "169.254.169.254", agentName: "dev")
        let token = try #require(metadata(flow.start()))
        #expect(token.method == "PUT" && token.url == "http://169.254.169.254/latest/api/token")
        #expect(token.headers.first?.0 == "X-aws-ec2-metadata-token-ttl-seconds" && token.headers.first?.1 == "21600")
        let signature = try #require(metadata(flow.received(status: 200, body: Array("T".utf8))))
        #expect(signature.url == "http://169.254.169.254/latest/dynamic/instance-identity/signature")
        #expect(signature.headers.first?.0 == "X-aws-ec2-metadata-token" && signature.headers.first?.1 == "T")
        let document = try #require(metadata(flow.received(status: 200, body: Array("SIG".utf8))))
        #expect(document.url == "http://169.254.169.254/latest/dynamic/instance-identity/document")
        let (path, body) = try #require(posted(flow.received(status: 200, body: Array("{\"doc\":1}".utf8))))
        #expect(path == "/api/v2/workspaceagents/aws-instance-identity")
        #expect(body == .object([("signature", .string("SIG")), ("document", .string("{\"doc\":1}")), ("agent_name", .string("dev"))]))
    }

    @Test func azurePassesTheAttestedDocumentOn() throws {
        var flow = InstanceIdentityFlow(cloud: .azure, metadataHost: "h:1", agentName: "")
        let request = try #require(metadata(flow.start()))
        #expect(request.url == "http://h:1/metadata/attested/document?api-version=2020-09-01")
        #expect(request.headers.first?.0 == "Metadata" && request.headers.first?.1 == "true")
        let answer = #"{"encoding":"pkcs7","signature":"MIIx","extra":3}"#
        let (_, body) = try #require(posted(flow.received(status: 200, body: Array(answer.utf8))))
        // An empty name is left out.
        #expect(body == .object([("signature", .string("MIIx")), ("encoding", .string("pkcs7"))]))
    }

    @Test(arguments: ["not json", "[1]", #"{"signature":5}"#])
    func azureGarbageIsAnError(_ answer: String) {
        var flow = InstanceIdentityFlow(cloud: .azure, metadataHost: "h", agentName: nil)
        _ = flow.start()
        #expect(failure(flow.received(status: 200, body: Array(answer.utf8)))?.hasPrefix("decode attested document: ") == true)
    }

    @Test func aMetadataErrorStatusFailsTheExchange() {
        var flow = InstanceIdentityFlow(cloud: .aws, metadataHost: "h", agentName: nil)
        _ = flow.start()
        _ = flow.received(status: 200, body: Array("T".utf8))
        #expect(failure(flow.received(status: 503, body: Array("busy".utf8))) == #"aws instance metadata answered HTTP 503: "busy""#)
        var azure = InstanceIdentityFlow(cloud: .azure, metadataHost: "h", agentName: nil)
        _ = azure.start()
        #expect(failure(azure.received(status: 404, body: Array("gone".utf8))) == #"azure instance metadata answered HTTP 404: "gone""#)
    }

    /// An IMDSv1-only service refuses the token (404, 405 or 403): the signature and the
    /// document are asked for without one.
    @Test(arguments: [403, 404, 405])
    func awsWithoutATokenAsksWithoutOne(_ status: Int) throws {
        var flow = InstanceIdentityFlow(cloud: .aws, metadataHost: "m", agentName: nil)
        _ = flow.start()
        let signature = try #require(metadata(flow.received(status: status, body: Array("<html>not found</html>".utf8))))
        #expect(signature.url == "http://m/latest/dynamic/instance-identity/signature")
        #expect(signature.headers.isEmpty)
        let document = try #require(metadata(flow.received(status: 200, body: Array("SIG".utf8))))
        #expect(document.headers.isEmpty)
        let (_, body) = try #require(posted(flow.received(status: 200, body: Array("DOC".utf8))))
        #expect(body == .object([("signature", .string("SIG")), ("document", .string("DOC"))]))
    }

    /// The token goes back as a header: one with a line break (or another control byte)
    /// ends the exchange with a clear error instead of being sent.
    @Test(arguments: ["T\r\nHost: elsewhere", "T\n", "T\u{0}", "T\u{7F}"])
    func anAWSTokenThatIsNoHeaderValueFailsTheExchange(_ token: String) {
        var flow = InstanceIdentityFlow(cloud: .aws, metadataHost: "m", agentName: nil)
        _ = flow.start()
        #expect(failure(flow.received(status: 200, body: Array(token.utf8))) == "aws instance metadata token is not a valid header value")
        var tabbed = InstanceIdentityFlow(cloud: .aws, metadataHost: "m", agentName: nil)
        _ = tabbed.start()
        #expect(metadata(tabbed.received(status: 200, body: Array("T\tok é".utf8)))?.headers.first?.1 == "T\tok é")
    }

    @Test func coderdsAnswerGivesTheTokenOrItsError() {
        let url = "http://c/api/v2/workspaceagents/aws-instance-identity"
        let ok = CoderRESTResponse(method: "POST", url: url, status: 200, body: Array(#"{"session_token":"abc"}"#.utf8))
        #expect((try? InstanceIdentityFlow.sessionToken(from: ok).get()) == "abc")
        let conflict = CoderRESTResponse(method: "POST", url: url, status: 409, body: Array(#"{"message":"Multiple agents found."}"#.utf8))
        #expect(throws: InstanceIdentityError("POST \(url): unexpected status code 409: Multiple agents found.")) {
            try InstanceIdentityFlow.sessionToken(from: conflict).get()
        }
        let empty = CoderRESTResponse(method: "POST", url: url, status: 200, body: Array(#"{"session_token":""}"#.utf8))
        #expect(throws: InstanceIdentityError.self) { try InstanceIdentityFlow.sessionToken(from: empty).get() }
    }

    @Test func theMetadataHostVariables() {
        #expect(InstanceIdentityCloud.google.metadataHost([:]) == "169.254.169.254")
        #expect(InstanceIdentityCloud.google.metadataHost(["GCE_METADATA_HOST": "127.0.0.1:9"]) == "127.0.0.1:9")
        #expect(InstanceIdentityCloud.aws.metadataHost(["CODER_AGENT_AWS_METADATA_HOST": "m:1"]) == "m:1")
        #expect(InstanceIdentityCloud.azure.metadataHost(["CODER_AGENT_AZURE_METADATA_HOST": ""]) == "169.254.169.254")
    }
}

/// `--agent-header` entries, `CODER_AGENT_HEADER`'s list and a header command's lines.
struct AgentHeadersTests {
    @Test func entriesSplitAtTheFirstEquals() throws {
        let headers = try AgentHeaders.parse(["X-A=1", "X-B=a=b", "X-C="])
        #expect(headers.pairs.map { "\($0.0)|\($0.1)" } == ["X-A|1", "X-B|a=b", "X-C|"])
        #expect(throws: AgentHeaders.ParseError(description: #"split header "nope" had less than two parts"#)) {
            try AgentHeaders.parse(["X-A=1", "nope"])
        }
    }

    @Test func theVariableIsACommaList() {
        #expect(AgentHeaders.environmentList("") == [])
        #expect(AgentHeaders.environmentList("a=1,b=2") == ["a=1", "b=2"])
        #expect(AgentHeaders.environmentList(#""a=1,2",b=2"#) == ["a=1,2", "b=2"])
        #expect(AgentHeaders.environmentList(#""say ""hi""=x""#) == [#"say "hi"=x"#])
    }

    @Test func commandOutputLines() {
        #expect(AgentHeaders.lines(Array("a=1\nb=2\n".utf8)) == ["a=1", "b=2"])
        #expect(AgentHeaders.lines(Array("a=1\r\n\nb=2".utf8)) == ["a=1", "", "b=2"])
        #expect(AgentHeaders.lines([]) == [])
    }
}
