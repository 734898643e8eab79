/// A process as kept on disk (``ProcessLog``), so that an agent restart finds it again. A
/// record still without an exit after a restart is a process whose end the agent could not
/// see (`lost`).
struct ProcessRecord: Codable, Sendable, Equatable {
    struct Exit: Codable, Sendable, Equatable {
        var code: Int
        var signal: String?
        var exitedAtUnix: Int64

        enum CodingKeys: String, CodingKey {
            case code
            case signal
            case exitedAtUnix = "exited_at_unix"
        }
    }

    /// Record layout version.
    var version = 1
    var id: String
    var command: String
    var workdir: String
    var background: Bool
    var chatID: String?
    var startedAtUnix: Int64
    var options: StartOptions
    var exit: Exit?

    enum CodingKeys: String, CodingKey {
        case version, id, command, workdir, background
        case chatID = "chat_id"
        case startedAtUnix = "started_at_unix"
        case options
        case exit
    }

    init(_ process: ManagedProcess) {
        id = process.id
        command = process.command
        workdir = process.workdir
        background = process.background
        chatID = process.chatID
        startedAtUnix = process.startedAtUnix
        options = process.options
        if let exit = process.exitInfo, !process.lost {
            self.exit = Exit(code: exit.status.code, signal: exit.status.signal, exitedAtUnix: exit.exitedAtUnix)
        }
    }
}
