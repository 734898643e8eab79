/// The 409 a repeated or late tool call gets (spec file-api §3: `{"message","code"}`, the
/// code being what the chat side reads), with the `detail` every other error of the API
/// carries: what happened and what to do.
public struct ToolCallRefusal: Encodable, Sendable, Equatable {
    public var message: String
    public var detail: String
    public var code: String

    public init(message: String, detail: String, code: String) {
        self.message = message
        self.detail = detail
        self.code = code
    }

    /// A repeat of a call whose recorded request differs.
    public static func inputMismatch(_ message: String) -> ToolCallRefusal {
        ToolCallRefusal(
            message: message,
            detail: "A repeat of a tool call must send the request it was first made with; a different request needs a new Coder-Tool-Call-Id.",
            code: "input_mismatch")
    }

    /// A call the agent has no record of and that may have run before it started.
    public static func agentStartedAfterCall(_ message: String) -> ToolCallRefusal {
        ToolCallRefusal(
            message: message,
            detail: "The agent restarted after this tool call was made and keeps no record that old; check the call's effect before making a new one.",
            code: "agent_started_after_tool_call")
    }

    /// A call older than the newest message the chat has sent.
    public static func stale(_ message: String) -> ToolCallRefusal {
        ToolCallRefusal(
            message: message, detail: "A newer message of the chat has made tool calls since; this one is not run.", code: "stale_tool_call")
    }

    /// A call that was canceled.
    public static func canceled(_ message: String) -> ToolCallRefusal {
        ToolCallRefusal(message: message, detail: "The call was canceled before it finished; a repeat is not run again.", code: "tool_call_canceled")
    }
}
