import AgentCore
import Foundation
import Synchronization

/// coderd's three instance-identity routes on the double (`POST /api/v2/workspaceagents/
/// {google,aws,azure}-instance-identity`) with coderd's answers and error texts. The clouds'
/// signatures are stood in for by ``signature(of:)``: a proof the double made is valid, any other is not.
public final class InstanceIdentityDouble: Sendable {
    public struct Agent: Sendable {
        public var name: String
        public var token: String
    }

    private let double: ControlPlaneDouble
    /// Agents by instance id, as coderd's database has them for the latest builds.
    private let agents = Mutex<[String: [Agent]]>([:])

    init(double: ControlPlaneDouble) {
        self.double = double
    }

    /// Adds an agent on `instanceID` (or gives an existing one of that name a new token); its
    /// token is accepted by the RPC route from now on.
    public func register(instanceID: String, name: String = "main", token: String) {
        agents.withLock { all in
            var list = all[instanceID] ?? []
            list.removeAll { $0.name == name }
            list.append(Agent(name: name, token: token))
            all[instanceID] = list
        }
        double.acceptedTokens.withLock { _ = $0.insert(token) }
    }

    /// The bodies posted to `cloud`'s route, parsed, in arrival order.
    public func exchanges(_ cloud: String) -> [JSONValue] {
        double.httpRequests.filter { $0.method == "POST" && $0.path == "/api/v2/workspaceagents/\(cloud)-instance-identity" }
            .map { (try? JSONValue.parseWhole($0.body)) ?? .null }
    }

    /// The stand-in for a cloud's signature over `content`.
    public static func signature(of content: String) -> String {
        Data(("double-signed:" + content).utf8).base64EncodedString()
    }

    /// A Google identity JWT for `instanceID` (`format=full` claims), signed by the double.
    public static func googleJWT(instanceID: String) -> String {
        func encode(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let signed =
            encode(#"{"alg":"RS256","typ":"JWT"}"#) + "."
            + encode(#"{"aud":"coder","google":{"compute_engine":{"instance_id":\#(jsonQuote(instanceID)),"project_id":"p"}}}"#)
        return signed + "." + encode(signature(of: signed))
    }

    /// An AWS instance identity document for `instanceID`.
    public static func awsDocument(instanceID: String) -> String {
        #"{"accountId":"123456789012","instanceId":\#(jsonQuote(instanceID)),"region":"us-east-1"}"#
    }

    /// Azure's attested document answer (`{"encoding","signature"}`) for the VM `vmID`.
    public static func azureAttested(vmID: String) -> String {
        let content = #"{"vmId":\#(jsonQuote(vmID))}"#
        let pkcs7 = Data((signature(of: content) + "." + content).utf8).base64EncodedString()
        return #"{"encoding":"pkcs7","signature":\#(jsonQuote(pkcs7))}"#
    }

    // MARK: Routes

    func google(_ request: DoubleHTTPRequest) -> DoubleHTTPResponse {
        guard let body = try? JSONValue.parseWhole(request.body), case .object = body else { return Self.badJSON }
        let name = body["agent_name"]?.stringValue ?? ""
        guard let jwt = body["json_web_token"]?.stringValue, !jwt.isEmpty else { return Self.required("json_web_token") }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, Self.base64URL(parts[2]) == Self.signature(of: parts[0] + "." + parts[1]),
            let payload = Self.base64URL(parts[1]), let claims = try? JSONValue.parseWhole(Array(payload.utf8))
        else {
            return .error(401, "Invalid GCP identity.", detail: "idtoken: invalid token signature")
        }
        let instance = claims["google"]?["compute_engine"]?["instance_id"] ?? .string("")
        guard case .string(let id) = instance else {
            return .error(400, "Error decoding JWT claims.", detail: "'Google.ComputeEngine.InstanceID' expected type 'string'")
        }
        return authenticate(instanceID: id, agentName: name)
    }

    func aws(_ request: DoubleHTTPRequest) -> DoubleHTTPResponse {
        guard let body = try? JSONValue.parseWhole(request.body), case .object = body else { return Self.badJSON }
        let name = body["agent_name"]?.stringValue ?? ""
        guard let signature = body["signature"]?.stringValue, !signature.isEmpty else { return Self.required("signature") }
        guard let document = body["document"]?.stringValue, !document.isEmpty else { return Self.required("document") }
        guard signature == Self.signature(of: document),
            let id = (try? JSONValue.parseWhole(Array(document.utf8)))?["instanceId"]?.stringValue
        else {
            return .error(401, "Invalid AWS identity.", detail: "crypto/rsa: verification error")
        }
        return authenticate(instanceID: id, agentName: name)
    }

    func azure(_ request: DoubleHTTPRequest) -> DoubleHTTPResponse {
        guard let body = try? JSONValue.parseWhole(request.body), case .object = body else { return Self.badJSON }
        let name = body["agent_name"]?.stringValue ?? ""
        guard let signature = body["signature"]?.stringValue, !signature.isEmpty else { return Self.required("signature") }
        guard let encoding = body["encoding"]?.stringValue, !encoding.isEmpty else { return Self.required("encoding") }
        let decoded = Data(base64Encoded: signature).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let pieces = decoded.split(separator: ".", maxSplits: 1).map(String.init)
        guard pieces.count == 2, pieces[0] == Self.signature(of: pieces[1]),
            let id = (try? JSONValue.parseWhole(Array(pieces[1].utf8)))?["vmId"]?.stringValue
        else {
            return .error(401, "Invalid Azure identity.", detail: "Signature verification failed.")
        }
        return authenticate(instanceID: id, agentName: name)
    }

    /// coderd's `handleAuthInstanceID`: the agent of `instanceID` (by name when given).
    func authenticate(instanceID: String, agentName: String) -> DoubleHTTPResponse {
        let name = agentName.trimmingCharacters(in: .whitespaces)
        let candidates = agents.withLock { $0[instanceID] ?? [] }
        guard !candidates.isEmpty else { return .error(404, "Instance with id \(goQuote(instanceID)) not found.") }
        let selected: Agent
        if !name.isEmpty {
            guard let match = candidates.first(where: { $0.name == name }) else {
                return .error(404, "No agent found with instance ID \(goQuote(instanceID)) and name \(goQuote(name)).")
            }
            selected = match
        } else {
            guard candidates.count == 1 else {
                let names = candidates.map(\.name).sorted().joined(separator: ", ")
                return .error(409, "Multiple agents found with instance ID \(goQuote(instanceID)). Set CODER_AGENT_NAME to one of: \(names)")
            }
            selected = candidates[0]
        }
        return .json(200, #"{"session_token":\#(jsonQuote(selected.token))}"#)
    }

    static let badJSON = DoubleHTTPResponse.error(400, "Request body must be valid JSON.")

    static func required(_ field: String) -> DoubleHTTPResponse {
        .json(400, #"{"message":"Validation failed.","validations":[{"field":\#(jsonQuote(field)),"detail":"Validation failed for tag \"required\" with value: \"\""}]}"#)
    }

    static func base64URL(_ text: String) -> String? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { String(decoding: $0, as: UTF8.self) }
    }
}

extension ControlPlaneDouble {
    /// Serves coderd's three instance-identity exchanges from now on; register agents on the answer.
    public func serveInstanceIdentity() -> InstanceIdentityDouble {
        let identity = InstanceIdentityDouble(double: self)
        handleHTTP("POST", "/api/v2/workspaceagents/google-instance-identity") { identity.google($0) }
        handleHTTP("POST", "/api/v2/workspaceagents/aws-instance-identity") { identity.aws($0) }
        handleHTTP("POST", "/api/v2/workspaceagents/azure-instance-identity") { identity.azure($0) }
        return identity
    }
}
