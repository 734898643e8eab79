import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird

/// `POST /write-file/{id}/cancel` and `POST /edit-files/{id}/cancel`: the
/// id must be the call's UUIDv5; a call never received is recorded as canceled (`{}`), one
/// in progress is waited for and its recorded answer returned.
struct ToolCallCancel: Sendable {
    let ledger: ToolCallLedger

    struct Outcome: Encodable, Sendable {
        var started: Bool
        var statusCode: Int
        var body: String

        enum CodingKeys: String, CodingKey {
            case started, statusCode = "status_code", body
        }
    }

    func cancel(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        guard let (key, _) = try ToolCallKey.from(request.headers, chat: context.chat) else {
            throw APIError(.badRequest, "Invalid tool call headers.", detail: "Cancel needs the tool call headers of the call.")
        }
        let id = (context.parameters.get("id") ?? "").lowercased()
        guard id == key.cancelID else {
            throw APIError(.badRequest, "Invalid tool call id.", detail: "The id must be the UUIDv5 of this chat, message and call.")
        }
        guard ledger.cancel(key) != nil, let record = await ledger.settled(key) else {
            return JSONResponse.make([String: String]())
        }
        switch record.state {
        case .done(let answer, _):
            return JSONResponse.make(Outcome(started: true, statusCode: Int(answer.status.code), body: String(decoding: answer.body, as: UTF8.self)))
        case .canceled:
            return JSONResponse.make([String: String]())
        case .running:
            throw APIError(.internalServerError, "Stopped waiting for the tool call.")
        }
    }
}
