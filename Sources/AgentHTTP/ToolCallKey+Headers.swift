import AgentCore
import HTTPTypes

extension ToolCallKey {
    /// The headers' call and its age; nil when none of the three headers is present. A bad
    /// set is a 400 (``APIError``), which is why this half of the key lives with the HTTP core.
    public static func from(_ headers: HTTPFields, chat: ChatIdentity?) throws(APIError) -> (key: ToolCallKey, ageMs: UInt64)? {
        let message = headers[values: messageHeader]
        let call = headers[values: callHeader]
        let age = headers[values: ageHeader]
        if message.isEmpty && call.isEmpty && age.isEmpty { return nil }
        guard message.count == 1, call.count == 1, age.count == 1,
            let messageID = UInt64(message[0]), messageID > 0,
            let callID = call[0].percentDecoded(), !callID.isEmpty,
            let ageMs = UInt64(age[0])
        else {
            throw APIError(.badRequest, "Invalid tool call headers.", detail: "Send Coder-Tool-Call-Message-Id (> 0), Coder-Tool-Call-Id and Coder-Tool-Call-Age-Ms (>= 0) together, once each.")
        }
        // Kept in ledgers (the process API's on disk): a bounded size each.
        guard callID.utf8.count <= maxCallIDBytes else {
            throw APIError(.badRequest, "Invalid tool call headers.", detail: "Coder-Tool-Call-Id is at most \(maxCallIDBytes) bytes.")
        }
        guard let chat else {
            throw APIError(.badRequest, "Invalid tool call headers.", detail: "Tool call headers need a Coder-Chat-Id.")
        }
        return (ToolCallKey(chat: chat.id, messageID: messageID, callID: callID), ageMs)
    }
}
