import AgentCore

/// One instance-identity exchange as the reference's agent SDK makes it, without I/O: the
/// metadata requests in order, then the JSON body to post to coderd, then the token read back.
/// The caller performs each ``Step`` and feeds the answer to ``received(status:body:)``.
public struct InstanceIdentityFlow: Sendable {
    public enum Step: Sendable {
        /// Ask the metadata service this, then call ``received(status:body:)``.
        case metadata(MetadataRequest)
        /// Post `body` (JSON) to coderd's `path` without a session token.
        case post(path: String, body: [UInt8])
        case failed(InstanceIdentityError)
    }

    /// Google's identity path (the default service account; `format=full` carries the instance id).
    public static let googleIdentitySuffix = "instance/service-accounts/default/identity?audience=coder&format=full"

    public let cloud: InstanceIdentityCloud
    private let base: String
    private let agentName: String
    /// Answers gathered so far (AWS: the IMDS token, then the signature).
    private var answers: [String] = []
    /// AWS: the IMDSv2 token, nil when the token request was refused (IMDSv1 only).
    private var awsToken: String?

    /// - Parameters:
    ///   - metadataHost: `host[:port]` of the metadata service.
    ///   - agentName: sent as `agent_name` when not empty (coderd picks among an instance's agents).
    public init(cloud: InstanceIdentityCloud, metadataHost: String, agentName: String?) {
        self.cloud = cloud
        self.base = "http://" + metadataHost
        self.agentName = agentName ?? ""
    }

    /// The first request.
    public func start() -> Step {
        switch cloud {
        case .google:
            return .metadata(
                MetadataRequest(
                    method: "GET", url: base + "/computeMetadata/v1/" + Self.googleIdentitySuffix,
                    headers: [("Metadata-Flavor", "Google"), ("User-Agent", "gcloud-golang/0.1")]))
        case .aws:
            return .metadata(
                MetadataRequest(
                    method: "PUT", url: base + "/latest/api/token", headers: [("X-aws-ec2-metadata-token-ttl-seconds", "21600")]))
        case .azure:
            return .metadata(
                MetadataRequest(
                    method: "GET", url: base + "/metadata/attested/document?api-version=2020-09-01", headers: [("Metadata", "true")]))
        }
    }

    /// The next step once the metadata service answered the last request. An answer other
    /// than 200 fails the exchange (the reference passes AWS's and Azure's on to coderd,
    /// which then refuses them), but for AWS's token: a service that refuses it (IMDSv1
    /// only) is asked for the signature and document without one, where the reference
    /// sends the refusal's body as the token, which such a service ignores.
    public mutating func received(status: Int, body: [UInt8]) -> Step {
        let text = String(decoding: body, as: UTF8.self)
        let tokenStep = cloud == .aws && answers.isEmpty
        guard status == 200 || tokenStep else { return .failed(metadataFailure(status: status, text: text)) }
        switch cloud {
        case .google:
            return post([("json_web_token", .string(text))])
        case .aws:
            if tokenStep, status == 200, !Self.isHeaderValue(body) {
                // Sent as a header next: a line break in it would end the header early.
                return .failed(InstanceIdentityError("aws instance metadata token is not a valid header value"))
            }
            if tokenStep { awsToken = status == 200 ? text : nil }
            answers.append(text)
            if answers.count < 3 {
                let what = answers.count == 1 ? "signature" : "document"
                return .metadata(
                    MetadataRequest(
                        method: "GET", url: base + "/latest/dynamic/instance-identity/" + what,
                        headers: awsToken.map { [("X-aws-ec2-metadata-token", $0)] } ?? []))
            }
            return post([("signature", .string(answers[1])), ("document", .string(answers[2]))])
        case .azure:
            // Decoded as Go decodes it into a struct: other members ignored, missing ones empty.
            let document: JSONValue
            do {
                document = try JSONValue.parseFirst(body)
            } catch {
                return .failed(InstanceIdentityError("decode attested document: \(error)"))
            }
            guard case .object = document else {
                return .failed(InstanceIdentityError("decode attested document: not a JSON object"))
            }
            for name in ["signature", "encoding"] {
                if let member = document[name], member != .null, member.stringValue == nil {
                    return .failed(InstanceIdentityError("decode attested document: \(name) is not a string"))
                }
            }
            return post([
                ("signature", .string(document["signature"]?.stringValue ?? "")),
                ("encoding", .string(document["encoding"]?.stringValue ?? "")),
            ])
        }
    }

    /// A header value as Go's `net/http` accepts one: no control byte but tab.
    static func isHeaderValue(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    private func post(_ members: [(String, JSONValue)]) -> Step {
        var members = members
        if !agentName.isEmpty { members.append(("agent_name", .string(agentName))) }
        return .post(path: cloud.exchangePath, body: JSONValue.object(members).encoded)
    }

    private func metadataFailure(status: Int, text: String) -> InstanceIdentityError {
        let shown = String(text.prefix(200))
        switch cloud {
        case .google:
            // The Go library's words.
            if status == 404 {
                return InstanceIdentityError("get metadata identity: metadata: GCE metadata \(goQuote(Self.googleIdentitySuffix)) not defined")
            }
            return InstanceIdentityError("get metadata identity: compute: Received \(status) `\(shown)`")
        case .aws, .azure:
            return InstanceIdentityError("\(cloud.rawValue) instance metadata answered HTTP \(status): \(goQuote(shown))")
        }
    }

    /// The session token in coderd's answer to the post: 200 `{"session_token": …}`; any
    /// other status is the reference's `unexpected status code` text with coderd's message.
    public static func sessionToken(from response: CoderRESTResponse) -> Result<String, InstanceIdentityError> {
        guard response.status == 200 else { return .failure(InstanceIdentityError(response.unexpectedStatusText)) }
        guard let answer = try? JSONValue.parseFirst(response.body), let token = answer["session_token"]?.stringValue else {
            return .failure(InstanceIdentityError("\(response.method) \(response.url): decode answer: no session_token"))
        }
        guard !token.isEmpty else { return .failure(InstanceIdentityError("\(response.method) \(response.url): empty session token")) }
        return .success(token)
    }
}
