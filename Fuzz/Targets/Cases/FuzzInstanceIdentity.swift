import AgentCore
import AgentJSON
import AgentRPC

/// The instance-identity exchange (AgentRPC's `InstanceIdentityFlow`) fed a cloud metadata
/// service's answers and then coderd's: the first byte picks the cloud, then each answer is a
/// status and a body. Any answers end in a metadata request, a post or a failure, never a
/// trap; at most three metadata requests come before the post (AWS's token, signature and
/// document; one for the others); every request goes to the metadata host over plain HTTP
/// with header values a Go server would take (no control byte but tab); the post goes to the
/// cloud's exchange path with a JSON object of strings that carries the answers as they came;
/// coderd's answer gives a non-empty token or an error.
public func fuzzInstanceIdentity(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let cloud = InstanceIdentityCloud.allCases[Int(input.byte()) % InstanceIdentityCloud.allCases.count]
    let agentName = input.bool() ? String(decoding: input.data(maxLength: 16), as: UTF8.self) : nil
    var flow = InstanceIdentityFlow(cloud: cloud, metadataHost: "169.254.169.254", agentName: agentName)
    var step = flow.start()
    var requests = 0
    var answers: [String] = []
    for _ in 0..<4 {
        switch step {
        case .metadata(let request):
            requests += 1
            require(requests <= (cloud == .aws ? 3 : 1), "\(requests) metadata requests for \(cloud)")
            require(request.url.hasPrefix("http://169.254.169.254/"), "request to \(request.url)")
            for (name, value) in request.headers {
                require(value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }, "header \(name) carries a control byte")
            }
            let status = input.bool() ? 200 : input.int(in: 100...599)
            let body = input.data(maxLength: 1024)
            answers.append(String(decoding: body, as: UTF8.self))
            step = flow.received(status: status, body: body)
        case .post(let path, let body):
            require(path == cloud.exchangePath, "posted to \(path)")
            checkPost(body, cloud: cloud, agentName: agentName, answers: answers)
            let response = CoderRESTResponse(method: "POST", url: "http://coderd" + path, status: input.bool() ? 200 : 401, body: input.rest())
            if case .success(let token) = InstanceIdentityFlow.sessionToken(from: response) {
                require(!token.isEmpty && response.status == 200, "a token from a \(response.status) or an empty one")
            }
            return 0
        case .failed:
            return 0
        }
    }
    require(false, "the exchange went on past four steps")
    return 0
}

/// The post is a JSON object of strings: the answers as they came (Google's JWT; AWS's
/// signature and document) and the agent's name when it has one.
private func checkPost(_ body: [UInt8], cloud: InstanceIdentityCloud, agentName: String?, answers: [String]) {
    guard let value = try? JSONValue.parseWhole(body), case .object(let members) = value else {
        require(false, "the post is not a JSON object: \(String(decoding: body, as: UTF8.self))")
        return
    }
    for (name, member) in members { require(member.stringValue != nil, "\(name) is not a string") }
    switch cloud {
    case .google:
        require(value["json_web_token"]?.stringValue == answers.last, "the JWT changed on its way")
    case .aws:
        require(answers.count == 3, "posted after \(answers.count) answers")
        require(value["signature"]?.stringValue == answers[1] && value["document"]?.stringValue == answers[2], "the answers changed on their way")
    case .azure:
        require(value["signature"] != nil && value["encoding"] != nil, "the attested document's members are missing")
    }
    if let agentName, !agentName.isEmpty {
        require(value["agent_name"]?.stringValue == agentName, "the agent's name is missing")
    }
}
